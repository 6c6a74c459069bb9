package reconcile

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestRecordRestoredAsItWasDuringAReconcileStaysLive: the ERP hides
// records while the reconcile's scan passes and restores them unchanged
// (same version, same updated_at: no run serves them again) before the
// comparison, or after it, before the deletes. The reconcile's confirming
// pass finds them and deletes only the record that is really gone. With a
// single pass the rows were soft-deleted until a later reconcile.
func TestRecordRestoredAsItWasDuringAReconcileStaysLive(t *testing.T) {
	t.Parallel()
	for _, when := range []string{"after the scan", "before the writes"} {
		t.Run(when, func(t *testing.T) {
			t.Parallel()
			b := setup(t, 200)
			back := []string{"M0000005", "M0000006", "M0000007"}
			if err := b.mock.DeleteIDs(append(slices.Clone(back), "M0000008")); err != nil {
				t.Fatal(err)
			}
			rc := b.reconciler(t, Config{})
			restore := func() {
				if err := b.mock.Restore(back); err != nil {
					t.Error(err)
				}
			}
			if when == "after the scan" {
				rc.afterScan = restore
			} else {
				rc.beforeWrite = restore
			}
			rep, err := rc.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got := b.deletedIDs(t); !slices.Equal(got, []string{"M0000008"}) || rep.Deleted != 1 || rep.Plan.Reappeared != 3 {
				t.Fatalf("soft-deleted %v (reported %d, reappeared %d); want only M0000008", got, rep.Deleted, rep.Plan.Reappeared)
			}
			if res := b.verify(t); !res.OK() {
				t.Fatalf("verify after the reconcile: %+v", res)
			}
		})
	}
}

// TestDeletionsThatCreepAreRefused: a fault that hides 4% more of the
// feed before each reconcile stays under the per-reconcile limit (5%)
// every time, and is refused once the reconciles of the window would have
// deleted more than --max-delete-total (10%). A forced reconcile's
// deletions are the operator's and do not count against the window.
func TestDeletionsThatCreepAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, 200)
	ctx := context.Background()
	reconcileAfterDeleting := func(n int, cfg Config) (*Report, error) {
		t.Helper()
		if got := b.mock.Delete(n); len(got) != n {
			t.Fatalf("deleted %d, want %d", len(got), n)
		}
		return b.reconciler(t, cfg).Run(ctx)
	}
	for i := range 2 {
		rep, err := reconcileAfterDeleting(8, Config{})
		if err != nil || rep.Deleted != 8 {
			t.Fatalf("reconcile %d: %v, deleted %d; want 8 (4%%, 8%% in the window)", i+1, err, rep.Deleted)
		}
	}
	before := b.snapshot(t)
	rep, err := reconcileAfterDeleting(8, Config{})
	if !errors.Is(err, ErrRefused) || rep.Plan.WindowDeleted != 16 || rep.Plan.MaxDeleteTotal != 20 {
		t.Fatalf("the third reconcile (24 of 200 in the window): %v, plan %+v; want refused", err, rep.Plan)
	}
	if after := b.snapshot(t); !mapsEqual(before, after) {
		t.Fatal("a refused reconcile changed rows")
	}
	if rep, err := b.reconciler(t, Config{Force: true}).Run(ctx); err != nil || rep.Deleted != 8 {
		t.Fatalf("forced: %v, deleted %d", err, rep.Deleted)
	}
	rep, err = reconcileAfterDeleting(2, Config{})
	if err != nil || rep.Deleted != 2 || rep.Plan.WindowDeleted != 16 {
		t.Fatalf("after the forced one: %v, deleted %d, plan %+v; want 2 deleted, the forced 8 not counted", err, rep.Deleted, rep.Plan)
	}
}

