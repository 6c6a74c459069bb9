package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/lock"
)

// scrape fetches /metrics and parses it with Prometheus' own text parser.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	var res *http.Response
	var err error
	for i := 0; i < 100; i++ {
		res, err = http.Get("http://" + addr + "/metrics")
		if err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer res.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// sum adds the values of a counter family whose labels include want.
func sum(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	total := 0.0
next:
	for _, m := range f.GetMetric() {
		for k, v := range want {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		if m.Counter != nil {
			total += m.Counter.GetValue()
		} else if m.Gauge != nil {
			total += m.Gauge.GetValue()
		}
	}
	return total
}

func TestScheduleReplicasRunEachTickOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 800, Seed: 31})
	e.Mock.SetFaults(erpmock.Faults{ChangeRate: 2})
	addrs := []string{proctest.FreeAddr(t), proctest.FreeAddr(t)}
	procs := make([]*proctest.Proc, 2)
	for i := range procs {
		procs[i] = e.Start("schedule", "--every", "1s", "--overlap", "1ms", "--http-addr", addrs[i])
	}
	time.Sleep(8 * time.Second)
	for _, a := range addrs {
		if res, err := http.Get("http://" + a + "/readyz"); err != nil || res.StatusCode != 200 {
			t.Fatalf("/readyz on %s: %v %v", a, res, err)
		}
		if res, err := http.Get("http://" + a + "/healthz"); err != nil || res.StatusCode != 200 {
			t.Fatalf("/healthz on %s: %v %v", a, res, err)
		}
	}
	// Scrape, then stop both, then compare the metrics with the history.
	fams := []map[string]*dto.MetricFamily{scrape(t, addrs[0]), scrape(t, addrs[1])}
	outs := make([]string, 2)
	for i, p := range procs {
		p.Signal(syscall.SIGTERM)
		r := p.Wait()
		if outs[i] = r.Stdout; r.Code != 0 {
			t.Fatalf("replica %d after SIGTERM: exit %d\n%s", i, r.Code, outs[i])
		}
	}
	runs := e.runs(100)
	perTick := map[int64]int{}
	skipped := 0
	for _, r := range runs {
		switch r.Status {
		case store.StatusSucceeded:
			perTick[r.StartedAt.Unix()]++
		case store.StatusSkipped:
			skipped++
		}
	}
	for tick, n := range perTick {
		if n != 1 {
			t.Fatalf("tick %s ran %d times", time.Unix(tick, 0).UTC(), n)
		}
	}
	// Eight seconds of 1s ticks on a loaded machine: a run may overrun a
	// tick, but several ticks must run, and the other replica must skip.
	if len(perTick) < 3 || skipped < 2 {
		var seen []string
		for _, r := range runs {
			seen = append(seen, r.StartedAt.Format("15:04:05.000")+" "+r.Status)
		}
		t.Fatalf("%d ticks ran, %d skipped: want >= 3 and >= 2 (two replicas, about 8 ticks); runs: %v\n%s\n%s", len(perTick), skipped, seen, outs[0], outs[1])
	}
	// Each replica's /metrics matched its own runs at scrape time.
	for i, f := range fams {
		pid := procs[i].Cmd.Process.Pid
		succeeded := sum(f, "erpsync_runs_total", map[string]string{"status": "succeeded"})
		skips := sum(f, "erpsync_runs_total", map[string]string{"status": "skipped"})
		var histSucc, histSkip, histIns int
		for _, r := range runs {
			if r.PID != pid {
				continue
			}
			// Runs recorded after the scrape are not in the metrics.
			if r.FinishedAt == nil {
				continue
			}
			switch r.Status {
			case store.StatusSucceeded:
				histSucc++
				histIns += int(r.Inserted)
			case store.StatusSkipped:
				histSkip++
			}
		}
		inserted := sum(f, "erpsync_records_total", map[string]string{"outcome": "inserted"})
		// The scrape happened before SIGTERM; at most one more tick may
		// have been recorded after it.
		if succeeded+skips < float64(histSucc+histSkip-1) || succeeded+skips > float64(histSucc+histSkip) {
			t.Fatalf("replica %d: metrics say %v succeeded + %v skipped, history %d + %d", i, succeeded, skips, histSucc, histSkip)
		}
		if inserted > float64(histIns) {
			t.Fatalf("replica %d: metrics inserted %v > history %d", i, inserted, histIns)
		}
		if f["erpsync_last_success_timestamp_seconds"] == nil && succeeded > 0 {
			t.Fatalf("replica %d: no last-success gauge", i)
		}
	}
	totalInserted := sum(fams[0], "erpsync_records_total", map[string]string{"outcome": "inserted"}) +
		sum(fams[1], "erpsync_records_total", map[string]string{"outcome": "inserted"})
	if totalInserted != float64(800-len(e.Mock.InvalidIDs())) {
		t.Fatalf("the two replicas' metrics count %v inserted, want %d", totalInserted, 800-len(e.Mock.InvalidIDs()))
	}
}

