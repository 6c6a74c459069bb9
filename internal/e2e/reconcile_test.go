package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/reconcile"
	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/lock"
)

// softDeleted counts the soft-deleted rows.
func (e *env) softDeleted() int64 {
	return e.Count("SELECT COUNT(*) FROM %s WHERE deleted_at IS NOT NULL", "memberships")
}

// TestReconcileExitCodes drives `erpsync reconcile` as processes: a dry
// run changes nothing and exits 0; a reconcile under the limit soft-deletes
// and verify is clean after; a 50% drop and an empty feed are refused with
// exit 1 and one line; --max-delete and --force go past; a reconcile whose
// lock another holder has is skipped with exit 0; bad usage exits 2.
func TestReconcileExitCodes(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 300, Seed: 31})
	ctx := context.Background()
	dir := t.TempDir()
	if r := e.Run(ctx, "run"); r.Code != 0 {
		t.Fatalf("run exit %d: %s", r.Code, r.Out())
	}
	if err := e.Mock.DeleteIDs([]string{"M0000003", "M0000004", "M0000005", "M0000006", "M0000007", "M0000008"}); err != nil {
		t.Fatal(err)
	}

	r := e.Run(ctx, "reconcile", "--dry-run")
	if r.Code != 0 || !strings.Contains(r.Stdout, "DRY RUN") || !strings.Contains(r.Stdout, "M0000003") || e.softDeleted() != 0 {
		t.Fatalf("dry run: exit %d, %d soft-deleted:\n%s", r.Code, e.softDeleted(), r.Out())
	}
	rp := filepath.Join(dir, "reconcile.json")
	if r := e.Run(ctx, "reconcile", "--report", rp); r.Code != 0 {
		t.Fatalf("reconcile exit %d: %s", r.Code, r.Out())
	}
	if rep := e.report(rp); rep["mode"] != "reconcile" || rep["status"] != "succeeded" || rep["deleted"] != 6.0 {
		t.Fatalf("report: %v", rep)
	}
	if res, code := e.Verify(ctx); code != 0 || res.SoftDeleted != 6 {
		t.Fatalf("verify after the reconcile: exit %d, %+v", code, res)
	}
	e.assertTruth()

	// Half the feed gone: refused, in one line, with exit 1.
	gone := e.Mock.Delete(147)
	r = e.Run(ctx, "reconcile", "--report", rp)
	lines := proctest.Lines(r.Stderr)
	var plain []string
	for _, l := range lines {
		if strings.HasPrefix(l, "erpsync: ") {
			plain = append(plain, l)
		}
	}
	if r.Code != 1 || len(plain) != 1 || !strings.Contains(plain[0], "would delete 147 of 294 live rows") || e.softDeleted() != 6 {
		t.Fatalf("50%% drop: exit %d, %d soft-deleted, stderr:\n%s", r.Code, e.softDeleted(), r.Stderr)
	}
	t.Log(plain[0])
	if rep := e.report(rp); rep["status"] != "failed" || rep["refused"] == nil {
		t.Fatalf("refused report: %v", rep)
	}
	if r := e.Run(ctx, "reconcile", "--dry-run"); r.Code != 1 || !strings.Contains(r.Stdout, "REFUSE") {
		t.Fatalf("dry run of a refused reconcile: exit %d: %s", r.Code, r.Out())
	}
	if r := e.Run(ctx, "reconcile", "--max-delete", "146"); r.Code != 1 {
		t.Fatalf("--max-delete 146: exit %d: %s", r.Code, r.Out())
	}
	// ERPSYNC_MAX_DELETE, like any setting: the window's limit still
	// refuses (6 deleted already, 147 more: 51% of the rows), in one line.
	e.Extra = []string{"ERPSYNC_MAX_DELETE=50%"}
	if r := e.Run(ctx, "reconcile"); r.Code != 1 || e.softDeleted() != 6 ||
		!strings.Contains(r.Stderr, "erpsync: reconcile: refused by the deletion guard: would delete 147 rows after 6 deleted by the reconciles of the last 168h0m0s: 153 of 300 rows (51.0%), above --max-delete-total 10% (30 rows)") {
		t.Fatalf("ERPSYNC_MAX_DELETE=50%%, the window's default: exit %d, %d soft-deleted: %s", r.Code, e.softDeleted(), r.Out())
	}
	e.Extra = []string{"ERPSYNC_MAX_DELETE=50%", "ERPSYNC_MAX_DELETE_TOTAL=60%"}
	if r := e.Run(ctx, "reconcile"); r.Code != 0 || e.softDeleted() != 6+147 {
		t.Fatalf("ERPSYNC_MAX_DELETE=50%%: exit %d, %d soft-deleted: %s", r.Code, e.softDeleted(), r.Out())
	}
	e.Extra = nil
	if err := e.Mock.Recreate(gone); err != nil {
		t.Fatal(err)
	}
	if r := e.Run(ctx, "run"); r.Code != 0 {
		t.Fatalf("run after the recreate: exit %d: %s", r.Code, r.Out())
	}
	e.assertTruth()

	// An empty feed: refused whatever --max-delete says, unless forced.
	e.Mock.Delete(1000)
	if r := e.Run(ctx, "reconcile", "--max-delete", "100%"); r.Code != 1 || !strings.Contains(r.Stderr, "returned no record") {
		t.Fatalf("empty feed: exit %d: %s", r.Code, r.Out())
	}
	if n := e.softDeleted(); n != 6 {
		t.Fatalf("the refused reconcile changed rows: %d soft-deleted", n)
	}
	r = e.Run(ctx, "reconcile", "--force", "--log-level", "warn")
	if r.Code != 0 || !strings.Contains(r.Stderr, "deletion guard overridden by --force") || e.softDeleted() != 300 {
		t.Fatalf("--force: exit %d, %d soft-deleted: %s", r.Code, e.softDeleted(), r.Out())
	}

	// Another holder has the reconcile lock: skipped, exit 0.
	locks := lock.New(testenv.Redis(t), &lock.Options{Prefix: e.Prefix})
	l, err := locks.Obtain(ctx, reconcile.JobLockKey(e.Job), 30*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := e.Run(ctx, "reconcile", "--report", rp); r.Code != 0 || e.report(rp)["status"] != "skipped" {
		t.Fatalf("held lock: exit %d, report %v: %s", r.Code, e.report(rp), r.Out())
	}
	l.Release(ctx)

	for _, bad := range [][]string{{"--max-delete", "101%"}, {"--max-delete", "-3"}, {"--page-size", "1001"}} {
		if r := e.Run(ctx, append([]string{"reconcile"}, bad...)...); r.Code != 2 {
			t.Fatalf("%v: exit %d: %s", bad, r.Code, r.Out())
		}
	}
}

