package verify

import (
	"fmt"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
)

// A scan that serves a record's current copy invalid and, in the same
// scan, a replay of an older valid copy keeps the invalid copy when the
// valid one would not supersede it in the table: the reconcile marks the
// row, and verify counts it, as a run served only the invalid copy would.
// The rule is the table's own (store.Current.Marks), checked on every
// pair of a valid and an invalid copy, versioned or not, dated or not,
// against what a row holding the valid copy would do with the invalid
// one.
func TestInvalidCopyKeptPastAnOlderValidReplay(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	times := []time.Time{{}, t0.Add(-time.Minute), t0, t0.Add(time.Minute)}
	for _, validVersion := range []int64{4, 5, 6} {
		for _, invVersion := range []int64{0, 4, 5, 6} {
			for _, invAt := range times {
				name := fmt.Sprintf("valid v%d at %s, invalid v%d at %s", validVersion, t0.Format("15:04"), invVersion, invAt.Format("15:04"))
				f := &Feed{byID: map[string]*want{}, quarantined: map[string]erp.Invalid{}}
				// The invalid copy first, then the replay: the order a page
				// takes does not matter.
				f.add(&erp.Page{Invalid: []erp.Invalid{{ErpID: "M1", Version: invVersion, UpdatedAt: invAt, Reason: "status"}}}, false, true)
				f.add(&erp.Page{Records: []erp.Record{{ErpID: "M1", Status: "ACTIVE", Version: validVersion, UpdatedAt: t0, StartsAt: t0}}}, false, true)
				f.dropSuperseded()
				// What a row holding the valid copy does with the invalid one.
				want := store.Current{Version: validVersion, UpdatedAt: t0}.Marks(invVersion, invAt)
				if got := f.Quarantined("M1"); got != want {
					t.Errorf("%s: the scan keeps the invalid copy: %v, want %v", name, got, want)
				}
			}
		}
	}
	// The case the rule is for: the current copy invalid, without a
	// version, later than an old valid copy replayed in the same scan.
	f := &Feed{byID: map[string]*want{}, quarantined: map[string]erp.Invalid{}}
	f.add(&erp.Page{Records: []erp.Record{{ErpID: "M1", Status: "ACTIVE", Version: 5, UpdatedAt: t0, StartsAt: t0}},
		Invalid: []erp.Invalid{{ErpID: "M1", UpdatedAt: t0.Add(time.Hour), Reason: "version"}}}, false, true)
	f.dropSuperseded()
	if !f.Quarantined("M1") || f.invalid != 1 {
		t.Errorf("the current invalid copy without a version was dropped for a replay of v5 (invalid %d)", f.invalid)
	}
}
