package syncer

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/lock"
)

// TestUndatedInvalidCopyOutlivesAnOlderWrite: the ERP's newest copy of a
// record is invalid and has no version that can be read; the run is
// served it, then, on a later page, a valid copy of a higher version than
// the row's that is older than the invalid one (an earlier version served
// late). The valid copy lands, and the row must end marked quarantined:
// the mark it cleared is set again.
func TestUndatedInvalidCopyOutlivesAnOlderWrite(t *testing.T) {
	t.Parallel()
	item := func(version int, at string) string {
		return strings.NewReplacer(`"version":3`, fmt.Sprintf(`"version":%d`, version), `2025-01-01T00:00:00.001Z`, at).Replace(hostileItem)
	}
	invalid := strings.NewReplacer(`"status":"ACTIVE"`, `"status":"BOGUS"`, `"version":3,`, ``, `2025-01-01T00:00:00.001Z`, `2025-01-03T00:00:00Z`).Replace(hostileItem)
	var second atomic.Bool // the first run is served v4 alone; the second the invalid copy, then v5
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/count") {
			fmt.Fprint(w, `{"count":2}`)
			return
		}
		switch cursor := r.URL.Query().Get("cursor"); {
		case !second.Load():
			fmt.Fprintf(w, `{"data":[%s],"next_cursor":null}`, item(4, "2025-01-01T00:00:00Z"))
		case cursor == "":
			fmt.Fprintf(w, `{"data":[%s],"next_cursor":"2"}`, invalid)
		default:
			fmt.Fprintf(w, `{"data":[%s],"next_cursor":null}`, item(5, "2025-01-02T00:00:00Z"))
		}
	}))
	t.Cleanup(srv.Close)
	src, err := erp.New(erp.Config{BaseURL: srv.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := testenv.MigratedStore(t)
	locks := lock.New(testenv.Redis(t), &lock.Options{Prefix: testenv.RandomName("erpsync-test:") + ":"})
	since := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := New(Config{Job: testenv.RandomName("job-"), Mode: ModeBackfill, Since: since}, src, st, locks, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := s.Run(context.Background()); err != nil || rep.Status != store.StatusSucceeded || rep.Inserted != 1 {
		t.Fatalf("first run: %v, %+v", err, rep)
	}
	second.Store(true)
	if rep, err := s.Run(context.Background()); err != nil || rep.Status != store.StatusSucceeded || rep.Updated != 1 || rep.Invalid != 1 {
		t.Fatalf("second run: %v, %+v", err, rep)
	}
	var row struct {
		ErpVersion int64
		Marked     bool
	}
	if err := st.DB().Raw("SELECT erp_version, quarantined_at IS NOT NULL AS marked FROM memberships WHERE erp_id = 'ab'").Scan(&row).Error; err != nil {
		t.Fatal(err)
	}
	if row.ErpVersion != 5 || !row.Marked {
		t.Fatalf("row ab: version %d, marked %t; want 5, marked (the ERP's newest copy, of 2025-01-03, is invalid)", row.ErpVersion, row.Marked)
	}
}
