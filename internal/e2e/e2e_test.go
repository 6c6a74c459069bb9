package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
	"github.com/erpsync/erpsync/internal/testenv"
)

var bin string // path of the erpsync binary built for these tests

func TestMain(m *testing.M) { testenv.MainWithBinary(m, "./cmd/erpsync", &bin) }

// env is one test's proctest.Env with the few checks e2e adds to it.
type env struct{ *proctest.Env }

func setup(t *testing.T, opt erpmock.Options) *env {
	t.Helper()
	return &env{proctest.New(t, bin, opt)}
}

// settle turns the ERP's faults off, runs once more over a wide overlap
// (args are extra flags), stops the version watcher, fails the test if any
// row's erp_version went down meanwhile and checks the table equals the
// ERP's truth.
func (e *env) settle(w *proctest.Watcher, args ...string) {
	e.T.Helper()
	e.Mock.SetFaults(erpmock.Faults{})
	if r := e.Run(context.Background(), append([]string{"run", "--overlap", "1h"}, args...)...); r.Code != 0 {
		e.T.Fatalf("final run exit %d: %s", r.Code, r.Out())
	}
	if polls, downs := w.Stop(); len(downs) > 0 {
		e.T.Errorf("erp_version went down (%d polls): %v", polls, downs)
	}
	e.assertTruth()
}

// assertTruth checks that memberships equals the mock's valid records, one
// row per erp_id.
func (e *env) assertTruth() {
	e.T.Helper()
	if s := e.Check(); !s.OK() {
		e.T.Fatalf("memberships is not the ERP's truth: %s", s)
	}
}

// report reads a run report written with --report; the test fails if
// there is none.
// stoppedHoldingTheJobLock starts erpsync with args and stops it
// (SIGSTOP) once it holds the job lock; the caller sends SIGCONT.
func (e *env) stoppedHoldingTheJobLock(t *testing.T, args ...string) *proctest.Proc {
	t.Helper()
	p := e.Start(args...)
	jobLock, rdb := e.Prefix+"{"+syncer.JobLockKey(e.Job)+"}", testenv.Redis(t)
	if !proctest.Eventually(time.Minute, func() bool { return rdb.Exists(context.Background(), jobLock).Val() == 1 }) {
		t.Fatalf("%v never took the job lock %s", args, jobLock)
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *env) report(path string) map[string]any {
	e.T.Helper()
	m, err := proctest.ReadReport(path)
	if err != nil {
		e.T.Fatal(err)
	}
	return m
}

// runs returns the job's last runs, newest first, as erpsync's store reads
// them.
func (e *env) runs(limit int) []store.Run {
	e.T.Helper()
	st, err := store.Open(context.Background(), e.DSN, nil)
	if err != nil {
		e.T.Fatal(err)
	}
	defer st.Close()
	runs, err := st.Runs(context.Background(), e.Job, limit)
	if err != nil {
		e.T.Fatal(err)
	}
	return runs
}

// shown returns the status that `erpsync runs --json` with args shows for
// run runID; the test fails if it shows no such run.
func (e *env) shown(runID string, args ...string) string {
	e.T.Helper()
	r := e.Run(context.Background(), append([]string{"runs", "--json", "--limit", "50"}, args...)...)
	if r.Code != 0 {
		e.T.Fatalf("runs exit %d: %s", r.Code, r.Out())
	}
	var runs []store.Run
	if err := json.Unmarshal([]byte(r.Stdout), &runs); err != nil {
		e.T.Fatalf("runs --json: %v: %s", err, r.Stdout)
	}
	for _, run := range runs {
		if run.RunID == runID {
			return run.Status
		}
	}
	e.T.Fatalf("runs --json shows no run %s: %s", runID, r.Stdout)
	return ""
}

// running returns the run ID of the job's newest run, which must say
// running.
func (e *env) running() string {
	e.T.Helper()
	runs := e.runs(1)
	if len(runs) != 1 || runs[0].Status != store.StatusRunning {
		e.T.Fatalf("the newest run: %+v, want one running", runs)
	}
	return runs[0].RunID
}

func TestOverlappingProcessesEndWithTheTruth(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 5000, Seed: 21, Faults: erpmock.Faults{InvalidRate: 0.01}})
	e.Mock.SetFaults(erpmock.Faults{DuplicateRate: 0.3, StaleRate: 0.3, ErrorRate: 0.05, ChangeRate: 2})
	watch := e.Watch()
	ctx := context.Background()
	dir := t.TempDir()
	var wg sync.WaitGroup
	res := make([]proctest.Result, 6)
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := []string{"backfill", "--since", "2024-01-01T00:00:00Z", "--workers", "8", "--report", filepath.Join(dir, fmt.Sprintf("r%d.json", i))}
			if i >= 4 {
				args = []string{"run", "--report", filepath.Join(dir, fmt.Sprintf("r%d.json", i))}
			}
			res[i] = e.Run(ctx, args...)
		}()
	}
	wg.Wait()
	for i, r := range res {
		if r.Code != 0 {
			t.Fatalf("process %d exited %d: %s", i, r.Code, r.Out())
		}
	}
	statuses := map[string]int{}
	for i := 4; i < 6; i++ {
		statuses[e.report(filepath.Join(dir, fmt.Sprintf("r%d.json", i)))["status"].(string)]++
	}
	if statuses["succeeded"] < 1 {
		t.Fatalf("run statuses %v: want at least one succeeded", statuses)
	}
	e.settle(watch)
}

