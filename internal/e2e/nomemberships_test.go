package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/testenv"
)

// A database migrated for a config file's entities alone has no
// memberships table, and its plan names none; migrating it later for the
// built-in entity creates the table the numbered migrations make on a new
// database, and its plan shows that.
func TestMigrateConfigOnlyHasNoMemberships(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 1, Seed: 1})
	_, dsn := e.freshDatabase("_config_only")
	flag := testenv.DSNFlag(dsn)
	cfg := customersConfig(t, "http://127.0.0.1:4004/odata/v4/sales/")

	r := e.MustRun("migrate", "--plan", flag, dsn, "--config", cfg)
	if strings.Contains(r.Stdout, "memberships") {
		t.Errorf("migrate --plan --config on a fresh install names memberships:\n%s", r.Stdout)
	}
	e.MustRun("migrate", flag, dsn, "--config", cfg)
	fresh := e.On(dsn)
	if got := fresh.Tables(); slices.Contains(got, "memberships") || !slices.Contains(got, "customers") {
		t.Fatalf("tables after migrate --config: %v, want customers and no memberships", got)
	}
	versions := func(db *proctest.Env) string {
		t.Helper()
		var v []string
		rows, err := db.DB.Query("SELECT version FROM " + db.Table("schema_migrations") + " ORDER BY version")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			v = append(v, s)
		}
		return strings.Join(v, ",")
	}
	if got, want := versions(fresh), versions(e.Env); got != want {
		t.Errorf("migrations recorded without memberships: %s, with: %s", got, want)
	}
	r = e.MustRun("migrate", "--plan", flag, dsn, "--config", cfg)
	if r.Stdout != "nothing to migrate: the database matches\n" {
		t.Errorf("the plan after migrate --config: %q", r.Stdout)
	}
	// The file's commands need no memberships table.
	if r := e.MustRun("runs", "--status", flag, dsn, "--config", cfg); !strings.Contains(r.Stdout, "customers") {
		t.Errorf("runs --status --config on a database without memberships:\n%s", r.Out())
	}

	// The built-in entity later: the plan shows the table, migrate makes
	// it as the numbered migrations do.
	r = e.MustRun("migrate", "--plan", flag, dsn)
	addColumn := "ALTER TABLE memberships ADD COLUMN restore_count"
	if e.Postgres {
		addColumn = "ALTER TABLE memberships ADD COLUMN IF NOT EXISTS restore_count"
	}
	if !strings.Contains(r.Stdout, "CREATE TABLE IF NOT EXISTS memberships (") || !strings.Contains(r.Stdout, addColumn) {
		t.Errorf("migrate --plan for the built-in entity on a database without memberships:\n%s", r.Stdout)
	}
	e.MustRun("migrate", flag, dsn)
	if got, want := fresh.TableDDL("memberships"), e.TableDDL("memberships"); got != want {
		t.Errorf("memberships added later:\n%s\nthe numbered migrations':\n%s", got, want)
	}
	if got, want := versions(fresh), versions(e.Env); got != want {
		t.Errorf("migrations recorded after memberships was added: %s, want %s", got, want)
	}
	for _, args := range [][]string{{"migrate", "--plan", flag, dsn}, {"migrate", "--plan", flag, dsn, "--config", cfg}} {
		if r := e.MustRun(args...); r.Stdout != "nothing to migrate: the database matches\n" {
			t.Errorf("%v after memberships was added: %q", args, r.Stdout)
		}
	}
}

// freshDatabase is the name and DSN of a database on e's server that does
// not exist yet (e's own name with suffix), dropped when the test ends.
func (e *env) freshDatabase(suffix string) (name, dsn string) {
	name = e.DBName + suffix
	drop := "DROP DATABASE IF EXISTS `" + name + "`"
	if e.Postgres {
		drop = `DROP DATABASE IF EXISTS "` + name + `" WITH (FORCE)`
	}
	e.T.Cleanup(func() { e.DB.Exec(drop) })
	return name, strings.Replace(e.DSN, "/"+e.DBName, "/"+name, 1)
}

// A file's entity syncs into a database migrated for it alone: no command
// of the file needs the memberships table.
func TestRunConfigOnlyWithoutMemberships(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 50, Seed: 2})
	_, dsn := e.freshDatabase("_members")
	flag := testenv.DSNFlag(dsn)
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "examples", "memberships.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := strings.NewReplacer("name: memberships", "name: members", "table: memberships", "table: members",
		"url: http://127.0.0.1:8090", "url: "+e.ERPURL).Replace(string(b))
	cfg := filepath.Join(t.TempDir(), "members.yaml")
	if err := os.WriteFile(cfg, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	e.MustRun("migrate", flag, dsn, "--config", cfg)
	e.MustRun("run", flag, dsn, "--config", cfg)
	db := e.On(dsn)
	if rows, builtin := db.Count("SELECT COUNT(*) FROM %s", "members"), db.TableExists("memberships"); rows == 0 || builtin {
		t.Errorf("after run --config: %d rows in members, a memberships table: %v", rows, builtin)
	}
}
