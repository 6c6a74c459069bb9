package reconcile

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/internal/verify"
	"github.com/erpsync/erpsync/lock"
)

// bundle is a reconcile test's world: its own database and lock prefix,
// an in-process erpmock, and the table synced from it.
type bundle struct {
	store *store.Store
	locks *lock.Client
	mock  *erpmock.Mock
	erp   *erp.Client
	job   string
}

func setup(t *testing.T, records int) *bundle {
	t.Helper()
	st, _ := testenv.MigratedStore(t)
	rdb := testenv.Redis(t)
	m := erpmock.New(erpmock.Options{Records: records, Seed: 5})
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	e, err := erp.New(erp.Config{BaseURL: srv.URL, MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond, MaxRetries: 10, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{store: st, locks: lock.New(rdb, &lock.Options{Prefix: testenv.RandomName("erpsync-test:") + ":"}), mock: m, erp: e, job: testenv.RandomName("job-")}
	b.run(t)
	return b
}

func (b *bundle) syncer(t *testing.T, cfg syncer.Config) *syncer.Syncer {
	t.Helper()
	cfg.Job = b.job
	s, err := syncer.New(cfg, b.erp, b.store, b.locks, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run runs one incremental pass and fails the test unless it succeeds.
func (b *bundle) run(t *testing.T) *syncer.Report {
	t.Helper()
	rep, err := b.syncer(t, syncer.Config{Overlap: time.Millisecond}).Run(context.Background())
	if err != nil || rep.Status != store.StatusSucceeded {
		t.Fatalf("run: %v (%+v)", err, rep)
	}
	return rep
}

func (b *bundle) reconciler(t *testing.T, cfg Config) *Reconciler {
	t.Helper()
	rc, err := New(cfg, b.syncer(t, syncer.Config{ChunkSize: 50}), b.erp, b.store, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

func (b *bundle) verify(t *testing.T) *verify.Result {
	t.Helper()
	res, err := verify.Verify(context.Background(), b.erp, b.store, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// deletedIDs lists the soft-deleted erp_ids.
func (b *bundle) deletedIDs(t *testing.T) []string {
	t.Helper()
	var ids []string
	if err := b.store.DB().Raw("SELECT erp_id FROM memberships WHERE deleted_at IS NOT NULL ORDER BY erp_id").Scan(&ids).Error; err != nil {
		t.Fatal(err)
	}
	return ids
}

// snapshot is every row's guards and mark, to check that nothing changed.
func (b *bundle) snapshot(t *testing.T) map[string]store.Current {
	t.Helper()
	var ids []string
	b.store.DB().Raw("SELECT erp_id FROM memberships").Scan(&ids)
	cur, err := b.store.Versions(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	return cur
}

func sorted(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// TestReconcileDeletesRestoresAndRepairs: rows of deleted records are
// soft-deleted; a recreated record (higher version) and a soft-deleted row
// whose record the feed has (same version) are restored; a missing and a
// stale row are repaired; verify is clean after, and a second reconcile
// has nothing to do.
func TestReconcileDeletesRestoresAndRepairs(t *testing.T) {
	t.Parallel()
	b := setup(t, 400)
	ctx := context.Background()
	gone := []string{"M0000010", "M0000011", "M0000012", "M0000013", "M0000014", "M0000015", "M0000016", "M0000017", "M0000018", "M0000019", "M0000020", "M0000021"}
	if err := b.mock.DeleteIDs(gone); err != nil { // 3% of 400: under the default 5%
		t.Fatal(err)
	}
	// Rows the table lost or let go stale behind the runs' backs.
	db := b.store.DB()
	if err := db.Exec("DELETE FROM memberships WHERE erp_id IN ('M0000300', 'M0000301')").Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("UPDATE memberships SET erp_version = erp_version - 1 WHERE erp_id = 'M0000302'").Error; err != nil {
		t.Fatal(err)
	}
	// A row soft-deleted while its record is in the feed.
	live := "M0000001"
	if err := db.Exec("UPDATE memberships SET deleted_at = ? WHERE erp_id = ?", time.Now().UTC(), live).Error; err != nil {
		t.Fatal(err)
	}
	if res := b.verify(t); res.OK() || res.Unknown.Count != 12 || res.Missing.Count != 3 || res.Stale.Count != 1 {
		t.Fatalf("verify before: %+v", res)
	}

	rep, err := b.reconciler(t, Config{}).Run(ctx)
	if err != nil || rep.Status != store.StatusSucceeded {
		t.Fatalf("reconcile: %v (%+v)", err, rep)
	}
	if rep.Deleted != 12 || rep.Restored != 1 || rep.Repaired != 3 {
		t.Fatalf("reconcile counts: %+v", rep.Counters)
	}
	if got := b.deletedIDs(t); !slices.Equal(got, sorted(gone)) {
		t.Fatalf("soft-deleted %v, want %v", got, sorted(gone))
	}
	if res := b.verify(t); !res.OK() || res.SoftDeleted != 12 {
		t.Fatalf("verify after: %+v", res)
	}
	runs, err := b.store.Runs(ctx, b.job, 1)
	if err != nil || len(runs) != 1 || runs[0].Mode != Mode || runs[0].Deleted != 12 || runs[0].Restored != 1 || runs[0].Repaired != rep.Repaired {
		t.Fatalf("run history: %+v, %v", runs, err)
	}

	// Recreated records come back at a higher version: restored by the
	// next run, or by a reconcile.
	if err := b.mock.Recreate(gone[:2]); err != nil {
		t.Fatal(err)
	}
	if r := b.run(t); r.Restored != 2 {
		t.Fatalf("run after recreate: %+v", r.Counters)
	}
	if err := b.mock.Recreate(gone[2:3]); err != nil {
		t.Fatal(err)
	}
	rep, err = b.reconciler(t, Config{}).Run(ctx)
	if err != nil || rep.Restored != 1 || rep.Deleted != 0 || rep.Repaired != 0 {
		t.Fatalf("reconcile after recreate: %v (%+v)", err, rep.Counters)
	}
	if got := b.deletedIDs(t); !slices.Equal(got, sorted(gone[3:])) {
		t.Fatalf("soft-deleted %v, want %v", got, sorted(gone[3:]))
	}
	if res := b.verify(t); !res.OK() {
		t.Fatalf("verify at the end: %+v", res)
	}
}

// TestGuard: an empty scan and a 50% drop are refused and change nothing;
// --max-delete as a count and as a percentage; --force goes past; a dry
// run reports the plan and changes nothing.
func TestGuard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	limit := func(s string) *Limit {
		l, err := ParseLimit(s)
		if err != nil {
			t.Fatal(err)
		}
		return &l
	}
	refused := func(b *bundle, cfg Config) *Report {
		t.Helper()
		before := b.snapshot(t)
		rep, err := b.reconciler(t, cfg).Run(ctx)
		if !errors.Is(err, ErrRefused) || rep.Refused == "" || rep.Status != store.StatusFailed || rep.Deleted != 0 {
			t.Fatalf("%+v: want refused, got %v (%+v)", cfg, err, rep)
		}
		if after := b.snapshot(t); !mapsEqual(before, after) {
			t.Fatalf("a refused reconcile changed rows")
		}
		return rep
	}

	t.Run("empty feed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 100)
		b.mock.Delete(100)
		rep := refused(b, Config{MaxDelete: limit("100%")})
		if rep.Plan.Delete.Count != 100 || rep.Plan.FeedRecords != 0 {
			t.Fatalf("plan %+v", rep.Plan)
		}
		t.Log(rep.Refused)
	})
	t.Run("half the feed gone", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 200)
		b.mock.Delete(100)
		rep := refused(b, Config{})
		t.Log(rep.Refused)
		// A dry run says the same and changes nothing.
		before := b.snapshot(t)
		dry, err := b.reconciler(t, Config{DryRun: true}).Run(ctx)
		if !errors.Is(err, ErrRefused) || dry.Plan.Delete.Count != 100 || len(dry.Plan.Delete.IDs) == 0 {
			t.Fatalf("dry run: %v %+v", err, dry.Plan)
		}
		dry, err = b.reconciler(t, Config{DryRun: true, Force: true}).Run(ctx)
		if err != nil || dry.Deleted != 0 || dry.Plan.Delete.Count != 100 {
			t.Fatalf("forced dry run: %v %+v", err, dry)
		}
		if !mapsEqual(before, b.snapshot(t)) {
			t.Fatal("a dry run changed rows")
		}
		if runs, _ := b.store.Runs(ctx, b.job, 10); len(runs) != 2 { // the setup run and the refused reconcile
			t.Fatalf("dry runs recorded in the history: %d runs", len(runs))
		}
		// --force goes past the guard.
		rep, err = b.reconciler(t, Config{Force: true}).Run(ctx)
		if err != nil || rep.Deleted != 100 || rep.Forced == "" {
			t.Fatalf("forced: %v (%+v)", err, rep)
		}
		if res := b.verify(t); !res.OK() {
			t.Fatalf("verify after the forced reconcile: %+v", res)
		}
	})
	t.Run("max-delete count and percentage", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 200)
		b.mock.Delete(10) // 5% of 200
		refused(b, Config{MaxDelete: limit("9")})
		refused(b, Config{MaxDelete: limit("4.9%")})
		dry, err := b.reconciler(t, Config{DryRun: true, MaxDelete: limit("10")}).Run(ctx)
		if err != nil || dry.Plan.MaxDelete != 10 {
			t.Fatalf("dry run at the limit: %v %+v", err, dry.Plan)
		}
		rep, err := b.reconciler(t, Config{}).Run(ctx) // the default 5%: exactly at the limit
		if err != nil || rep.Deleted != 10 {
			t.Fatalf("at the default limit: %v (%+v)", err, rep)
		}
	})
}

func mapsEqual(a, b map[string]store.Current) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestParseLimit(t *testing.T) {
	for in, want := range map[string]Limit{"5%": {Percent: 5, IsPercent: true}, "0": {}, "120": {Count: 120}, "0.5%": {Percent: 0.5, IsPercent: true}} {
		if got, err := ParseLimit(in); err != nil || got != want {
			t.Errorf("ParseLimit(%q) = %+v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "-1", "101%", "x", "5%%", "1e3"} {
		if _, err := ParseLimit(bad); err == nil {
			t.Errorf("ParseLimit(%q) accepted", bad)
		}
	}
	if n := (Limit{Percent: 5, IsPercent: true}).Of(199); n != 9 {
		t.Errorf("5%% of 199 = %d", n)
	}
}

// TestReconcileRepairsFieldsAtTheirVersion: rows whose fields or
// erp_updated_at differ from the feed's at the version they hold (a change
// the ERP made without a new version, or one made by hand) are stale to
// verify, and reconcile repairs them: verify is clean after, and a second
// reconcile has nothing to repair. A run leaves them: its version guard
// takes no copy at the version a row holds.
func TestReconcileRepairsFieldsAtTheirVersion(t *testing.T) {
	t.Parallel()
	b := setup(t, 200)
	ctx := context.Background()
	db := b.store.DB()
	for _, q := range []string{
		"UPDATE memberships SET member_id = 'BY-HAND' WHERE erp_id = 'M0000050'",
		"UPDATE memberships SET erp_updated_at = erp_updated_at - INTERVAL '1' SECOND WHERE erp_id = 'M0000051'",
		"UPDATE memberships SET ends_at = NULL, status = 'X' WHERE erp_id = 'M0000052'",
	} {
		if err := db.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	before := b.snapshot(t)
	if res := b.verify(t); res.Stale.Count != 3 {
		t.Fatalf("verify before: %+v", res)
	}
	b.run(t)
	if res := b.verify(t); res.Stale.Count != 3 {
		t.Fatalf("verify after a run: %+v", res)
	}
	rep, err := b.reconciler(t, Config{}).Run(ctx)
	if err != nil || rep.Status != store.StatusSucceeded || rep.Repaired != 3 || rep.Deleted != 0 {
		t.Fatalf("reconcile: %v (%+v)", err, rep.Counters)
	}
	if res := b.verify(t); !res.OK() {
		t.Fatalf("verify after the reconcile: %+v", res)
	}
	for id, c := range b.snapshot(t) {
		if c.Version != before[id].Version {
			t.Fatalf("%s: version %d, was %d", id, c.Version, before[id].Version)
		}
	}
	if rep, err := b.reconciler(t, Config{}).Run(ctx); err != nil || rep.Repaired != 0 {
		t.Fatalf("second reconcile: %v (%+v)", err, rep.Counters)
	}
}

// TestReconcileRowShowsItsProgress: while a reconcile runs, its heartbeat
// writes its counters so far to its row, as a run's does: after the scan
// the records it read, and after the repairs what they wrote, each seen
// on the running row before the reconcile goes on.
func TestReconcileRowShowsItsProgress(t *testing.T) {
	t.Parallel()
	const records = 600
	b := setup(t, records)
	ctx := context.Background()
	if err := b.mock.DeleteIDs([]string{"M0000010", "M0000011"}); err != nil {
		t.Fatal(err)
	}
	if err := b.store.DB().Exec("DELETE FROM memberships WHERE erp_id IN ('M0000300', 'M0000301', 'M0000302')").Error; err != nil {
		t.Fatal(err)
	}
	rc, err := New(Config{PageSize: 50}, b.syncer(t, syncer.Config{ChunkSize: 50, HeartbeatEvery: 20 * time.Millisecond}), b.erp, b.store, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	// The running row's counters, once they show what want says.
	shows := func(step string, want func(store.Counters) bool) {
		var last store.Run
		ok := proctest.Eventually(30*time.Second, func() bool {
			runs, err := b.store.Runs(ctx, b.job, 1)
			if err != nil || len(runs) != 1 || runs[0].Mode != Mode || runs[0].Status != store.StatusRunning {
				return false
			}
			last = runs[0]
			return want(last.Counters)
		})
		if !ok {
			t.Errorf("%s: the running reconcile's row shows %+v", step, last.Counters)
		}
	}
	rc.afterScan = func() {
		shows("after the scan", func(c store.Counters) bool { return c.Fetched == records-2 })
	}
	rc.beforeConfirm = func() {
		shows("after the repairs", func(c store.Counters) bool { return c.Fetched == records-2 && c.Repaired == 3 && c.Deleted == 0 })
	}
	rep, err := rc.Run(ctx)
	if err != nil || rep.Deleted != 2 || rep.Repaired != 3 {
		t.Fatalf("reconcile: %v (%+v)", err, rep.Counters)
	}
	runs, err := b.store.Runs(ctx, b.job, 1)
	if err != nil || len(runs) != 1 || runs[0].Status != store.StatusSucceeded || runs[0].Counters != rep.Counters {
		t.Fatalf("the finished row: %+v, %v; the report: %+v", runs, err, rep.Counters)
	}
}

// TestReconcileWritesWhatItsSecondPassIsServed: records that change in the
// ERP between the comparison and the second pass (which confirms the
// deletions) are served to that pass, and the reconcile writes them, as it
// writes every version it is served: after it, with no run between, the
// table matches the feed.
func TestReconcileWritesWhatItsSecondPassIsServed(t *testing.T) {
	t.Parallel()
	b := setup(t, 300)
	if err := b.mock.DeleteIDs([]string{"M0000010", "M0000011"}); err != nil { // a second pass to confirm them
		t.Fatal(err)
	}
	rc := b.reconciler(t, Config{})
	var changed []string
	rc.beforeConfirm = func() { changed = b.mock.Change(5) }
	rep, err := rc.Run(context.Background())
	if err != nil || rep.Status != store.StatusSucceeded {
		t.Fatalf("reconcile: %v (%+v)", err, rep)
	}
	if len(changed) != 5 || rep.Deleted != 2 || rep.Updated != 5 || rep.Repaired != 5 {
		t.Fatalf("changed %v before the second pass; reconcile counts %+v, want 2 deleted and the 5 changes written", changed, rep.Counters)
	}
	if res := b.verify(t); !res.OK() {
		t.Fatalf("verify after the reconcile: stale %v, missing %v (the changes its second pass was served: %v)", res.Stale.IDs, res.Missing.IDs, changed)
	}
}

// TestReconcilePlansItsPartsByTheCount: the pager that counts the
// records a reconcile reads for its heartbeat keeps the source's count,
// so the scan plans its parts by it: a feed of one page is one part, a
// few requests, not the even time cuts of a source that cannot count
// (several parts a fetcher, each a request at least).
func TestReconcilePlansItsPartsByTheCount(t *testing.T) {
	t.Parallel()
	b := setup(t, 300)
	rep, err := b.reconciler(t, Config{PageSize: 1000, Fetchers: 8}).Run(context.Background())
	if err != nil || rep.Status != store.StatusSucceeded {
		t.Fatalf("reconcile: %v (%+v)", err, rep)
	}
	// The count, the first record, the one page.
	if rep.ERPRequests > 3 {
		t.Fatalf("a reconcile of 300 records in pages of 1000 made %d requests, want at most 3", rep.ERPRequests)
	}
}
