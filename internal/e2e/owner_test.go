package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/proctest"
)

// TestOneTableOneJob starts runs of three jobs at once on a fresh
// database: one job claims memberships, the others are refused. Then every
// command that writes is refused with another --job (exit 2, one line,
// nothing written), verify and runs are not, and --take-table hands the
// table over while the owner's schedule ticks: from then on the first
// job's ticks and commands are the ones refused.
func TestOneTableOneJob(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 300, Seed: 41})
	ctx := context.Background()

	jobs := []string{e.Job, e.Job + "-b", e.Job + "-c"}
	res := make([]proctest.Result, len(jobs))
	var wg sync.WaitGroup
	for i, job := range jobs {
		wg.Go(func() { res[i] = e.Run(ctx, "run", "--job", job) })
	}
	wg.Wait()
	owner := ""
	for i, r := range res {
		if r.Code == 0 {
			if owner != "" {
				t.Fatalf("jobs %q and %q both ran against one table:\n%s\n%s", owner, jobs[i], res[0].Out(), r.Out())
			}
			owner = jobs[i]
		}
	}
	if owner == "" {
		t.Fatalf("no job ran: %v", res)
	}
	for i, r := range res {
		if jobs[i] != owner {
			e.refused(t, r, owner, jobs[i])
		}
	}
	e.assertTruth()

	other := e.Job + "-other"
	rows := e.Count("SELECT COUNT(*) FROM %s", "memberships")
	for _, args := range [][]string{
		{"run"},
		{"backfill", "--since", "2000-01-01T00:00:00Z"},
		{"reconcile"},
		{"reconcile", "--dry-run"},
		{"schedule", "--every", "1s", "--ticks", "1", "--http-addr", ""},
	} {
		e.refused(t, e.Run(ctx, append(args, "--job", other)...), owner, other)
	}
	if n := e.Count("SELECT COUNT(*) FROM %s WHERE job LIKE ?", "sync_runs", other+"%"); n != 0 {
		t.Errorf("%d runs of the refused jobs in the history, want none", n)
	}
	if n := e.Count("SELECT COUNT(*) FROM %s WHERE name LIKE ?", "sync_checkpoints", other+"%"); n != 0 {
		t.Errorf("%d checkpoints of the refused job, want none", n)
	}
	if n := e.Count("SELECT COUNT(*) FROM %s WHERE updated_at > (SELECT MAX(finished_at) FROM "+e.Table("sync_runs")+")", "memberships"); n != 0 {
		t.Errorf("%d rows written after the owner's run", n)
	}
	if n := e.Count("SELECT COUNT(*) FROM %s", "memberships"); n != rows {
		t.Errorf("%d rows, want %d", n, rows)
	}
	// Reads need no claim.
	for _, args := range [][]string{{"verify"}, {"runs"}} {
		if r := e.Run(ctx, append(args, "--job", other)...); r.Code != 0 {
			t.Errorf("%v --job %s: exit %d: %s", args, other, r.Code, r.Out())
		}
	}

	// The hand-over, while the owner's schedule ticks: the new owner runs;
	// the schedule's later ticks, and any command of the old owner, are
	// refused.
	sched := e.Start("schedule", "--job", owner, "--every", "1s", "--ticks", "8", "--http-addr", "")
	ran := func() int64 {
		return e.Count("SELECT COUNT(*) FROM %s WHERE job = ? AND status = 'succeeded'", "sync_runs", owner)
	}
	before := ran()
	if !proctest.Eventually(time.Minute, func() bool { return ran() > before }) {
		t.Fatal("the owner's schedule never ran")
	}
	if r := e.Run(ctx, "run", "--job", other, "--take-table"); r.Code != 0 {
		t.Fatalf("run --take-table: exit %d: %s", r.Code, r.Out())
	}
	e.refused(t, e.Run(ctx, "run", "--job", owner), other, owner)
	if r := sched.Wait(); r.Code != 1 || !strings.Contains(r.Stdout, `"message":"tick failed"`) ||
		!strings.Contains(r.Stdout, fmt.Sprintf(`table memberships belongs to job \"%s\"; this is job \"%s\"`, other, owner)) {
		t.Errorf("the old owner's schedule: exit %d, want 1 with its ticks after the hand-over refused:\n%s", r.Code, r.Stdout)
	}
	if r := e.Run(ctx, "reconcile", "--job", other); r.Code != 0 {
		t.Fatalf("reconcile of the new owner: exit %d: %s", r.Code, r.Out())
	}
	e.assertTruth()
}

// refused fails the test unless r is a command of job refused at start
// because owner owns memberships: exit 2 and one line that says so.
func (e *env) refused(t *testing.T, r proctest.Result, owner, job string) {
	t.Helper()
	want := fmt.Sprintf("erpsync: table memberships belongs to job %q; this is job %q (", owner, job)
	lines := proctest.Lines(r.Stderr)
	if r.Code != 2 || len(lines) != 1 || !strings.HasPrefix(lines[0], want) || r.Stdout != "" {
		t.Errorf("job %s against %s's table: exit %d, want 2 and one line starting %s; stdout %q, stderr:\n%s", job, owner, r.Code, want, r.Stdout, r.Stderr)
		return
	}
	t.Log(lines[0])
}
