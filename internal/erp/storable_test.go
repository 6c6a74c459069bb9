package erp

import (
	"strings"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
)

// On a database whose text cannot hold U+0000, a record with one in any
// string, a line's included, is quarantined, not written; elsewhere it is
// kept.
func TestSplitUnstorableNUL(t *testing.T) {
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := func() []Record {
		return []Record{
			{ErpID: "a", MemberID: "m", Status: "ACTIVE", StartsAt: at, UpdatedAt: at, Version: 1},
			{ErpID: "b", MemberID: "m\x00", Status: "ACTIVE", StartsAt: at, UpdatedAt: at, Version: 1},
			{ErpID: "c", Vals: []entity.Value{{S: "c"}}, UpdatedAt: at, Version: 1, Children: []entity.Lines{{{{S: "x\x00y"}}}}},
		}
	}
	keep, inv := SplitUnstorableIn(recs(), nil, true)
	if len(keep) != 1 || keep[0].ErpID != "a" || len(inv) != 2 || inv[0].ErpID != "b" || inv[1].ErpID != "c" || !strings.Contains(inv[0].Reason, "U+0000") {
		t.Fatalf("noNUL: kept %+v, invalid %+v", keep, inv)
	}
	if keep, inv := SplitUnstorableIn(recs(), nil, false); len(keep) != 3 || len(inv) != 0 {
		t.Fatalf("NUL allowed: kept %d, invalid %+v", len(keep), inv)
	}
}
