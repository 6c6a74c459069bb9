package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/proctest"
)

// plainLines are the lines of stderr that erpsync prints for a person
// (not the JSON log lines).
func plainLines(stderr string) []string {
	var out []string
	for _, l := range proctest.Lines(stderr) {
		if strings.HasPrefix(l, "erpsync: ") {
			out = append(out, l)
		}
	}
	return out
}

// oneLine fails the test unless r exited code with exactly one plain line
// that holds want.
func oneLine(t *testing.T, what string, r proctest.Result, code int, want string) {
	t.Helper()
	plain := plainLines(r.Stderr)
	if r.Code != code || len(plain) != 1 || !strings.Contains(plain[0], want) {
		t.Fatalf("%s: exit %d (want %d), lines %q (want one with %q):\n%s", what, r.Code, code, plain, want, r.Out())
	}
	t.Logf("%s: %s", what, plain[0])
}

// failsSaying fails the test unless r exited 1 and its summary line's
// error holds want.
func failsSaying(t *testing.T, what string, r proctest.Result, want string) {
	t.Helper()
	for _, l := range proctest.Lines(r.Stderr) {
		if strings.Contains(l, `"status":"failed"`) && strings.Contains(l, want) && r.Code == 1 {
			return
		}
	}
	t.Fatalf("%s: exit %d (want 1), no failed summary with %q:\n%s", what, r.Code, want, r.Out())
}

// TestAWrongMapIsNoSuccess: a map that leaves every record invalid is
// refused at start (exit 2, nothing written); a feed with more invalid
// items than --max-invalid fails the run (exit 1) with the top reasons,
// though it writes the valid records; with the limit raised it succeeds;
// and verify does not say OK over invalid items unless told to ignore them.
func TestAWrongMapIsNoSuccess(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 300, Seed: 51, Faults: erpmock.Faults{InvalidRate: 0.3}})
	ctx := context.Background()
	r := e.Run(ctx, "run", "--erp-map", "product_code=plan")
	oneLine(t, "a wrong map", r, 2, "every item of the ERP's first page is invalid (50 of 50): product_code (plan): missing, want a string (50, e.g. \"M0000001\"")
	if n := e.Count("SELECT COUNT(*) FROM %s", "memberships"); n != 0 {
		t.Fatalf("the refused run wrote %d rows", n)
	}

	r = e.Run(ctx, "run")
	failsSaying(t, "30% invalid", r, "too many invalid records: ")
	if !strings.Contains(r.Stderr, "above --max-invalid 10%") {
		t.Fatalf("the line does not name the limit: %s", r.Stderr)
	}
	if n := e.Count("SELECT COUNT(*) FROM %s", "memberships"); n == 0 || n >= 300 {
		t.Fatalf("%d rows: the valid records must be written, the invalid not", n)
	}
	if r := e.Run(ctx, "run", "--max-invalid", "40%"); r.Code != 0 {
		t.Fatalf("--max-invalid 40%%: exit %d: %s", r.Code, r.Out())
	}
	r = e.Run(ctx, "verify")
	if r.Code != 1 || !strings.HasPrefix(r.Stdout, "INVALID: the rows match the feed's") {
		t.Fatalf("verify over invalid items: exit %d:\n%s", r.Code, r.Out())
	}
	if r := e.Run(ctx, "verify", "--ignore-invalid"); r.Code != 0 || !strings.HasPrefix(r.Stdout, "OK") {
		t.Fatalf("verify --ignore-invalid: exit %d:\n%s", r.Code, r.Out())
	}
}

// TestAFeedThatDoesNotAdvance: an ERP whose next_cursor never changes
// stops run, backfill, verify and reconcile with one line that says what
// the ERP did (exit 1), instead of paging it for ever; the checkpoint is
// not moved past what was read.
func TestAFeedThatDoesNotAdvance(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 300, Seed: 52})
	ctx := context.Background()
	e.Mock.SetFaults(erpmock.Faults{StuckCursor: true})
	const want = "the feed's paging does not advance: page 2 handed out the cursor"
	failsSaying(t, "run", e.Run(ctx, "run", "--page-size", "10"), want)
	failsSaying(t, "backfill", e.Run(ctx, "backfill", "--since", "2000-01-01T00:00:00Z", "--page-size", "10"), want)
	failsSaying(t, "reconcile", e.Run(ctx, "reconcile", "--page-size", "10"), "the feed's paging does not advance")
	r := e.Run(ctx, "verify", "--page-size", "10")
	if r.Code != 1 || !strings.Contains(r.Out(), "the feed's paging does not advance") {
		t.Fatalf("verify: exit %d:\n%s", r.Code, r.Out())
	}
	e.Mock.SetFaults(erpmock.Faults{})
	if r := e.Run(ctx, "run"); r.Code != 0 {
		t.Fatalf("the run after the ERP mended: exit %d: %s", r.Code, r.Out())
	}
	e.assertTruth()
}
