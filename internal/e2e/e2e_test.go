package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
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

func TestMain(m *testing.M) {
	var remove func()
	var err error
	if bin, remove, err = testenv.BuildTemp("./cmd/erpsync"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	remove()
	os.Exit(code)
}

type env struct {
	t      *testing.T
	dsn    string
	erpURL string
	mock   *erpmock.Mock
	job    string
	prefix string
	store  *store.Store
}

func setup(t *testing.T, opt erpmock.Options) *env {
	t.Helper()
	e := &env{t: t, dsn: testenv.MySQLDSN(t), job: testenv.RandomName("e2e-"), prefix: testenv.RandomName("e2e:") + ":"}
	e.mock = erpmock.New(opt)
	srv := httptest.NewServer(e.mock)
	t.Cleanup(srv.Close)
	e.erpURL = srv.URL
	if out, code := e.run(context.Background(), "migrate"); code != 0 {
		t.Fatalf("migrate exit %d: %s", code, out)
	}
	st, err := store.Open(context.Background(), e.dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.store = st
	return e
}

func (e *env) cmd(ctx context.Context, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, bin, args...)
	c.Env = append(os.Environ(),
		"ERPSYNC_MYSQL_DSN="+e.dsn,
		"ERPSYNC_REDIS_ADDR="+testenv.RedisAddr(),
		"ERPSYNC_ERP_URL="+e.erpURL,
		"ERPSYNC_JOB="+e.job,
		"ERPSYNC_LOCK_PREFIX="+e.prefix,
		"ERPSYNC_LOG_LEVEL=warn",
	)
	return c
}

// run runs erpsync to completion and returns its combined output and exit code.
func (e *env) run(ctx context.Context, args ...string) (string, int) {
	c := e.cmd(ctx, args...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return out.String(), ee.ExitCode()
		}
		e.t.Fatalf("erpsync %v: %v", args, err)
	}
	return out.String(), 0
}

// settle turns the ERP's faults off, runs once more over a wide overlap
// (args are extra flags), stops the version watcher and checks the table
// equals the ERP's truth.
func (e *env) settle(stop chan struct{}, watch *sync.WaitGroup, args ...string) {
	e.t.Helper()
	e.mock.SetFaults(erpmock.Faults{})
	if out, code := e.run(context.Background(), append([]string{"run", "--overlap", "1h"}, args...)...); code != 0 {
		e.t.Fatalf("final run exit %d: %s", code, out)
	}
	close(stop)
	watch.Wait()
	e.assertTruth()
}

// waitRows waits until memberships has more than n rows.
func (e *env) waitRows(n int64) {
	e.t.Helper()
	for i := 0; ; i++ {
		var got int64
		e.store.DB().Raw("SELECT COUNT(*) FROM memberships").Scan(&got)
		if got > n {
			return
		}
		if i > 1000 {
			e.t.Fatalf("memberships never reached %d rows", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readReport(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read report: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("report is not JSON: %v", err)
	}
	return m
}

// assertTruth checks that memberships equals the mock's valid records.
func (e *env) assertTruth() {
	e.t.Helper()
	type vr struct {
		ID string
		V  int64
	}
	var got []vr
	rows, err := e.store.DB().Raw("SELECT erp_id, erp_version FROM memberships ORDER BY erp_id").Rows()
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var r vr
		rows.Scan(&r.ID, &r.V)
		got = append(got, r)
	}
	truth := e.mock.Truth()
	sort.Slice(truth, func(i, j int) bool { return truth[i].ErpID < truth[j].ErpID })
	if len(got) != len(truth) {
		e.t.Fatalf("memberships has %d rows, the ERP %d valid records", len(got), len(truth))
	}
	for i := range truth {
		if got[i].ID != truth[i].ErpID || got[i].V != truth[i].Version {
			e.t.Fatalf("row %d: got %s v%d, want %s v%d", i, got[i].ID, got[i].V, truth[i].ErpID, truth[i].Version)
		}
	}
}

// watchVersions polls memberships until stop and fails the test if any
// row's erp_version ever goes down.
func (e *env) watchVersions(stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		seen := map[string]int64{}
		for {
			rows, err := e.store.DB().Raw("SELECT erp_id, erp_version FROM memberships").Rows()
			if err == nil {
				for rows.Next() {
					var id string
					var v int64
					rows.Scan(&id, &v)
					if v < seen[id] {
						e.t.Errorf("erp_version of %s went down: %d -> %d", id, seen[id], v)
					}
					seen[id] = v
				}
				rows.Close()
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return &wg
}

func TestOverlappingProcessesEndWithTheTruth(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 5000, Seed: 21, Faults: erpmock.Faults{InvalidRate: 0.01}})
	e.mock.SetFaults(erpmock.Faults{DuplicateRate: 0.3, StaleRate: 0.3, ErrorRate: 0.05, ChangeRate: 2})
	stop := make(chan struct{})
	watch := e.watchVersions(stop)
	ctx := context.Background()
	dir := t.TempDir()
	var wg sync.WaitGroup
	codes := make([]int, 6)
	outs := make([]string, 6)
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := []string{"backfill", "--since", "2024-01-01T00:00:00Z", "--workers", "8", "--report", filepath.Join(dir, fmt.Sprintf("r%d.json", i))}
			if i >= 4 {
				args = []string{"run", "--report", filepath.Join(dir, fmt.Sprintf("r%d.json", i))}
			}
			outs[i], codes[i] = e.run(ctx, args...)
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != 0 {
			t.Fatalf("process %d exited %d: %s", i, c, outs[i])
		}
	}
	statuses := map[string]int{}
	for i := 4; i < 6; i++ {
		statuses[readReport(t, filepath.Join(dir, fmt.Sprintf("r%d.json", i)))["status"].(string)]++
	}
	if statuses["succeeded"] < 1 {
		t.Fatalf("run statuses %v: want at least one succeeded", statuses)
	}
	e.settle(stop, watch)
}

func TestSkippedRunExitsZero(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 400, Seed: 2, Faults: erpmock.Faults{Latency: 100 * time.Millisecond}})
	ctx := context.Background()
	dir := t.TempDir()
	first := e.cmd(ctx, "run", "--page-size", "20")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	// The second run starts once the first holds the job lock (its run
	// takes 20 pages of 100 ms), not after a fixed sleep that a loaded
	// machine can outrun.
	jobLock, rdb := e.prefix+"{"+syncer.JobLockKey(e.job)+"}", testenv.Redis(t)
	if !proctest.Eventually(time.Minute, func() bool { return rdb.Exists(ctx, jobLock).Val() == 1 }) {
		t.Fatalf("the first run never took the job lock %s", jobLock)
	}
	out, code := e.run(ctx, "run", "--report", filepath.Join(dir, "skip.json"))
	if code != 0 {
		t.Fatalf("second run exit %d: %s", code, out)
	}
	if st := readReport(t, filepath.Join(dir, "skip.json"))["status"]; st != "skipped" {
		t.Fatalf("second run status %v, want skipped", st)
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("first run: %v", err)
	}
	e.assertTruth()
}

