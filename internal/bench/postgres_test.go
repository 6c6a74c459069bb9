package bench

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// pgBenchDSN returns the DSN of a fresh PostgreSQL database whose name
// has "bench" in it, dropped when the test ends.
func pgBenchDSN(t *testing.T) string {
	t.Helper()
	dsn := strings.Replace(testenv.PostgresDSN(t), "/erpsync_t_", "/erpsync_bench_t_", 1)
	pc, err := store.ParsePostgresDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	admin := strings.Replace(dsn, "/"+pc.Database+"?", "/postgres?", 1)
	t.Cleanup(func() {
		if s, err := store.Open(context.Background(), admin, &store.Options{MaxOpenConns: 1}); err == nil {
			s.DB().Exec(`DROP DATABASE IF EXISTS "` + pc.Database + `" WITH (FORCE)`)
			s.Close()
		}
	})
	return dsn
}

// TestQuickPostgres runs the PostgreSQL rows on a tiny feed: each
// measurement is made, its table checked after it, and reported.
func TestQuickPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds erpsync and runs several backfills")
	}
	bin, err := testenv.Build(t.TempDir(), "./cmd/erpsync")
	if err != nil {
		t.Fatal(err)
	}
	if help, _ := exec.Command(bin, "backfill", "-h").CombinedOutput(); !bytes.Contains(help, []byte("postgres-dsn")) {
		t.Skip("this erpsync has no --postgres-dsn")
	}
	var log bytes.Buffer
	res, err := Run(context.Background(), Config{
		Bin: bin, MySQLDSN: testenv.MySQLDSNNamed(t, "erpsync_bench_t_"), PostgresDSN: pgBenchDSN(t), RedisAddr: testenv.RedisAddr(),
		Records: 2000, Repeat: 1, Log: &log, Only: []string{PGBackfill, PGTyped, PGDocuments},
	})
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, log.String())
	}
	p := res.Postgres
	if p == nil || p.Documents == nil {
		t.Fatalf("postgresql results: %+v", p)
	}
	var pgCPU float64
	for name, r := range map[string]*Result{"insert ceiling": p.CeilingInsert, "copy ceiling": p.CeilingCopy, "backfill": p.Backfill,
		"typed": p.Typed, "typed raw": p.TypedRaw, "documents": p.Documents.Backfill, "documents raw": p.Documents.Raw} {
		// PostgreSQL's CPU is read in clock ticks (10 ms): a ceiling of
		// 2,000 rows may take less than one, so each is only not negative,
		// and their sum is more than nothing.
		if r == nil || r.PerSecond <= 0 || r.CPU.Postgres < 0 || r.CPU.MySQL != 0 {
			t.Errorf("%s: %+v", name, r)
			continue
		}
		pgCPU += r.CPU.Postgres
	}
	if pgCPU <= 0 {
		t.Errorf("no PostgreSQL CPU measured in any row")
	}
	if p.Backfill.Report.Inserted != 2000 || p.Typed.Report.Inserted != 2000 || p.Documents.Backfill.Report.Inserted != 2000 || len(p.Rounds) != 1 || len(p.Documents.Ratios) != 1 {
		t.Errorf("backfill %+v, typed %+v, documents %+v, rounds %v", p.Backfill.Report, p.Typed.Report, p.Documents.Backfill.Report, p.Rounds)
	}
	var md bytes.Buffer
	res.Markdown(&md)
	for _, want := range []string{"PostgreSQL, database " + p.Database, "| PostgreSQL: backfill / ceiling (the faster raw bulk upsert) |", "| PostgreSQL: documents backfill / raw insert, lines/s |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}

// The check of the memberships table fails whenever the table differs
// from the feed in a row: a value, a time by a millisecond, an end made
// null, a row missing. It passes on the ceilings' tables.
func TestCheckMembershipsPostgres(t *testing.T) {
	ctx := context.Background()
	b, cfg := testBench(t, Config{Bin: "erpsync", PostgresDSN: pgBenchDSN(t), Only: []string{PGBackfill}})
	p, err := b.startPostgres(ctx, cfg, erpmock.New(erpmock.Options{Records: 300, Seed: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	if _, err := p.ceilingCopy(ctx); err != nil {
		t.Fatalf("copy ceiling: %v", err)
	}
	var ended string
	if err := p.b.db.QueryRowContext(ctx, "SELECT erp_id FROM memberships WHERE ends_at IS NOT NULL ORDER BY erp_id LIMIT 1").Scan(&ended); err != nil {
		t.Fatal(err)
	}
	for _, breakIt := range []string{
		"",
		"UPDATE memberships SET status = status || 'x' WHERE erp_id = (SELECT MIN(erp_id) FROM memberships)",
		"UPDATE memberships SET starts_at = starts_at + interval '1 millisecond' WHERE erp_id = (SELECT MIN(erp_id) FROM memberships)",
		"UPDATE memberships SET ends_at = NULL WHERE erp_id = '" + ended + "'",
		"UPDATE memberships SET erp_version = erp_version + 1 WHERE erp_id = (SELECT MAX(erp_id) FROM memberships)",
		"DELETE FROM memberships WHERE erp_id = (SELECT MAX(erp_id) FROM memberships)",
	} {
		if _, err := p.ceilingInsert(ctx); err != nil {
			t.Fatalf("insert ceiling: %v", err)
		}
		if breakIt == "" {
			continue
		}
		if _, err := p.b.db.ExecContext(ctx, breakIt); err != nil {
			t.Fatalf("%s: %v", breakIt, err)
		}
		if err := p.checkMemberships(ctx, "broken"); err == nil {
			t.Errorf("%s: the check passed", breakIt)
		}
	}
}
