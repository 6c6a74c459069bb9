package syncer

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/lock"
)

// TestMarksOfNewRecordsAcrossOverlappingRuns: two runs of one job overlap,
// one served a valid version 1 of records that have no row yet, the other
// their invalid version 2. Whichever of them reaches a record first, its
// row ends at version 1 and marked at version 2: the run that meets the
// invalid copy stores it before it reads the rows, and the run that makes
// a row reads the stored copies after its write commits. The locks' lease
// outlasts the lock wait: a run that waited for a lock while it held
// another, which the other run waited for, would fail the round instead
// of waiting for a lease to run out.
func TestMarksOfNewRecordsAcrossOverlappingRuns(t *testing.T) {
	t.Parallel()
	st, _ := testenv.MigratedStore(t)
	locks := lock.New(testenv.Redis(t), &lock.Options{Prefix: testenv.RandomName("erpsync-test:") + ":"})
	job := testenv.RandomName("job-")
	const records = 120
	for round := range 4 {
		ids := make([]string, records)
		valid, invalid := make([]string, records), make([]string, records)
		for i := range ids {
			ids[i] = fmt.Sprintf("n%d-%03d", round, i)
			valid[i] = markCopy{n: 1}.item(ids[i])
			invalid[i] = markCopy{n: 2, invalid: true}.item(ids[i])
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for k, items := range [][]string{valid, invalid} {
			s, err := New(Config{Job: job, Mode: ModeBackfill, Since: markEpoch.AddDate(-1, 0, 0), ChunkSize: 3 + 2*k, PageSize: 10,
				LockTTL: 2 * time.Minute, LockWait: 10 * time.Second},
				feedOf(t, items, 10), st, locks, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				rep, err := s.Run(context.Background())
				if err == nil && rep.Status != store.StatusSucceeded {
					err = fmt.Errorf("status %s", rep.Status)
				}
				errs[k] = err
			}()
		}
		wg.Wait()
		for k, err := range errs {
			if err != nil {
				t.Fatalf("round %d, run %d: %v", round, k, err)
			}
		}
		var rows []struct {
			ErpID   string
			Version int64
			Mark    *int64
		}
		if err := st.DB().Raw("SELECT erp_id, erp_version AS version, quarantined_version AS mark FROM memberships WHERE erp_id IN ?", ids).Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		var wrong []string
		for _, r := range rows {
			if r.Version != 1 || r.Mark == nil || *r.Mark != 2 {
				wrong = append(wrong, fmt.Sprintf("%s: version %d, mark %s", r.ErpID, r.Version, markOf(r.Mark)))
			}
		}
		if len(rows) != records || len(wrong) > 0 {
			t.Fatalf("round %d: %d rows of %d records; %d not at version 1 marked at 2:\n%s", round, len(rows), records, len(wrong), strings.Join(wrong, "\n"))
		}
	}
}

// feedOf serves items as the contract's feed, size a page.
func feedOf(t *testing.T, items []string, size int) *erp.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/count") {
			fmt.Fprintf(w, `{"count":%d}`, len(items))
			return
		}
		from, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		to := min(from+size, len(items))
		next := "null"
		if to < len(items) {
			next = strconv.Quote(strconv.Itoa(to))
		}
		fmt.Fprintf(w, `{"data":[%s],"next_cursor":%s}`, strings.Join(items[from:to], ","), next)
	}))
	t.Cleanup(srv.Close)
	src, err := erp.New(erp.Config{BaseURL: srv.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return src
}