// TestRecordCreatedAgainAtALowerVersionIsRestored: a record deleted (and
// soft-deleted by a reconcile) comes back as a new record whose change
// counter starts again at 1; its later updated_at restores the row at
// version 1, and the next change moves it on from there.
func TestRecordCreatedAgainAtALowerVersionIsRestored(t *testing.T) {
	t.Parallel()
	b := setup(t, 200)
	ctx := context.Background()
	ids := []string{"M0000011", "M0000012"}
	if err := b.mock.DeleteIDs(ids); err != nil {
		t.Fatal(err)
	}
	if rep, err := b.reconciler(t, Config{}).Run(ctx); err != nil || rep.Deleted != 2 {
		t.Fatalf("reconcile: %v, %+v", err, rep)
	}
	if err := b.mock.RecreateNew(ids); err != nil {
		t.Fatal(err)
	}
	if rep := b.run(t); rep.Restored != 2 {
		t.Fatalf("the run after the re-creation: %+v; want 2 restored", rep.Counters)
	}
	cur := b.snapshot(t)
	for _, id := range ids {
		if c := cur[id]; c.Deleted || c.Version != 1 {
			t.Fatalf("%s: %+v; want live at version 1", id, c)
		}
	}
	if res := b.verify(t); !res.OK() {
		t.Fatalf("verify: %+v", res)
	}
}

// TestInvalidNewestCopyMarksTheRow: the ERP moves records to a state the
// sync cannot read. A run marks their rows (quarantined_at), keeps their
// last valid data and version, and verify reports them; a reconcile never
// deletes them. A valid newer copy clears the mark. The same marks come
// from a reconcile's scan when no run saw the invalid copy.
func TestInvalidNewestCopyMarksTheRow(t *testing.T) {
	t.Parallel()
	b := setup(t, 200)
	ctx := context.Background()
	byRun, byReconcile := []string{"M0000021", "M0000022"}, []string{"M0000023"}
	before := b.snapshot(t)
	if err := b.mock.Invalidate(byRun); err != nil {
		t.Fatal(err)
	}
	if rep := b.run(t); rep.Quarantined != 2 || rep.Invalid != 2 {
		t.Fatalf("run: %+v; want 2 invalid, 2 rows marked", rep.Counters)
	}
	if err := b.mock.Invalidate(byReconcile); err != nil {
		t.Fatal(err)
	}
	rep, err := b.reconciler(t, Config{}).Run(ctx)
	if err != nil || rep.Quarantined != 1 || rep.Deleted != 0 {
		t.Fatalf("reconcile: %v, %+v; want the third row marked, nothing deleted", err, rep.Counters)
	}
	marked := b.marked(t)
	all := append(slices.Clone(byRun), byReconcile...)
	if !slices.Equal(marked, all) {
		t.Fatalf("marked %v, want %v", marked, all)
	}
	after := b.snapshot(t)
	for _, id := range all {
		if after[id].Version != before[id].Version || after[id].Deleted {
			t.Fatalf("%s: %+v, was %+v: a marked row keeps its last valid version, live", id, after[id], before[id])
		}
	}
	res := b.verify(t)
	if res.OK() || res.Quarantined.Count != 3 {
		t.Fatalf("verify: ok %v, quarantined %+v; want 3 and not OK", res.OK(), res.Quarantined)
	}
	if again := b.run(t); again.Quarantined != 0 {
		t.Fatalf("a second run marked %d rows again", again.Quarantined)
	}
	if err := b.mock.Revalidate(all); err != nil {
		t.Fatal(err)
	}
	if rep := b.run(t); rep.Updated != 3 {
		t.Fatalf("the run after the records came back valid: %+v", rep.Counters)
	}
	if m := b.marked(t); len(m) != 0 {
		t.Fatalf("still marked after valid newer copies: %v", m)
	}
	if res := b.verify(t); !res.OK() {
		t.Fatalf("verify: %+v", res)
	}
}

// marked lists the erp_ids of the rows marked quarantined.
func (b *bundle) marked(t *testing.T) []string {
	t.Helper()
	var ids []string
	if err := b.store.DB().Raw("SELECT erp_id FROM memberships WHERE quarantined_at IS NOT NULL ORDER BY erp_id").Scan(&ids).Error; err != nil {
		t.Fatal(err)
	}
	return ids
}
