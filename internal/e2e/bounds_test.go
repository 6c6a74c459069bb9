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
	var once sync.Once
	hang := func() { e.Mock.SetFaults(erpmock.Faults{HangRate: 1, Hang: 10 * time.Minute}) }
	// Hang as soon as the run has started (its run history row exists).
	pollCtx, stopPolling := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pollCtx.Err() == nil {
			if e.Count("SELECT COUNT(*) FROM %s", "sync_runs") > 0 {
				once.Do(hang)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	r := e.Run(ctx, "run", "--max-duration", "2s", "--grace", "1s", "--erp-timeout", "1h", "--page-size", "10", "--report", report)
	stopPolling()
	<-polled
	once.Do(hang) // for the assertions below, whatever the race
	if ctx.Err() != nil {
		t.Fatalf("the run did not end by itself: %s", r.Out())
	}
	if r.Code != 1 {
		t.Fatalf("exit %d, want 1: %s", r.Code, r.Out())
	}
	if !strings.Contains(r.Out(), "max duration") {
		t.Errorf("no line says why the run ended: %s", r.Out())
	}
	if rep := e.report(report); rep["status"] != "failed" {
		t.Errorf("report status %v, want failed", rep["status"])
	}
	e.Mock.SetFaults(erpmock.Faults{})
	if r := e.Run(context.Background(), "run"); r.Code != 0 {
		t.Fatalf("next run exit %d: %s", r.Code, r.Out())
	}
	e.assertTruth()
}

// TestAShortSecretDoesNotCorruptResults: the output redactor masks secrets
// in log lines and errors, not in a command's results, so a token that is
// also a word of them leaves them intact.
func TestAShortSecretDoesNotCorruptResults(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 50, Seed: 32, Token: "matching"})
	if r := e.Run(context.Background(), "run", "--erp-token", "matching"); r.Code != 0 {
		t.Fatalf("run exit %d: %s", r.Code, r.Out())
	}
	r := e.Run(context.Background(), "verify", "--erp-token", "matching")
	if r.Code != 0 || !regexp.MustCompile(`matching\s+50\b`).MatchString(r.Out()) {
		t.Fatalf("verify exit %d, want its summary intact (matching 50): %s", r.Code, r.Out())
	}
}
