package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/proctest"
)

// tenantsFile declares erpmock's contracts (its typed face) read as one
// source per tenant: the sources in between the head and the columns.
// tenant and plant are constants of each source, in the key.
func tenantsFile(t *testing.T, sources string) string {
	t.Helper()
	f := `erp:
  kind: rest
entities:
  - name: contracts
    sources:
` + sources + `    key: [tenant, plant, region, "no"]
    updated_at: changed_at
    version: rev
    columns:
      - {name: tenant, type: string(16)}
      - {name: plant,  type: string(16)}
      - {name: region, type: string(64)}
      - {name: "no",   type: int64}
      - {name: plan,   type: string(32)}
`
	path := filepath.Join(t.TempDir(), "tenants.yaml")
	if err := os.WriteFile(path, []byte(f), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// tenantRows returns the rows of contracts as "tenant|plant|region+no",
// counting each.
func tenantRows(t *testing.T, e *proctest.Env) map[string]int {
	t.Helper()
	rows, err := e.DB.Query("SELECT tenant, plant, region, no FROM " + e.Table("contracts") + " WHERE deleted_at IS NULL")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var tenant, plant, region string
		var no int64
		if err := rows.Scan(&tenant, &plant, &region, &no); err != nil {
			t.Fatal(err)
		}
		out[tenant+"|"+plant+"|"+erpmock.ContractID(region, no)]++
	}
	return out
}

// wantTenantRows is what contracts must hold after the mock's valid
// records are read by sources that set, per tenant, the plant
// plants[tenant]: each record once, under its own tenant.
func wantTenantRows(e *proctest.Env, plants map[string]string) map[string]int {
	want := map[string]int{}
	for _, it := range e.Mock.Truth() {
		want[it.Tenant+"|"+plants[it.Tenant]+"|"+it.ErpID]++
	}
	return want
}

// TestSourcesThatReadTheSameRecordsAreRefused: two sources of one REST
// path without params of their own would each read every record, and
// store it under its own company: every command refuses the file, exit
// 2, FILE:LINE naming both, and writes nothing.
func TestSourcesThatReadTheSameRecordsAreRefused(t *testing.T) {
	t.Parallel()
	e := proctest.New(t, bin, erpmock.Options{Records: 20, Seed: 5, Tenants: []string{"1000", "2000"}})
	file := tenantsFile(t, `      - {source: /v1/typed/contracts, set: {tenant: "1000", plant: P}}
      - {source: /v1/typed/contracts, set: {tenant: "2000", plant: P}}
`)
	want := file + ":7: sources /v1/typed/contracts (line 6) and /v1/typed/contracts (line 7) would read the same records"
	for _, args := range [][]string{{"config", "check"}, {"migrate"}, {"run"}, {"verify"}, {"reconcile"}} {
		r := e.Run(context.Background(), append(args, "--config", file)...)
		if r.Code != 2 || !strings.Contains(r.Stderr, want) {
			t.Errorf("%v: exit %d, want 2 and %q:\n%s", args, r.Code, want, r.Out())
		}
	}
	if e.TableExists("contracts") {
		t.Error("the refused file created its table")
	}
	if n := e.Count("SELECT COUNT(*) FROM %s", "sync_runs"); n != 0 {
		t.Errorf("the refused file ran %d times", n)
	}
}

// TestSourcesReadOnlyTheirOwnRecords: one REST path read as a source per
// tenant, each with params of its own (tenant=T, which erpmock applies):
// every record is stored once, under its own tenant, by its own job, also
// after records change; verify finds the table equal to each source.
// Then a source whose params the API ignores (company=T, a parameter
// erpmock does not know) is served every tenant's records: those of the
// other tenants are invalid, never stored under its tenant.
func TestSourcesReadOnlyTheirOwnRecords(t *testing.T) {
	t.Parallel()
	tenants := []string{"1000", "2000"}
	e := proctest.New(t, bin, erpmock.Options{Records: 300, Seed: 7, Tenants: tenants})
	file := tenantsFile(t, `      - {source: /v1/typed/contracts, set: {tenant: "1000", plant: P}, params: {tenant: "1000"}}
      - {source: /v1/typed/contracts, set: {tenant: "2000", plant: P}, params: {tenant: "2000"}}
`)
	e.MustRun("config", "check", "--config", file)
	e.MustRun("migrate", "--config", file)
	plants := map[string]string{"1000": "P", "2000": "P"}
	check := func(when string) {
		t.Helper()
		got, want := tenantRows(t, e), wantTenantRows(e, plants)
		if len(got) != len(want) {
			t.Errorf("%s: %d rows, want %d", when, len(got), len(want))
		}
		for k, n := range want {
			if got[k] != n {
				t.Errorf("%s: row %s %d times, want once", when, k, got[k])
			}
		}
		for k := range got {
			if want[k] == 0 {
				t.Errorf("%s: row %s is no record of its tenant", when, k)
			}
		}
	}
	e.MustRun("run", "--config", file)
	check("first run")
	e.Mock.Change(60)
	e.MustRun("run", "--config", file)
	check("after changes")
	if r := e.Run(context.Background(), "verify", "--config", file); r.Code != 0 {
		t.Errorf("verify exit %d: %s", r.Code, r.Out())
	}
	for _, job := range []string{"contracts/1000/P", "contracts/2000/P"} {
		if n := e.Count("SELECT COUNT(*) FROM %s WHERE name = ?", "sync_checkpoints", job); n != 1 {
			t.Errorf("%d checkpoints of job %s", n, job)
		}
	}

	// params the API ignores: each source is served both tenants.
	ignored := tenantsFile(t, `      - {source: /v1/typed/contracts, set: {tenant: "1000", plant: Q}, params: {company: "1000"}}
      - {source: /v1/typed/contracts, set: {tenant: "2000", plant: Q}, params: {company: "2000"}}
`)
	report := filepath.Join(t.TempDir(), "report.json")
	e.Run(context.Background(), "run", "--config", ignored, "--max-invalid", "100%", "--report", report)
	plants = map[string]string{"1000": "Q", "2000": "Q"}
	got := tenantRows(t, e)
	for k := range got {
		if strings.Contains(k, "|Q|") && wantTenantRows(e, plants)[k] == 0 {
			t.Errorf("row %s: a record stored under another tenant than its own", k)
		}
	}
	if n := e.Count("SELECT COUNT(*) FROM %s WHERE reason LIKE '%%its source sets%%'", "quarantined_records"); n == 0 {
		t.Errorf("no record of another tenant quarantined")
	}
}

// TestJobNamesWithSlashes: the sources {tenant: "A/B", plant: "C"} and
// {tenant: "A", plant: "B/C"} have jobs of their own (contracts/A%2FB/C
// and contracts/A/B%2FC), two checkpoints, and every record of both is
// written.
func TestJobNamesWithSlashes(t *testing.T) {
	t.Parallel()
	tenants := []string{"A/B", "A"}
	e := proctest.New(t, bin, erpmock.Options{Records: 200, Seed: 9, Tenants: tenants})
	file := tenantsFile(t, `      - {source: /v1/typed/contracts, set: {tenant: "A/B", plant: "C"}, params: {tenant: "A/B"}}
      - {source: /v1/typed/contracts, set: {tenant: "A", plant: "B/C"}, params: {tenant: "A"}}
`)
	e.MustRun("migrate", "--config", file)
	// Without an overlap, a source that found another's checkpoint
	// would start past every record.
	e.MustRun("run", "--config", file, "--overlap", "0s")
	got, want := tenantRows(t, e), wantTenantRows(e, map[string]string{"A/B": "C", "A": "B/C"})
	if len(got) != len(want) {
		t.Errorf("%d rows, want %d", len(got), len(want))
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("row %s %d times, want once", k, got[k])
		}
	}
	for _, job := range []string{"contracts/A%2FB/C", "contracts/A/B%2FC"} {
		if n := e.Count("SELECT COUNT(*) FROM %s WHERE name = ?", "sync_checkpoints", job); n != 1 {
			t.Errorf("%d checkpoints of job %s", n, job)
		}
	}
}