func TestFrozenPastItsLockThenWokenChangesNothingWrong(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 1500, Seed: 8, Faults: erpmock.Faults{Latency: 20 * time.Millisecond}})
	e.mock.SetFaults(erpmock.Faults{Latency: 20 * time.Millisecond, ChangeRate: 3, StaleRate: 0.5})
	stop := make(chan struct{})
	watch := e.watchVersions(stop)
	ctx := context.Background()
	frozen := e.cmd(ctx, "run", "--lock-ttl", "1s", "--page-size", "50", "--workers", "4")
	var fout bytes.Buffer
	frozen.Stdout, frozen.Stderr = &fout, &fout
	if err := frozen.Start(); err != nil {
		t.Fatal(err)
	}
	e.waitRows(100) // freeze it once it is writing
	frozen.Process.Signal(syscall.SIGSTOP)
	time.Sleep(2500 * time.Millisecond) // past its 1s lease
	out, code := e.run(ctx, "run", "--lock-ttl", "1s")
	if code != 0 {
		t.Fatalf("replacement run exit %d: %s", code, out)
	}
	frozen.Process.Signal(syscall.SIGCONT)
	err := frozen.Wait()
	t.Logf("woken run: %v\n%s", err, fout.String())
	if err == nil {
		t.Logf("the woken run exited 0")
	} else if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("woken run: %v, want exit 1 (lost its lock): %s", err, fout.String())
	}
	e.settle(stop, watch)
}

func TestKilledRunFreesItsLockWithinTheTTL(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 1000, Seed: 13, Faults: erpmock.Faults{Latency: 100 * time.Millisecond}})
	ctx := context.Background()
	victim := e.cmd(ctx, "run", "--lock-ttl", "6s", "--page-size", "50")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	e.waitRows(50)
	victim.Process.Kill()
	victim.Wait()
	dir := t.TempDir()
	if _, code := e.run(ctx, "run", "--lock-ttl", "6s", "--report", filepath.Join(dir, "a.json")); code != 0 {
		t.Fatalf("run right after the kill exit %d", code)
	}
	if st := readReport(t, filepath.Join(dir, "a.json"))["status"]; st != "skipped" {
		t.Fatalf("run right after the kill: %v, want skipped (the killed run's lock lives until its TTL)", st)
	}
	time.Sleep(6200 * time.Millisecond)
	e.mock.SetFaults(erpmock.Faults{})
	if out, code := e.run(ctx, "run", "--lock-ttl", "6s", "--report", filepath.Join(dir, "b.json")); code != 0 {
		t.Fatalf("run after the TTL exit %d: %s", code, out)
	}
	if st := readReport(t, filepath.Join(dir, "b.json"))["status"]; st != "succeeded" {
		t.Fatalf("run after the TTL: %v, want succeeded", st)
	}
	e.assertTruth()
}

func TestBadUsageAndUnreachableDependenciesExit2(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 10, Seed: 1, Token: "right"})
	ctx := context.Background()
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
		{"mysql unreachable", []string{"run", "--erp-token", "right", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x"}},
		{"erp unreachable", []string{"run", "--erp-url", "http://127.0.0.1:1", "--erp-retries", "1"}},
	}
	for _, c := range cases {
		out, code := e.run(ctx, c.args...)
		if code != 2 {
			t.Errorf("%s: exit %d, want 2: %s", c.name, code, out)
		}
		if strings.Contains(out, "right") && c.name != "wrong erp token" {
			t.Errorf("%s: the token leaked into the output: %s", c.name, out)
		}
	}
	var n int64
	e.store.DB().Raw("SELECT COUNT(*) FROM memberships").Scan(&n)
	var runs int64
	e.store.DB().Raw("SELECT COUNT(*) FROM sync_runs").Scan(&runs)
	if n != 0 || runs != 0 {
		t.Fatalf("a failed start wrote %d rows and %d runs", n, runs)
	}
	if out, code := e.run(ctx, "run", "--erp-token", "right"); code != 0 {
		t.Fatalf("good run exit %d: %s", code, out)
	}
}