// TestScheduleReconcilesAndCountsRefusals runs `schedule --reconcile-every`
// over a feed that lost half its records: its reconciles are refused, and
// erpsync_reconcile_refused_total and the history say so; the incremental
// runs go on beside them.
func TestScheduleReconcilesAndCountsRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 200, Seed: 32})
	ctx := context.Background()
	if r := e.Run(ctx, "run"); r.Code != 0 {
		t.Fatalf("run exit %d: %s", r.Code, r.Out())
	}
	e.Mock.Delete(100)
	addr := proctest.FreeAddr(t)
	p := e.Start("schedule", "--every", "1s", "--reconcile-every", "1s", "--overlap", "1ms", "--http-addr", addr)
	refused := 0.0
	proctest.Eventually(30*time.Second, func() bool {
		refused = sum(scrape(t, addr), "erpsync_reconcile_refused_total", map[string]string{"job": e.Job})
		return refused >= 2
	})
	fams := scrape(t, addr)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := p.Wait(); r.Code != 0 {
		t.Fatalf("schedule exit %d: %s", r.Code, r.Out())
	}
	if refused < 2 {
		t.Fatalf("erpsync_reconcile_refused_total = %v after 30 s", refused)
	}
	if ok := sum(fams, "erpsync_runs_total", map[string]string{"job": e.Job, "mode": "run", "status": "succeeded"}); ok < 1 {
		t.Fatalf("no incremental run succeeded beside the reconciles (%v)", ok)
	}
	var reconciles, failed int
	for _, run := range e.runs(100) {
		if run.Mode == reconcile.Mode {
			reconciles++
			if run.Status == "failed" && run.Error != nil && strings.Contains(*run.Error, "would delete 100 of 200") {
				failed++
			}
		}
	}
	if reconciles < 2 || failed != reconciles {
		t.Fatalf("history: %d reconciles, %d of them refused", reconciles, failed)
	}
	if n := e.softDeleted(); n != 0 {
		t.Fatalf("refused reconciles soft-deleted %d rows", n)
	}
}
