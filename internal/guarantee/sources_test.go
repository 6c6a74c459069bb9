package guarantee

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/proctest"
)

// sourcesSpec is a generated entity of several REST sources of one
// records path (erpmock's contracts), one per tenant: each sets a tenant
// and a plant, both key columns, to values drawn with separators ("/",
// "%", "%2F" as text), so that the values of two sources joined with "/"
// are often one text ({a/b, c} and {a, b/c}); each selects its tenant's
// records with params of its own (tenant=T, which the mock applies), or,
// in some feeds, with a parameter the mock ignores (company=T), so that
// every source is served every tenant's records.
type sourcesSpec struct {
	seed    uint64
	tenants []string          // the sources' tenants, in order
	plants  map[string]string // the plant each tenant's source sets
	ignored bool              // the params are ones the API ignores
	records int
	faults  erpmock.Faults
	waves   [][]string // per wave, the commands that run at once
	changes []int      // records changed after each wave
}

// sourceValue draws a value of 1 to 6 characters over an alphabet of
// letters, digits and the characters a job name's escaping touches.
func sourceValue(r *rand.Rand) string {
	const alphabet = "ab2f/%"
	n := 1 + r.IntN(6)
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

// genMultiSource builds a sourcesSpec from seed: 2 to 4 sources, about half
// of whose (tenant, plant) pairs split one text at different "/".
func genMultiSource(seed uint64) *sourcesSpec {
	r := rand.New(rand.NewPCG(seed, 0x736f7572636573))
	sp := &sourcesSpec{seed: seed, plants: map[string]string{}, records: 60 + r.IntN(240), ignored: r.IntN(4) == 0}
	n := 2 + r.IntN(3)
	// A text with several "/": its splits at each "/" are pairs whose
	// old job names (values joined by "/") are all one.
	shared := sourceValue(r) + "/" + sourceValue(r) + "/" + sourceValue(r)
	for len(sp.tenants) < n {
		var tenant, plant string
		if r.IntN(2) == 0 {
			cuts := []int{}
			for i := range len(shared) {
				if shared[i] == '/' {
					cuts = append(cuts, i)
				}
			}
			c := cuts[r.IntN(len(cuts))]
			tenant, plant = shared[:c], shared[c+1:]
		} else {
			tenant, plant = sourceValue(r), sourceValue(r)
		}
		if tenant == "" || plant == "" || len(tenant) > 16 || len(plant) > 16 || slices.Contains(sp.tenants, tenant) {
			continue
		}
		sp.tenants = append(sp.tenants, tenant)
		sp.plants[tenant] = plant
	}
	if r.IntN(2) == 0 {
		// No invalid records: the mock's flaws are in columns this
		// entity does not read, which would make them valid here.
		sp.faults = erpmock.Faults{ErrorRate: 0.05, DuplicateRate: 0.1, StaleRate: 0.1}
	}
	// Runs mostly without an overlap: each source must resume exactly
	// where its own checkpoint says, not where another's does.
	// In half the feeds, runs only: a backfill or a run's overlap would
	// read again what another source's checkpoint skipped.
	cmds := [][]string{
		{"run", "--overlap", "0s"}, {"run", "--overlap", "0s", "--page-size", "7"},
		{"run"}, {"backfill", "--since", "2000-01-01T00:00:00Z", "--page-size", "13"},
	}
	if r.IntN(2) == 0 {
		cmds = cmds[:2]
	}
	for range 2 + r.IntN(2) {
		var wave []string
		for range 1 + r.IntN(3) {
			wave = append(wave, strings.Join(cmds[r.IntN(len(cmds))], " "))
		}
		sp.waves = append(sp.waves, wave)
		sp.changes = append(sp.changes, r.IntN(sp.records/3))
	}
	return sp
}

func (sp *sourcesSpec) String() string {
	return fmt.Sprintf("seed %d: %d records, tenants %q, plants %q, params ignored %v, faults %+v, waves %q, changes %v",
		sp.seed, sp.records, sp.tenants, sp.plants, sp.ignored, sp.faults, sp.waves, sp.changes)
}

// config is the spec's config file.
func (sp *sourcesSpec) config() string {
	param := "tenant"
	if sp.ignored {
		param = "company"
	}
	var b strings.Builder
	b.WriteString("erp:\n  kind: rest\nentities:\n  - name: contracts\n    sources:\n")
	for _, tn := range sp.tenants {
		fmt.Fprintf(&b, "      - {source: /v1/typed/contracts, set: {tenant: %s, plant: %s}, params: {%s: %s}}\n",
			strconv.Quote(tn), strconv.Quote(sp.plants[tn]), param, strconv.Quote(tn))
	}
	b.WriteString(`    key: [tenant, plant, region, "no"]
    updated_at: changed_at
    version: rev
    columns:
      - {name: tenant, type: string(16)}
      - {name: plant,  type: string(16)}
      - {name: region, type: string(64)}
      - {name: "no",   type: int64}
      - {name: plan,   type: string(32)}
`)
	return b.String()
}

// TestSourcesGuarantee runs generated multi-source entities (genMultiSource)
// with bin/erpsync processes, some at once, most without an overlap, while
// records change and the mock's faults hit: after a final run, every valid record of the ERP is
// one row, under its own tenant and that source's plant, at its latest
// version, and no row is another's. In the feeds whose params the API
// ignores, the records of other tenants that each source is served are
// quarantined, never stored under its tenant.
func TestSourcesGuarantee(t *testing.T) {
	feeds := 6
	if testing.Short() {
		feeds = 2
	}
	for seed := range uint64(feeds) {
		sp := genMultiSource(seed + 1)
		t.Run(strconv.FormatUint(sp.seed, 10), func(t *testing.T) {
			t.Parallel()
			runSources(t, sp)
		})
	}
}

// runSources runs the feed of sp and checks the table against the ERP.
func runSources(t *testing.T, sp *sourcesSpec) {
	e := proctest.New(t, erpsyncBin(t), erpmock.Options{Records: sp.records, Seed: int64(sp.seed), Tenants: sp.tenants, Faults: sp.faults})
	file := filepath.Join(t.TempDir(), "sources.yaml")
	if err := os.WriteFile(file, []byte(sp.config()), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := e.Run(context.Background(), "migrate", "--config", file); r.Code != 0 {
		t.Fatalf("%s\nmigrate exit %d: %s\n%s", sp, r.Code, r.Out(), sp.config())
	}
	base := []string{"--config", file, "--erp-retries", "12", "--max-invalid", "100%"}
	for i, wave := range sp.waves {
		var wg sync.WaitGroup
		for _, cmd := range wave {
			wg.Go(func() {
				args := append(strings.Fields(cmd), base...)
				if r := e.Run(context.Background(), args...); r.Code != 0 {
					t.Errorf("%s\nwave %d: %v: exit %d: %s", sp, i, args, r.Code, r.Out())
				}
			})
		}
		wg.Wait()
		e.Mock.Change(sp.changes[i])
	}
	e.Mock.SetFaults(erpmock.Faults{})
	if r := e.Run(context.Background(), append([]string{"run", "--overlap", "0s"}, base...)...); r.Code != 0 {
		t.Fatalf("%s\nfinal run: exit %d: %s", sp, r.Code, r.Out())
	}

	want := map[string]int64{}
	for _, rec := range e.Mock.Truth() {
		want[rec.Tenant+"|"+sp.plants[rec.Tenant]+"|"+rec.ErpID] = rec.Version
	}
	rows, err := e.DB.Query("SELECT tenant, plant, region, no, erp_version FROM " + e.Table("contracts") + " WHERE deleted_at IS NULL")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var dups []string
	for rows.Next() {
		var tenant, plant, region string
		var no, v int64
		if err := rows.Scan(&tenant, &plant, &region, &no, &v); err != nil {
			t.Fatal(err)
		}
		k := tenant + "|" + plant + "|" + erpmock.ContractID(region, no)
		if _, dup := got[k]; dup {
			dups = append(dups, k)
		}
		got[k] = v
	}
	rows.Close()
	var bad []string
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			bad = append(bad, fmt.Sprintf("%s: row at version %d (found %v), want %d", k, g, ok, v))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			bad = append(bad, k+": a row of no record of its tenant")
		}
	}
	if len(bad)+len(dups) > 0 {
		slices.Sort(bad)
		t.Fatalf("%s\n%d rows, want %d; %d wrong, %d twice: %s", sp, len(got), len(want), len(bad), len(dups), strings.Join(bad[:min(len(bad), 10)], "; "))
	}
	if sp.ignored {
		if n := e.Count("SELECT COUNT(*) FROM %s WHERE reason LIKE '%%its source sets%%'", "quarantined_records"); n == 0 {
			t.Errorf("%s\nno record of another tenant quarantined", sp)
		}
	}
}
