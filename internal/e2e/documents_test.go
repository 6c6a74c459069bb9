package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/proctest"
)

// ordersFile declares the orders of erpmock's documents face: the
// contract's key and a few columns, and its lines as a child.
const ordersFile = `erp:
  kind: rest
entities:
  - name: orders
    source: /v1/typed/orders
    key: [region, "no"]
    updated_at: changed_at
    version: rev
    columns:
      - {name: region, type: string(64)}
      - {name: "no",   type: int64}
      - {name: plan,   type: string(32)}
      - {name: amount, type: "decimal(12,2)"}
    children:
      - name: lines
        table: order_lines
        key: [pos]
        columns:
          - {name: pos,      type: int32}
          - {name: material, type: string(40)}
          - {name: qty,      type: "decimal(13,3)"}
`

// checkOrderLines fails the test unless every live order's lines in
// order_lines are exactly erpmock.OrderLines of its erp_id at the version
// its row holds, value for value, each line at that version. It returns
// how many lines the live orders have.
func checkOrderLines(t *testing.T, e *proctest.Env) int {
	t.Helper()
	want := map[string][]string{}
	versions := map[string]int64{}
	rows, err := e.DB.Query("SELECT region, no, erp_version FROM " + e.Table("orders") + " WHERE deleted_at IS NULL")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var region string
		var no, v int64
		if err := rows.Scan(&region, &no, &v); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("%s/%d", region, no)
		versions[key] = v
		for _, l := range erpmock.OrderLines(erpmock.ContractID(region, no), v) {
			want[key] = append(want[key], fmt.Sprintf("%d %s %s v%d", l.Pos, l.Material, l.Qty, v))
		}
	}
	rows.Close()
	got := map[string][]string{}
	rows, err = e.DB.Query("SELECT region, no, pos, material, qty, erp_version FROM " + e.Table("order_lines") + " ORDER BY region, no, pos")
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for rows.Next() {
		var region, material, qty string
		var no, v int64
		var pos int
		if err := rows.Scan(&region, &no, &pos, &material, &qty, &v); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("%s/%d", region, no)
		if _, live := versions[key]; live {
			got[key] = append(got[key], fmt.Sprintf("%d %s %s v%d", pos, material, qty, v))
			lines++
		}
	}
	rows.Close()
	for key, w := range want {
		if !slices.Equal(got[key], w) {
			t.Fatalf("order %s at version %d: lines\n%s\nwant\n%s", key, versions[key], strings.Join(got[key], "\n"), strings.Join(w, "\n"))
		}
	}
	for key, g := range got {
		if want[key] == nil {
			t.Fatalf("order %s at version %d has lines %v, want none", key, versions[key], g)
		}
	}
	return lines
}

// TestDocumentsSyncWhole: orders with their lines, read from a REST array
// property, land whole: after a run, after records change (lines added,
// dropped and changed between versions) and after overlapping runs, every
// order's child rows are exactly the lines of the version its row holds.
// verify compares the lines too: a line deleted, changed or added by hand
// is a mismatch that names it, and reconcile puts the lines back.
func TestDocumentsSyncWhole(t *testing.T) {
	t.Parallel()
	e := proctest.New(t, bin, erpmock.Options{Records: 1500, Seed: 17, Faults: erpmock.Faults{InvalidRate: 0.01}})
	file := filepath.Join(t.TempDir(), "orders.yaml")
	if err := os.WriteFile(file, []byte(ordersFile), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e.MustRun("migrate", "--config", file)
	e.MustRun("run", "--config", file)
	if n := checkOrderLines(t, e); n < 3000 {
		t.Fatalf("%d lines after the first run: want several per order", n)
	}

	// Records change before and while two runs and a backfill overlap.
	e.Mock.Change(300)
	var procs []*proctest.Proc
	for _, args := range [][]string{
		{"run", "--config", file},
		{"run", "--config", file},
		{"backfill", "--config", file, "--since", "2000-01-01T00:00:00Z"},
	} {
		procs = append(procs, e.Start(args...))
	}
	e.Mock.Change(200)
	for i, p := range procs {
		if r := p.Wait(); r.Code != 0 {
			t.Fatalf("process %d: exit %d: %s", i, r.Code, r.Out())
		}
	}
	e.MustRun("run", "--config", file)
	checkOrderLines(t, e)
	if r := e.Run(ctx, "verify", "--config", file, "--ignore-invalid"); r.Code != 0 || !strings.Contains(r.Stdout, "OK: the database matches the feed") {
		t.Fatalf("verify: exit %d: %s", r.Code, r.Out())
	}

	// Lines tampered with by hand: one deleted, one changed, one added.
	var region string
	var no int64
	var pos int
	if err := e.DB.QueryRow("SELECT region, no, pos FROM "+e.Table("order_lines")+" ORDER BY region, no, pos LIMIT 1").Scan(&region, &no, &pos); err != nil {
		t.Fatal(err)
	}
	var lastRegion string
	var lastNo int64
	var lastPos int
	if err := e.DB.QueryRow("SELECT region, no, pos FROM "+e.Table("order_lines")+" ORDER BY region DESC, no DESC, pos DESC LIMIT 1").Scan(&lastRegion, &lastNo, &lastPos); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		fmt.Sprintf("DELETE FROM %s WHERE region = '%s' AND no = %d AND pos = %d", e.Table("order_lines"), region, no, pos),
		fmt.Sprintf("UPDATE %s SET qty = qty + 1 WHERE region = '%s' AND no = %d AND pos = %d", e.Table("order_lines"), lastRegion, lastNo, lastPos),
		fmt.Sprintf("INSERT INTO %s (region, no, pos, material, qty, erp_version) SELECT region, no, 99, 'EXTRA', 1, erp_version FROM %s WHERE deleted_at IS NULL ORDER BY region, no LIMIT 1 OFFSET 5", e.Table("order_lines"), e.Table("orders")),
	} {
		if _, err := e.DB.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	r := e.Run(ctx, "verify", "--config", file, "--ignore-invalid")
	if r.Code != 1 || !strings.Contains(r.Stdout, "MISMATCH") {
		t.Fatalf("verify of tampered lines: exit %d: %s", r.Code, r.Out())
	}
	for _, want := range []string{"lines missing  1", "lines extra    1", "lines stale    1", fmt.Sprintf("lines[%d]", pos), "lines[99]"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("verify of tampered lines does not say %q:\n%s", want, r.Stdout)
		}
	}
	if r := e.Run(ctx, "reconcile", "--config", file, "--max-invalid", "1"); r.Code != 0 {
		t.Fatalf("reconcile: exit %d: %s", r.Code, r.Out())
	}
	checkOrderLines(t, e)
	if r := e.Run(ctx, "verify", "--config", file, "--ignore-invalid"); r.Code != 0 {
		t.Fatalf("verify after reconcile: exit %d: %s", r.Code, r.Out())
	}
}
