package e2e

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// runtimeTables are the tables the runtime commands write: SELECT, INSERT,
// UPDATE on each, and SELECT on schema_migrations. No DELETE anywhere: a
// finished backfill resets its window's checkpoint with an UPDATE.
var runtimeTables = []string{"memberships", "sync_checkpoints", "sync_runs", "quarantined_records", "sync_quarantine_seq", "sync_table_owners"}

// runtimeGrants are docs/security.md's grants for run, backfill, schedule,
// verify and runs on MySQL.
func runtimeGrants(db, user string) []string {
	var out []string
	for _, table := range runtimeTables {
		out = append(out, fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON `%s`.`%s` TO '%s'@'%%'", db, table, user))
	}
	return append(out,
		fmt.Sprintf("GRANT SELECT ON `%s`.`schema_migrations` TO '%s'@'%%'", db, user))
}

// runtimeUser creates a user that holds only the runtime grants on e's
// database (MySQL's of docs/security.md, or the same on PostgreSQL),
// dropped when the test ends, and returns its DSN.
func (e *env) runtimeUser(t *testing.T) string {
	t.Helper()
	user, pass := testenv.RandomName("erpsync_lp_"), testenv.RandomName("pw-")
	if e.Postgres {
		admin := testenv.WithDatabase(t, e.DSN, "postgres")
		t.Cleanup(func() {
			testenv.ExecSQL(t, e.DSN, `DROP OWNED BY "`+user+`"`)
			testenv.ExecSQL(t, admin, `DROP ROLE IF EXISTS "`+user+`"`)
		})
		testenv.ExecSQL(t, admin, fmt.Sprintf(`CREATE ROLE "%s" LOGIN PASSWORD '%s'`, user, pass))
		grants := []string{fmt.Sprintf(`GRANT SELECT ON schema_migrations TO "%s"`, user)}
		for _, table := range runtimeTables {
			grants = append(grants, fmt.Sprintf(`GRANT SELECT, INSERT, UPDATE ON %s TO "%s"`, table, user))
		}
		testenv.ExecSQL(t, e.DSN, grants...)
		return withUser(t, e.DSN, user, pass)
	}
	root, err := store.ParseDSN(e.DSN)
	if err != nil {
		t.Fatal(err)
	}
	admin := root.Clone()
	admin.DBName = "mysql"
	adminDSN := admin.FormatDSN()
	t.Cleanup(func() { testenv.ExecSQL(t, adminDSN, fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", user)) })
	testenv.ExecSQL(t, adminDSN, append([]string{fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", user, pass)}, runtimeGrants(root.DBName, user)...)...)
	return withUser(t, e.DSN, user, pass)
}

// TestLeastPrivilege runs every command but migrate as a user that holds
// only the runtime grants, and migrate through --migrate-dsn as root.
func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 1200, Seed: 23, Faults: erpmock.Faults{InvalidRate: 0.02, DuplicateRate: 0.3}})
	ctx := context.Background()
	limited := e.runtimeUser(t)
	flag := testenv.DSNFlag(limited)

	// The runtime user cannot migrate; --migrate-dsn can.
	if r := e.Run(ctx, "migrate", flag, limited); r.Code == 0 || !strings.Contains(r.Out(), "denied") {
		t.Fatalf("migrate as the runtime user: exit %d, want a denial: %s", r.Code, r.Out())
	}
	if r := e.Run(ctx, "migrate", flag, limited, "--migrate-dsn", e.DSN); r.Code != 0 {
		t.Fatalf("migrate with --migrate-dsn: exit %d: %s", r.Code, r.Out())
	}
	lst, err := store.Open(ctx, limited, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lst.Close()
	for _, q := range []string{"DELETE FROM memberships", "DELETE FROM sync_checkpoints", "DROP TABLE sync_runs", "CREATE TABLE x (a INT)", "ALTER TABLE memberships ADD COLUMN x INT"} {
		// PostgreSQL refuses DROP and ALTER to all but the table's owner.
		if err := lst.DB().Exec(q).Error; err == nil || !strings.Contains(err.Error(), "denied") && !strings.Contains(err.Error(), "must be owner") {
			t.Fatalf("%s as the runtime user: %v, want denied", q, err)
		}
	}

	report := filepath.Join(t.TempDir(), "run.json")
	as := func(args ...string) string {
		t.Helper()
		r := e.Run(ctx, append(args, flag, limited)...)
		if r.Code != 0 {
			t.Fatalf("%v as the runtime user: exit %d: %s", args, r.Code, r.Out())
		}
		return r.Out()
	}
	as("run", "--report", report, "--page-size", "200")
	rep := e.report(report)
	if rep["status"] != "succeeded" || rep["invalid"].(float64) == 0 || rep["duplicates_in_feed"].(float64) == 0 {
		t.Fatalf("run report: %v", rep)
	}
	e.Mock.Change(300)
	as("run", "--overlap", "1h", "--report", report)
	if rep := e.report(report); rep["updated"].(float64) == 0 {
		t.Fatalf("second run updated nothing: %v", rep)
	}
	out := as("backfill", "--since", "2000-01-01T00:00:00Z", "--page-size", "300", "--log-level", "info")
	if strings.Contains(out, "reset backfill checkpoint") {
		t.Fatalf("the finished backfill could not reset its checkpoint: %s", out)
	}
	if reset := e.Count("SELECT COUNT(*) FROM %s WHERE position = '1000-01-01'", "sync_checkpoints"); reset != 1 {
		t.Fatalf("%d reset backfill checkpoints, want 1", reset)
	}
	as("verify", "--ignore-invalid") // the feed has invalid items on purpose
	as("runs")
	e.assertTruth()
	if n := e.Count("SELECT COUNT(*) FROM %s", "quarantined_records"); n == 0 {
		t.Fatal("no quarantined record written")
	}
}

// TestAWriteDeniedStopsTheRun: a write the database refuses for a
// privilege the user lacks (here INSERT on memberships, taken back from
// the runtime grants) stops the run at once, exit 1, with the database's
// refusal in one line: no record is tried again, none one by one, since
// no retry can heal it. A table the user holds no privilege on is named
// as one it may not read.
func TestAWriteDeniedStopsTheRun(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 3000, Seed: 29})
	limited := e.runtimeUser(t)
	user := userOf(t, limited)
	revoke := fmt.Sprintf("REVOKE INSERT ON `%s`.memberships FROM '%s'@'%%'", e.DBName, user)
	if e.Postgres {
		revoke = fmt.Sprintf(`REVOKE INSERT ON memberships FROM "%s"`, user)
	}
	testenv.ExecSQL(t, e.DSN, revoke)

	report := filepath.Join(t.TempDir(), "run.json")
	r := e.Run(context.Background(), "run", testenv.DSNFlag(limited), limited, "--report", report,
		"--page-size", "100", "--chunk-size", "50", "--max-attempts", "3", "--log-level", "warn")
	out := r.Out()
	if r.Code != 1 || !strings.Contains(r.Stderr, "the database refuses the writes, whatever the retries") ||
		!strings.Contains(out, "denied") {
		t.Fatalf("run with INSERT denied: exit %d, want 1 and the refusal:\n%s", r.Code, out[max(0, len(out)-3000):])
	}
	if n := strings.Count(out, "records go one by one"); n > 0 {
		t.Errorf("%d chunks went one by one after the refusal", n)
	}
	if n := strings.Count(out, "record failed after retries"); n > 16 {
		t.Errorf("%d records were tried one by one after the refusal, want at most one a worker", n)
	}
	rep := e.report(report)
	if rep["status"] != "failed" || rep["inserted"].(float64) != 0 || rep["failed"].(float64) == 0 {
		t.Fatalf("report: %v", rep)
	}

	// With no privilege left on the table the database hides it from the
	// user: the line says the user may not read it, not that it is
	// missing (migrate made it).
	revoke = fmt.Sprintf("REVOKE ALL PRIVILEGES ON `%s`.memberships FROM '%s'@'%%'", e.DBName, user)
	if e.Postgres {
		revoke = fmt.Sprintf(`REVOKE ALL PRIVILEGES ON memberships FROM "%s"`, user)
	}
	testenv.ExecSQL(t, e.DSN, revoke)
	r = e.Run(context.Background(), "run", testenv.DSNFlag(limited), limited)
	if r.Code != 2 || !strings.Contains(r.Stderr, "table memberships: this user may not read it") || strings.Contains(r.Stderr, "does not exist") {
		t.Fatalf("run with no privilege on memberships: exit %d, want 2 and the refusal: %s", r.Code, r.Out())
	}
}

// userOf returns the user name of a DSN of runtimeUser.
func userOf(t *testing.T, dsn string) string {
	t.Helper()
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		return u.User.Username()
	}
	cfg, err := store.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.User
}

// TestALoginRefusedSaysSo: a server that answers and refuses the login (a
// user it does not know: the test servers trust 127.0.0.1's passwords on
// PostgreSQL) is named as such, exit 2, not as a database that is
// unavailable; and a migrate whose user may not create the database says
// what to do instead, exit 1.
func TestALoginRefusedSaysSo(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 10, Seed: 5})
	ctx := context.Background()
	limited := e.runtimeUser(t)
	flag := testenv.DSNFlag(limited)

	unknown := withUser(t, limited, testenv.RandomName("erpsync_nobody_"), "not-the-password")
	r := e.Run(ctx, "run", flag, unknown)
	if r.Code != 2 || !strings.Contains(r.Stderr, " refuses the login: ") || strings.Contains(r.Stderr, "unavailable") ||
		strings.Contains(r.Stderr, "not-the-password") {
		t.Errorf("run as a user the server does not know: exit %d, want 2 and the login refused, the password masked: %s", r.Code, r.Out())
	}

	other := testenv.WithDatabase(t, limited, testenv.RandomName("erpsync_t_nocreate_"))
	r = e.Run(ctx, "migrate", flag, other)
	if r.Code != 1 || !strings.Contains(r.Stderr, "this user may not create databases: create it as a user who may (migrate --plan prints the statement)") {
		t.Errorf("migrate of a new database by a user who may not create it: exit %d, want 1 and what to do: %s", r.Code, r.Out())
	}
}

// withUser is dsn, of either form, logging in as user with password pass.
func withUser(t *testing.T, dsn, user, pass string) string {
	t.Helper()
	if testenv.IsPostgres(dsn) {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(user, pass)
		return u.String()
	}
	cfg, err := store.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Passwd = user, pass
	return cfg.FormatDSN()
}