func TestSkippedRunExitsZero(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 400, Seed: 2, Faults: erpmock.Faults{Latency: 100 * time.Millisecond}})
	ctx := context.Background()
	dir := t.TempDir()
	// Once the first run holds the job lock, it is stopped until the
	// second run is done, so that the second meets a held lock however
	// slowly a loaded machine starts it (its 30 s lease outlives that).
	first := e.stoppedHoldingTheJobLock(t, "run", "--page-size", "20")
	second := e.Run(ctx, "run", "--report", filepath.Join(dir, "skip.json"))
	if err := first.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if second.Code != 0 {
		t.Fatalf("second run exit %d: %s", second.Code, second.Out())
	}
	if st := e.report(filepath.Join(dir, "skip.json"))["status"]; st != "skipped" {
		t.Fatalf("second run status %v, want skipped", st)
	}
	if r := first.Wait(); r.Code != 0 {
		t.Fatalf("first run: exit %d: %s", r.Code, r.Out())
	}
	e.assertTruth()
}

func TestFrozenPastItsLockThenWokenChangesNothingWrong(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 1500, Seed: 8, Faults: erpmock.Faults{Latency: 20 * time.Millisecond}})
	e.Mock.SetFaults(erpmock.Faults{Latency: 20 * time.Millisecond, ChangeRate: 3, StaleRate: 0.5})
	watch := e.Watch()
	ctx := context.Background()
	frozen := e.Start("run", "--lock-ttl", "1s", "--page-size", "50", "--workers", "4")
	e.WaitRows(100) // freeze it once it is writing
	frozen.Signal(syscall.SIGSTOP)
	id := e.running()
	time.Sleep(2500 * time.Millisecond) // past its 1s lease
	// Its last heartbeat came before the pause: runs shows it lost.
	if st := e.shown(id, "--lost-after", "2s"); st != store.StatusLost {
		t.Errorf("runs shows the paused run %s; want lost", st)
	}
	if r := e.Run(ctx, "run", "--lock-ttl", "1s"); r.Code != 0 {
		t.Fatalf("replacement run exit %d: %s", r.Code, r.Out())
	}
	frozen.Signal(syscall.SIGCONT)
	r := frozen.Wait()
	// Woken, it finished its row with its real status.
	if st := e.shown(id, "--lost-after", "2s"); st != store.StatusSucceeded && st != store.StatusFailed {
		t.Errorf("runs shows the woken run %s; want succeeded or failed", st)
	}
	t.Logf("woken run: exit %d\n%s", r.Code, r.Stdout)
	if r.Code == 0 {
		t.Logf("the woken run exited 0")
	} else if r.Code != 1 {
		t.Fatalf("woken run: exit %d, want exit 1 (lost its lock): %s", r.Code, r.Stdout)
	}
	e.settle(watch)
}

