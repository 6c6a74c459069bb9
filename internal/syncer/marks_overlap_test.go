package syncer_test

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
	"github.com/erpsync/erpsync/internal/reconcile"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
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
	st, locks, job := markWorld(t)
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
			s, err := syncer.New(syncer.Config{Job: job, Mode: syncer.ModeBackfill, Since: markEpoch.AddDate(-1, 0, 0), ChunkSize: 3 + 2*k, PageSize: 10,
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
		checkMarkedAt1Of2(t, st, fmt.Sprintf("round %d", round), ids)
	}
}

// markWorld is a marks test's database, lock client and job name.
func markWorld(t *testing.T) (*store.Store, *lock.Client, string) {
	t.Helper()
	st, _ := testenv.MigratedStore(t)
	locks := lock.New(testenv.Redis(t), &lock.Options{Prefix: testenv.RandomName("erpsync-test:") + ":"})
	return st, locks, testenv.RandomName("job-")
}

// checkMarkedAt1Of2 fails the test unless the record of each of ids has a
// row at version 1 marked at version 2.
func checkMarkedAt1Of2(t *testing.T, st *store.Store, what string, ids []string) {
	t.Helper()
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
	if len(rows) != len(ids) || len(wrong) > 0 {
		t.Fatalf("%s: %d rows of %d records; %d not at version 1 marked at 2:\n%s", what, len(rows), len(ids), len(wrong), strings.Join(wrong, "\n"))
	}
}

// TestMarksOfNewRecordsAcrossARunAndAReconcile: the ERP's records went
// from a valid version 1 to an invalid version 2 before they had rows. A
// reconcile is served version 2; a run that fetched version 1 earlier
// writes it, before, during or after the reconcile. Whatever the order,
// each row ends at version 1 marked at version 2: the reconcile stores the
// invalid copies before it reads the rows (Syncer.Quarantine), and the run
// that makes a row reads the stored copies after its write commits.
func TestMarksOfNewRecordsAcrossARunAndAReconcile(t *testing.T) {
	t.Parallel()
	st, locks, job := markWorld(t)
	const records = 60
	// The ERP holds the records of the earlier rounds too, and one valid
	// record: the reconcile is served all of them, or it would soft-delete
	// rows, and its guard would refuse a feed of no valid record.
	anchor := markCopy{n: 1}.item("anchor")
	served := []string{anchor}
	for round, order := range []string{"reconcile first", "run first", "at once", "at once", "at once"} {
		ids := make([]string, records)
		valid, invalid := make([]string, records, records+1), make([]string, records)
		for i := range ids {
			ids[i] = fmt.Sprintf("c%d-%03d", round, i)
			valid[i] = markCopy{n: 1}.item(ids[i])
			invalid[i] = markCopy{n: 2, invalid: true}.item(ids[i])
		}
		valid = append(valid, anchor)
		served = append(served, invalid...)
		run := func() error {
			s, err := syncer.New(syncer.Config{Job: job, Mode: syncer.ModeBackfill, Since: markEpoch.AddDate(-1, 0, 0), ChunkSize: 7, PageSize: 10,
				LockTTL: 2 * time.Minute, LockWait: 10 * time.Second}, feedOf(t, valid, 10), st, locks, zerolog.Nop())
			if err != nil {
				return err
			}
			rep, err := s.Run(context.Background())
			if err == nil && rep.Status != store.StatusSucceeded {
				err = fmt.Errorf("run: status %s", rep.Status)
			}
			return err
		}
		reconcile := func() error {
			rep, err := reconcileOnce(job, feedOf(t, served, 10), st, locks)
			if err == nil && rep.Status != store.StatusSucceeded {
				err = fmt.Errorf("reconcile: status %s", rep.Status)
			}
			return err
		}
		steps := []func() error{reconcile, run}
		if order == "run first" {
			steps = []func() error{run, reconcile}
		}
		errs := make([]error, len(steps))
		if order == "at once" {
			var wg sync.WaitGroup
			for k, step := range steps {
				wg.Go(func() { errs[k] = step() })
			}
			wg.Wait()
		} else {
			for k, step := range steps {
				errs[k] = step()
			}
		}
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d (%s): %v", round, order, err)
			}
		}
		checkMarkedAt1Of2(t, st, fmt.Sprintf("round %d (%s)", round, order), ids)
	}
}

// reconcileOnce runs one reconcile of job, as the cli wires it, on src.
func reconcileOnce(job string, src *erp.Client, st *store.Store, locks *lock.Client) (*reconcile.Report, error) {
	s, err := syncer.New(syncer.Config{Job: job, ChunkSize: 5, LockTTL: 2 * time.Minute, LockWait: 10 * time.Second}, src, st, locks, zerolog.Nop())
	if err != nil {
		return nil, err
	}
	rc, err := reconcile.New(reconcile.Config{PageSize: 1000}, s, src, st, zerolog.Nop())
	if err != nil {
		return nil, err
	}
	return rc.Run(context.Background())
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

// TestReconcileStoresEveryInvalidCopy: a reconcile served 6,000 invalid
// records of 3 KB each stores every one, in statements that stay under
// MySQL's max_allowed_packet (16 MiB by default; the copies take 18 MB),
// and reports them as invalid.
func TestReconcileStoresEveryInvalidCopy(t *testing.T) {
	t.Parallel()
	st, locks, job := markWorld(t)
	const records = 6000
	items := []string{markCopy{n: 1}.item("anchor")}
	for i := range records {
		item := markCopy{n: 2, invalid: true}.item(fmt.Sprintf("q%04d", i))
		items = append(items, strings.TrimSuffix(item, "}")+`,"note":"`+strings.Repeat("x", 3000)+`"}`)
	}
	rep, err := reconcileOnce(job, feedOf(t, items, 1000), st, locks)
	if err != nil || rep.Status != store.StatusSucceeded {
		t.Fatalf("reconcile: %v, %+v", err, rep)
	}
	var n int64
	if err := st.DB().Raw("SELECT COUNT(*) FROM quarantined_records WHERE job = ? AND erp_version = 2", job).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	if n != records || rep.Invalid != records {
		t.Fatalf("%d invalid copies stored, the report's invalid %d; want %d", n, rep.Invalid, records)
	}
}
