package e2e

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
)

// TestMaxDurationEndsARunThatWouldHang: an ERP that holds every response
// for minutes, a client timeout longer than that, and --max-duration 2s.
// The run ends on its own, exit 1 with status failed and one clear line,
// and the next run, with the ERP well again, reaches the truth.
func TestMaxDurationEndsARunThatWouldHang(t *testing.T) {
	t.Parallel()
	// 30 pages of 10 at 100 ms each outlast 2s even if the hang below
	// comes late; the count probe at start must answer.
	e := setup(t, erpmock.Options{Records: 300, Seed: 31, Faults: erpmock.Faults{Latency: 100 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	report := filepath.Join(t.TempDir(), "report.json")
	c := e.cmd(ctx, "run", "--max-duration", "2s", "--grace", "1s", "--erp-timeout", "1h", "--page-size", "10", "--report", report)
	var out strings.Builder
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	hang := func() { e.mock.SetFaults(erpmock.Faults{HangRate: 1, Hang: 10 * time.Minute}) }
	// Hang as soon as the run has started (its run history row exists).
	go func() {
		for ctx.Err() == nil {
			var n int64
			e.store.DB().Raw("SELECT COUNT(*) FROM sync_runs").Scan(&n)
			if n > 0 {
				once.Do(hang)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	err := c.Wait()
	once.Do(hang) // for the assertions below, whatever the race
	if ctx.Err() != nil {
		t.Fatalf("the run did not end by itself: %s", out.String())
	}
	if code := c.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit %d (%v), want 1: %s", code, err, out.String())
	}
	if !strings.Contains(out.String(), "max duration") {
		t.Errorf("no line says why the run ended: %s", out.String())
	}
	if rep := readReport(t, report); rep["status"] != "failed" {
		t.Errorf("report status %v, want failed", rep["status"])
	}
	e.mock.SetFaults(erpmock.Faults{})
	if out, code := e.run(context.Background(), "run"); code != 0 {
		t.Fatalf("next run exit %d: %s", code, out)
	}
	e.assertTruth()
}

// TestAShortSecretDoesNotCorruptResults: the output redactor masks secrets
// in log lines and errors, not in a command's results, so a token that is
// also a word of them leaves them intact.
func TestAShortSecretDoesNotCorruptResults(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 50, Seed: 32, Token: "matching"})
	if out, code := e.run(context.Background(), "run", "--erp-token", "matching"); code != 0 {
		t.Fatalf("run exit %d: %s", code, out)
	}
	out, code := e.run(context.Background(), "verify", "--erp-token", "matching")
	if code != 0 || !regexp.MustCompile(`matching\s+50\b`).MatchString(out) {
		t.Fatalf("verify exit %d, want its summary intact (matching 50): %s", code, out)
	}
}
