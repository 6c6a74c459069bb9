package e2e

import (
	"context"
	"fmt"
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

// failsSaying fails the test unless r, a run, backfill or reconcile
// (cmd), exited 1 with a failed JSON summary line whose error holds want
// and one plain line for a person, "erpsync: <cmd> failed: ", that holds
// want and then hint.
func failsSaying(t *testing.T, cmd string, r proctest.Result, want, hint string) {
	t.Helper()
	summary := false
	for _, l := range proctest.Lines(r.Stderr) {
		summary = summary || strings.Contains(l, `"status":"failed"`) && strings.Contains(l, want)
	}
	if !summary || r.Code != 1 {
		t.Fatalf("%s: exit %d (want 1), no failed summary with %q:\n%s", cmd, r.Code, want, r.Out())
	}
	prefix := "erpsync: " + cmd + " failed: "
	plain := plainLines(r.Stderr)
	if len(plain) != 1 || !strings.HasPrefix(plain[0], prefix) || !strings.Contains(plain[0], want) || !strings.HasSuffix(plain[0], hint) {
		t.Fatalf("%s: plain lines %q; want one starting %q, with %q, ending %q", cmd, plain, prefix, want, hint)
	}
	t.Logf("%s: %s", cmd, plain[0])
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
	oneLine(t, "a wrong map", r, 2, "every item of the ERP's first page is invalid (300 of 300): product_code (plan): missing, want a string (300, e.g. \"M0000001\"")
	if n := e.Count("SELECT COUNT(*) FROM %s", "memberships"); n != 0 {
		t.Fatalf("the refused run wrote %d rows", n)
	}

	const tooMany, fix = "too many invalid records: ", "(fix --erp-map or --erp-status-map, or the records in the ERP; when such items are expected, raise --max-invalid)"
	r = e.Run(ctx, "run")
	failsSaying(t, "run", r, tooMany, fix)
	if !strings.Contains(plainLines(r.Stderr)[0], "above --max-invalid 10%") {
		t.Fatalf("the line does not name the limit: %s", r.Stderr)
	}
	if n := e.Count("SELECT COUNT(*) FROM %s", "memberships"); n == 0 || n >= 300 {
		t.Fatalf("%d rows: the valid records must be written, the invalid not", n)
	}
	failsSaying(t, "backfill", e.Run(ctx, "backfill", "--since", "2000-01-01T00:00:00Z"), tooMany, fix)
	if r := e.Run(ctx, "run", "--max-invalid", "40%"); r.Code != 0 {
		t.Fatalf("--max-invalid 40%%: exit %d: %s", r.Code, r.Out())
	}
	r = e.Run(ctx, "verify")
	if r.Code != 1 || !strings.HasPrefix(r.Stdout, "INVALID: the rows match the feed's") {
		t.Fatalf("verify over invalid items: exit %d:\n%s", r.Code, r.Out())
	}
	// The number is of records, each counted once however many copies of
	// it the feed served, not of items.
	bad := len(e.Mock.InvalidIDs())
	if want := fmt.Sprintf("but %d records' newest copies are invalid", bad); !strings.Contains(r.Stdout, want) ||
		!strings.Contains(r.Stdout, fmt.Sprintf("(%d records whose newest copy is invalid)", bad)) {
		t.Fatalf("verify over %d invalid records does not count them as records (%q):\n%s", bad, want, r.Out())
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
	const fix = "(the checkpoint is kept; fix the ERP's paging); if the ERP pages right, --erp-cursor-path may name the wrong field"
	failsSaying(t, "run", e.Run(ctx, "run", "--page-size", "10"), want, fix)
	failsSaying(t, "backfill", e.Run(ctx, "backfill", "--since", "2000-01-01T00:00:00Z", "--page-size", "10"), want, fix)
	failsSaying(t, "reconcile", e.Run(ctx, "reconcile", "--page-size", "10"), want, fix)
	oneLine(t, "verify", e.Run(ctx, "verify", "--page-size", "10"), 1, "erpsync: verify: erp: "+want)
	e.Mock.SetFaults(erpmock.Faults{})
	if r := e.Run(ctx, "run"); r.Code != 0 {
		t.Fatalf("the run after the ERP mended: exit %d: %s", r.Code, r.Out())
	}
	e.assertTruth()
}