func TestSIGTERMMidRunExits143AndReleasesEveryLock(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 3000, Seed: 17, Faults: erpmock.Faults{Latency: 60 * time.Millisecond}})
	ctx := context.Background()
	dir := t.TempDir()
	c := e.Start("run", "--page-size", "50", "--report", filepath.Join(dir, "r.json"))
	e.WaitRows(200)
	sent := time.Now()
	c.Signal(syscall.SIGTERM)
	if r := c.Wait(); r.Code != 143 {
		t.Fatalf("run after SIGTERM: exit %d, want 143\n%s", r.Code, r.Stdout)
	}
	if d := time.Since(sent); d > 25*time.Second {
		t.Fatalf("took %s to stop, over the 25s grace", d)
	}
	rep := e.report(filepath.Join(dir, "r.json"))
	if rep["status"] != store.StatusInterrupted {
		t.Fatalf("status %v, want interrupted", rep["status"])
	}
	keys, err := testenv.Redis(t).Keys(ctx, e.Prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !lock.IsCounter(k) {
			t.Fatalf("lock key %s left after SIGTERM", k)
		}
	}
	runs := e.runs(5)
	if len(runs) != 1 || runs[0].Status != store.StatusInterrupted || runs[0].FinishedAt == nil {
		t.Fatalf("run history after SIGTERM: %+v", runs)
	}
	// Nothing lost: the next run finishes the job.
	if r := e.Run(ctx, "run"); r.Code != 0 {
		t.Fatalf("next run exit %d: %s", r.Code, r.Out())
	}
	e.assertTruth()
}

func TestKilledBackfillResumesItsWindow(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 3000, Seed: 19, Faults: erpmock.Faults{Latency: 80 * time.Millisecond}})
	ctx := context.Background()
	dir := t.TempDir()
	args := []string{"backfill", "--since", "2024-06-01T00:00:00Z", "--until", "2030-01-01T00:00:00Z", "--page-size", "50"}
	// One fetcher: the victim pages the window in 60 pages of 80 ms, 4.8 s
	// at least however busy the machine, and is killed long before its
	// end (at the default 4, it had written the whole window by then).
	victim := e.Start(append(args, "--fetchers", "1")...)
	e.WaitRows(600)
	time.Sleep(1100 * time.Millisecond) // let a checkpoint land (every 1s)
	victim.Signal(syscall.SIGKILL)
	if r := victim.Wait(); r.Code == 0 {
		t.Fatalf("the backfill to kill had finished its window first: %s", r.Stdout)
	}
	e.Mock.SetFaults(erpmock.Faults{})
	if r := e.Run(ctx, append(args, "--report", filepath.Join(dir, "r.json"))...); r.Code != 0 {
		t.Fatalf("resumed backfill exit %d: %s", r.Code, r.Out())
	}
	rep := e.report(filepath.Join(dir, "r.json"))
	if rep["resumed_from"] == nil {
		t.Fatalf("the second backfill did not resume: %v", rep)
	}
	if f := rep["fetched"].(float64); f >= 3000 {
		t.Fatalf("resumed backfill fetched %v, want less than the whole window", f)
	}
	e.assertTruth()
	// A finished window starts from scratch next time.
	r := e.Run(ctx, append(args, "--report", filepath.Join(dir, "r2.json"))...)
	if r.Code != 0 || e.report(filepath.Join(dir, "r2.json"))["resumed_from"] != nil {
		t.Fatalf("a finished window should start from scratch: %d %s", r.Code, r.Out())
	}
}

func TestVerifyCatchesTamperedRows(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 500, Seed: 23})
	ctx := context.Background()
	if r := e.Run(ctx, "run"); r.Code != 0 {
		t.Fatalf("run exit %d: %s", r.Code, r.Out())
	}
	if r := e.Run(ctx, "verify"); r.Code != 0 || !strings.Contains(r.Out(), "OK") {
		t.Fatalf("verify after a clean run: exit %d\n%s", r.Code, r.Out())
	}
	truth := e.Mock.Truth()
	m := e.Table("memberships")
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"UPDATE " + m + " SET member_id = 'TAMPERED' WHERE erp_id = ?", []any{truth[1].ErpID}},
		{"UPDATE " + m + " SET erp_version = erp_version - 1 WHERE erp_id = ?", []any{truth[2].ErpID}},
		{"DELETE FROM " + m + " WHERE erp_id = ?", []any{truth[3].ErpID}},
		{"INSERT INTO " + m + ` (erp_id, member_id, product_code, status, starts_at, erp_version, erp_updated_at, fence_token, created_at, updated_at)
		VALUES ('GHOST', 'U', 'P', 'ACTIVE', ?, 1, ?, 1, ?, ?)`, []any{now, now, now, now}},
	} {
		if _, err := e.DB.Exec(q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	res, code := e.Verify(ctx)
	if code != 1 {
		t.Fatalf("verify over tampered rows: exit %d, want exit 1", code)
	}
	if res.OK() || res.Missing.Count != 1 || res.Stale.Count != 2 || res.Unknown.Count != 1 || res.Unknown.IDs[0] != "GHOST" {
		t.Fatalf("verify found %+v", res)
	}
}

func TestRunsShowsTheSkips(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 300, Seed: 29, Faults: erpmock.Faults{Latency: 80 * time.Millisecond}})
	ctx := context.Background()
	// The first run is stopped once it holds the job lock, until the other
	// two are done, so that they meet a held lock however slowly a loaded
	// machine starts them.
	first := e.stoppedHoldingTheJobLock(t, "run", "--page-size", "30")
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.Run(ctx, "run", "--page-size", "30")
		}()
	}
	wg.Wait()
	if err := first.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if r := first.Wait(); r.Code != 0 {
		t.Fatalf("first run: exit %d: %s", r.Code, r.Out())
	}
	r := e.Run(ctx, "runs")
	out := r.Out()
	if r.Code != 0 {
		t.Fatalf("runs exit %d: %s", r.Code, out)
	}
	if strings.Count(out, "skipped") != 2 || strings.Count(out, "succeeded") != 1 {
		t.Fatalf("runs should list 1 succeeded and 2 skipped:\n%s", out)
	}
	t.Log("\n" + out)
}
