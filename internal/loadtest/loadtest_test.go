package loadtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/loadtest"
	"github.com/erpsync/erpsync/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Keep-alive connections of the verification's ERP client.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}

// buildErpsync builds cmd/erpsync for the child processes: in a test,
// os.Executable is the test binary.
func buildErpsync(t *testing.T) string {
	t.Helper()
	bin, err := testenv.Build(t.TempDir(), "./cmd/erpsync")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// loadtestDSN returns the DSN of a fresh database whose name allows the
// load test to empty it, dropped when the test ends.
func loadtestDSN(t *testing.T) string { return testenv.MySQLDSNNamed(t, "erpsync_loadtest_t_") }

func TestLoadtest(t *testing.T) {
	for _, db := range []struct{ name, flag string }{{"mysql", "--mysql-dsn"}, {"postgres", "--postgres-dsn"}} {
		t.Run(db.name, func(t *testing.T) {
			dsn := loadtestDSN(t)
			if db.name == "postgres" {
				dsn = testenv.PostgresDSNNamed(t, "erpsync_loadtest_t_")
			}
			loadtestOn(t, db.flag, dsn)
		})
	}
}

// loadtestOn runs a load test with faults on the database of dsn, given as
// flag, and checks its report.
func loadtestOn(t *testing.T, flag, dsn string) {
	bin := buildErpsync(t)
	out := filepath.Join(t.TempDir(), "report")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var stdout, stderr bytes.Buffer
	err := loadtest.Command().Run(ctx, []string{
		"--erpsync-bin", bin,
		"--records", "3000",
		"--processes", "2",
		"--workers", "4",
		"--page-size", "100",
		flag, dsn,
		"--redis-addr", testenv.RedisAddr(),
		"--out", out,
		// Faults the processes must get through: retries, duplicates,
		// stale versions and records changing while they page. At an
		// error rate of 0.2, erpsync's default of 6 retries gives up on a
		// request once in 0.2^7, about once in 80,000; the test makes
		// about 75 requests, and failed that way once in CI. With 12
		// retries a request fails once in a billion.
		"--error-rate", "0.2",
		"--erp-retries", "12",
		"--retry-after", "0",
		"--duplicate-rate", "0.2",
		"--stale-rate", "0.2",
		"--change-rate", "3",
	}, &stdout, &stderr)
	t.Logf("stdout:\n%s", stdout.String())
	if err != nil {
		t.Fatalf("loadtest: %v\nstderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "verify: OK") {
		t.Errorf("stdout does not say verify: OK")
	}

	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep loadtest.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	if !rep.OK || rep.Verify == nil || !rep.Verify.OK() {
		t.Fatalf("report not OK: failures %v, verify %+v", rep.Failures, rep.Verify)
	}
	if rep.Verify.Rows != rep.FeedRecords || rep.FeedRecords != 3000 {
		t.Errorf("rows %d, feed records %d, want 3000 each", rep.Verify.Rows, rep.FeedRecords)
	}
	if len(rep.Processes) != 2 || rep.Processes[0].Mode != "run" || rep.Processes[1].Mode != "backfill" {
		t.Fatalf("processes: %+v", rep.Processes)
	}
	for _, p := range rep.Processes {
		if p.ExitCode != 0 || p.Report == nil || p.Report.Status != "succeeded" {
			t.Errorf("process %d: exit %d, report %+v", p.Index, p.ExitCode, p.Report)
		}
		if p.PeakRSSKiB <= 0 {
			t.Errorf("process %d: peak RSS %d KiB", p.Index, p.PeakRSSKiB)
		}
		if p.Served < 3000 {
			t.Errorf("process %d: served %d records, want the whole feed", p.Index, p.Served)
		}
	}
	// Every row was written during the test, so every row has a serve
	// time; the count may only lose a row whose write time reads earlier
	// than its serve time by more than the clock's measured uncertainty.
	if rep.Latency.Count+rep.LatencyUnmatched != 3000 || rep.LatencyUnmatched > 30 ||
		rep.Latency.P99 < rep.Latency.P50 || len(rep.Latency.Histogram) == 0 {
		t.Errorf("latency: %+v, %d rows unmatched (clock ±%.2f ms)", rep.Latency, rep.LatencyUnmatched, rep.DBClockUncertaintyMS)
	}
	if rep.Totals.ERPRetries == 0 {
		t.Errorf("no ERP retries with --error-rate 0.2")
	}
	if len(rep.Timeline) < 2 {
		t.Errorf("timeline has %d samples", len(rep.Timeline))
	}

	html, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<!DOCTYPE html>", "Throughput over time", "Latency histogram", "<svg", "<polyline", "<rect", "</html>"} {
		if !bytes.Contains(html, []byte(want)) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	self := bytes.ReplaceAll(html, []byte(`xmlns="http://www.w3.org/2000/svg"`), nil)
	for _, outside := range []string{"http://", "https://", "<script", "src=", "<link"} {
		if bytes.Contains(self, []byte(outside)) {
			t.Errorf("report.html is not self-contained: it has %q", outside)
		}
	}
}

func TestLoadtestRefusesToEmptyOtherDatabases(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := loadtest.Command().Run(context.Background(), []string{
		"--erpsync-bin", "/nonexistent", "--records", "10",
		"--mysql-dsn", "root@tcp(127.0.0.1:3306)/erpsync?parseTime=true",
	}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "refusing to empty") {
		t.Fatalf("err = %v, want a refusal", err)
	}
}

// TestLoadtestsOnOneDatabase runs two load tests, each with a job of its
// own, on one database: the second empties memberships and takes it from
// the first one's job. One that keeps the rows under yet another job is
// refused before it starts a process.
func TestLoadtestsOnOneDatabase(t *testing.T) {
	bin := buildErpsync(t)
	cfg := loadtest.Config{Bin: bin, Records: 200, Processes: 2, MySQLDSN: loadtestDSN(t), RedisAddr: testenv.RedisAddr()}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := range 2 {
		rep, err := loadtest.Run(ctx, cfg)
		if err != nil || !rep.OK {
			t.Fatalf("load test %d: %v %v", i+1, err, rep.Failures)
		}
	}
	cfg.Keep, cfg.Job = true, "someone-else"
	if _, err := loadtest.Run(ctx, cfg); err == nil || !strings.Contains(err.Error(), "belongs to job") || !strings.Contains(err.Error(), "--job") {
		t.Fatalf("a kept table of another job: %v, want refused", err)
	}
}

// TestLoadtestPassesERPRetries: --erp-retries reaches every process. Against
// an ERP that answers every request with an error, each process gives up on
// its first request after the retries it was given, not erpsync's default
// (its attempts are in its error, as the exit 2 of an ERP down at start
// leaves no report).
func TestLoadtestPassesERPRetries(t *testing.T) {
	bin := buildErpsync(t)
	retries := 2
	cfg := loadtest.Config{Bin: bin, Records: 50, Processes: 2, MySQLDSN: loadtestDSN(t), RedisAddr: testenv.RedisAddr(),
		ERPRetries: &retries, Faults: erpmock.Faults{ErrorRate: 1}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := loadtest.Run(ctx, cfg)
	if rep == nil {
		t.Fatalf("no report: %v", err)
	}
	if rep.OK {
		t.Fatalf("a load test against an ERP that always fails passed")
	}
	if r := rep.Config.ERPRetries; r == nil || *r != retries {
		t.Errorf("report config: erp retries %v, want %d", r, retries)
	}
	want := fmt.Sprintf("giving up after %d attempts", retries+1)
	for _, p := range rep.Processes {
		if p.ExitCode == 0 || !strings.Contains(strings.Join(p.LogTail, "\n"), want) {
			t.Errorf("process %d (args %q): exit %d, log %q; want a failure %q", p.Index, p.Args, p.ExitCode, p.LogTail, want)
		}
	}
}