func TestKilledRunFreesItsLockWithinTheTTL(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 1000, Seed: 13, Faults: erpmock.Faults{Latency: 100 * time.Millisecond}})
	ctx := context.Background()
	victim := e.Start("run", "--lock-ttl", "6s", "--page-size", "50")
	e.WaitRows(50)
	victim.Signal(syscall.SIGKILL)
	victim.Wait()
	id := e.running()
	if st := e.shown(id); st != store.StatusRunning {
		t.Errorf("runs right after the kill shows the killed run %s; want running (not yet --lost-after 1m without a heartbeat)", st)
	}
	dir := t.TempDir()
	if r := e.Run(ctx, "run", "--lock-ttl", "6s", "--report", filepath.Join(dir, "a.json")); r.Code != 0 {
		t.Fatalf("run right after the kill exit %d", r.Code)
	}
	if st := e.report(filepath.Join(dir, "a.json"))["status"]; st != "skipped" {
		t.Fatalf("run right after the kill: %v, want skipped (the killed run's lock lives until its TTL)", st)
	}
	time.Sleep(6200 * time.Millisecond)
	// Its last heartbeat came before the kill: runs shows it lost.
	if st := e.shown(id, "--lost-after", "5s"); st != store.StatusLost {
		t.Errorf("runs shows the killed run %s; want lost", st)
	}
	e.Mock.SetFaults(erpmock.Faults{})
	if r := e.Run(ctx, "run", "--lock-ttl", "6s", "--report", filepath.Join(dir, "b.json")); r.Code != 0 {
		t.Fatalf("run after the TTL exit %d: %s", r.Code, r.Out())
	}
	if st := e.report(filepath.Join(dir, "b.json"))["status"]; st != "succeeded" {
		t.Fatalf("run after the TTL: %v, want succeeded", st)
	}
	e.assertTruth()
}

func TestBadUsageAndUnreachableDependenciesExit2(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 10, Seed: 1, Token: "right"})
	ctx := context.Background()
	unreachable := "root@tcp(127.0.0.1:1)/x"
	if e.Postgres {
		unreachable = "postgres://root@127.0.0.1:1/x?sslmode=disable"
	}
	cases := []struct {
		name string
		args []string
	}{
		{"unknown command", []string{"frobnicate"}},
		{"bad flag value", []string{"run", "--workers", "zero"}},
		{"backfill without since", []string{"backfill"}},
		{"bad shard", []string{"backfill", "--since", "2025-01-01T00:00:00Z", "--shard", "4/4"}},
		{"wrong erp token", []string{"run", "--erp-token", "wrong"}},
		{"redis unreachable", []string{"run", "--erp-token", "right", "--redis-addr", "127.0.0.1:1"}},
		{"database unreachable", []string{"run", "--erp-token", "right", testenv.DSNFlag(e.DSN), unreachable}},
		{"erp unreachable", []string{"run", "--erp-url", "http://127.0.0.1:1", "--erp-retries", "1"}},
	}
	for _, c := range cases {
		r := e.Run(ctx, c.args...)
		if r.Code != 2 {
			t.Errorf("%s: exit %d, want 2: %s", c.name, r.Code, r.Out())
		}
		if strings.Contains(r.Out(), "right") && c.name != "wrong erp token" {
			t.Errorf("%s: the token leaked into the output: %s", c.name, r.Out())
		}
	}
	n := e.Count("SELECT COUNT(*) FROM %s", "memberships")
	runs := e.Count("SELECT COUNT(*) FROM %s", "sync_runs")
	if n != 0 || runs != 0 {
		t.Fatalf("a failed start wrote %d rows and %d runs", n, runs)
	}
	if r := e.Run(ctx, "run", "--erp-token", "right"); r.Code != 0 {
		t.Fatalf("good run exit %d: %s", r.Code, r.Out())
	}
}
