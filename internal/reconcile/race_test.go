package reconcile

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
)

// TestRunWritingBackBetweenCompareAndDeleteWins puts a run between the
// reconcile's comparison and its deletes: the ERP recreates records the
// scan found gone, and the run writes them back at their new version. The
// reconcile then holds rows it read at the old version; its guarded
// UPDATE (same version, fence no newer than its lock's) leaves them live.
// Without the version guard in store.SoftDelete this test fails: the rows
// end soft-deleted while the ERP has them, and no later incremental run
// writes them again (their records are behind its checkpoint).
func TestRunWritingBackBetweenCompareAndDeleteWins(t *testing.T) {
	t.Parallel()
	b := setup(t, 200)
	ctx := context.Background()
	back := []string{"M0000005", "M0000006", "M0000007"}
	gone := append(slices.Clone(back), "M0000008")
	if err := b.mock.DeleteIDs(gone); err != nil {
		t.Fatal(err)
	}
	rc := b.reconciler(t, Config{})
	rc.beforeWrite = func() {
		if err := b.mock.Recreate(back); err != nil {
			t.Error(err)
		}
		if r := b.run(t); r.Updated != int64(len(back)) {
			t.Errorf("the racing run: %+v", r.Counters)
		}
	}
	rep, err := rc.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.deletedIDs(t); !slices.Equal(got, []string{"M0000008"}) || rep.Deleted != 1 {
		t.Fatalf("soft-deleted %v (reported %d); want only M0000008: the run's writes were lost", got, rep.Deleted)
	}
	b.run(t)
	if res := b.verify(t); !res.OK() {
		t.Fatalf("verify: %+v", res)
	}
}

// TestRunWritingBackDuringTheScanWins puts the run between the scan and
// the comparison: the scan missed the recreated records, the comparison
// finds their rows written since the scan began, and keeps them.
func TestRunWritingBackDuringTheScanWins(t *testing.T) {
	t.Parallel()
	b := setup(t, 200)
	back := []string{"M0000005", "M0000006"}
	if err := b.mock.DeleteIDs(back); err != nil {
		t.Fatal(err)
	}
	rc := b.reconciler(t, Config{})
	rc.afterScan = func() {
		if err := b.mock.Recreate(back); err != nil {
			t.Error(err)
		}
		b.run(t)
	}
	rep, err := rc.Run(context.Background())
	if err != nil || rep.Deleted != 0 || rep.Plan.Kept != 2 {
		t.Fatalf("reconcile: %v, %+v, plan %+v", err, rep.Counters, rep.Plan)
	}
	if got := b.deletedIDs(t); len(got) != 0 {
		t.Fatalf("soft-deleted %v", got)
	}
}

// TestRunsRacingReconciles runs incremental runs, reconciles and an ERP
// that deletes and recreates records all at once, in goroutines. However
// they interleave, once they stop and one last run has passed, no record
// the ERP holds is missing or stale in the table: a reconcile never took
// away a write a run had made.
func TestRunsRacingReconciles(t *testing.T) {
	t.Parallel()
	b := setup(t, 600)
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reconciles, runs atomic.Int64
	wg.Add(3)
	go func() { // the ERP
		defer wg.Done()
		defer close(stop)
		var deleted []string
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
			deleted = append(deleted, b.mock.Delete(2)...)
			if len(deleted) > 6 {
				if err := b.mock.Recreate(deleted[:3]); err != nil {
					t.Error(err)
					return
				}
				deleted = deleted[3:]
			}
			b.mock.Change(2)
			time.Sleep(10 * time.Millisecond)
		}
	}()
	go func() { // the runs
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			rep, err := b.syncer(t, syncer.Config{Overlap: time.Millisecond}).Run(ctx)
			if err != nil || (rep.Status != store.StatusSucceeded && rep.Status != store.StatusSkipped) {
				t.Errorf("run: %v (%+v)", err, rep)
				return
			}
			runs.Add(1)
		}
	}()
	go func() { // the reconciles
		defer wg.Done()
		// Each reconcile and all of them together may delete whatever
		// the ERP deleted: on a fast machine the reconciles of these three
		// seconds deleted more than the default 10% of the rows between
		// them, and the guard over the window refused the next one.
		all := Limit{Percent: 100, IsPercent: true}
		for {
			select {
			case <-stop:
				return
			default:
			}
			rep, err := b.reconciler(t, Config{MaxDelete: &all, MaxDeleteTotal: &all}).Run(ctx)
			if err != nil {
				t.Errorf("reconcile: %v (%+v)", err, rep)
				return
			}
			reconciles.Add(1)
		}
	}()
	wg.Wait()
	b.run(t)
	res := b.verify(t)
	if res.Missing.Count != 0 || res.Stale.Count != 0 || res.Ahead.Count != 0 {
		t.Fatalf("after %d runs and %d reconciles: %+v", runs.Load(), reconciles.Load(), res)
	}
	t.Logf("%d runs and %d reconciles; %d soft-deleted rows, %d rows of deleted records left live for the next reconcile",
		runs.Load(), reconciles.Load(), res.SoftDeleted, res.Unknown.Count)
}
