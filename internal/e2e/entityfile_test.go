package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/testenv"
)

// tableSum is a checksum of every column the sync writes of each row of
// e's memberships, and the row count.
func tableSum(t *testing.T, e *proctest.Env) string {
	t.Helper()
	rows, err := e.DB.Query("SELECT erp_id, member_id, product_code, status, starts_at, ends_at, erp_version, erp_updated_at, deleted_at IS NULL FROM " + e.Table("memberships") + " ORDER BY erp_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	sum, n := sha256.New(), 0
	for rows.Next() {
		v := make([]any, 9)
		ptrs := make([]any, len(v))
		for i := range v {
			ptrs[i] = &v[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for _, x := range v {
			if b, ok := x.([]byte); ok {
				x = string(b)
			}
			fmt.Fprintf(sum, "%v|", x)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d rows, sum %x", n, sum.Sum(nil))
}

// TestMembershipsFileIsTheBuiltInEntity: the shipped examples/memberships.yaml
// declares the built-in entity: run and backfill with it write the same
// table as without a file, under the same job (its checkpoint and history)
// and the same record lock keys, so instances of both overlap safely, and
// verify with the file says OK.
func TestMembershipsFileIsTheBuiltInEntity(t *testing.T) {
	t.Parallel()
	file := filepath.Join(testenv.RepoRoot(t), "examples", "memberships.yaml")
	e := proctest.New(t, bin, erpmock.Options{Records: 2000, Seed: 7, Faults: erpmock.Faults{InvalidRate: 0.01}})
	ctx := context.Background()

	// A second database, synced without the file from the same feed.
	other := proctest.New(t, bin, erpmock.Options{Records: 2000, Seed: 7, Faults: erpmock.Faults{InvalidRate: 0.01}})
	other.ERPURL, other.Job = e.ERPURL, e.Job
	if r := other.Run(ctx, "run"); r.Code != 0 {
		t.Fatalf("built-in run: exit %d: %s", r.Code, r.Out())
	}

	// With the file: two runs and a backfill at once, then one more run.
	var procs []*proctest.Proc
	for _, args := range [][]string{
		{"run", "--config", file},
		{"run"},
		{"backfill", "--config", file, "--since", "2000-01-01T00:00:00Z"},
	} {
		procs = append(procs, e.Start(args...))
	}
	for i, p := range procs {
		if r := p.Wait(); r.Code != 0 {
			t.Fatalf("process %d: exit %d: %s", i, r.Code, r.Out())
		}
	}
	if r := e.Run(ctx, "run", "--config", file); r.Code != 0 {
		t.Fatalf("run with the file: exit %d: %s", r.Code, r.Out())
	}
	if got, want := tableSum(t, e), tableSum(t, other); got != want {
		t.Fatalf("with the file: %s; without: %s", got, want)
	}
	if s := e.Check(); !s.OK() {
		t.Fatalf("table: %s", s)
	}
	var jobs []string
	rows, err := e.DB.Query("SELECT DISTINCT job FROM " + e.Table("sync_runs"))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var j string
		if err := rows.Scan(&j); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	rows.Close()
	if len(jobs) != 1 || jobs[0] != e.Job {
		t.Errorf("jobs in the history %v, want only %s: the file's memberships entity keeps --job", jobs, e.Job)
	}
	r := e.Run(ctx, "verify", "--config", file, "--ignore-invalid")
	if r.Code != 0 || !strings.Contains(r.Stdout, "OK: the database matches the feed") {
		t.Fatalf("verify with the file: exit %d: %s", r.Code, r.Out())
	}
}
