package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/testenv"
)

// A database migrated for a config file's entities alone has no
// memberships table, and its plan names none; migrating it later for the
// built-in entity creates the table the numbered migrations make on a new
// database, and its plan shows that.
func TestMigrateConfigOnlyHasNoMemberships(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 1, Seed: 1})
	fresh, dsn := e.freshDatabase("_config_only")
	cfg := customersConfig(t, "http://127.0.0.1:4004/odata/v4/sales/")

	r := e.MustRun("migrate", "--plan", "--mysql-dsn", dsn, "--config", cfg)
	if strings.Contains(r.Stdout, "memberships") {
		t.Errorf("migrate --plan --config on a fresh install names memberships:\n%s", r.Stdout)
	}
	e.MustRun("migrate", "--mysql-dsn", dsn, "--config", cfg)
	tables := func() []string {
		t.Helper()
		rows, err := e.DB.Query("SHOW TABLES FROM `" + fresh + "`")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	}
	if got := tables(); strings.Contains(" "+strings.Join(got, " ")+" ", " memberships ") || !strings.Contains(strings.Join(got, " "), "customers") {
		t.Fatalf("tables after migrate --config: %v, want customers and no memberships", got)
	}
	versions := func(db string) string {
		t.Helper()
		var v string
		if err := e.DB.QueryRow("SELECT GROUP_CONCAT(version ORDER BY version) FROM `" + db + "`.schema_migrations").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got, want := versions(fresh), versions(e.DBName); got != want {
		t.Errorf("migrations recorded without memberships: %s, with: %s", got, want)
	}
	r = e.MustRun("migrate", "--plan", "--mysql-dsn", dsn, "--config", cfg)
	if r.Stdout != "nothing to migrate: the database matches\n" {
		t.Errorf("the plan after migrate --config: %q", r.Stdout)
	}
	// The file's commands need no memberships table.
	if r := e.MustRun("runs", "--status", "--mysql-dsn", dsn, "--config", cfg); !strings.Contains(r.Stdout, "customers") {
		t.Errorf("runs --status --config on a database without memberships:\n%s", r.Out())
	}

	// The built-in entity later: the plan shows the table, migrate makes
	// it as the numbered migrations do.
	r = e.MustRun("migrate", "--plan", "--mysql-dsn", dsn)
	if !strings.Contains(r.Stdout, "CREATE TABLE IF NOT EXISTS memberships (") || !strings.Contains(r.Stdout, "ALTER TABLE memberships ADD COLUMN restore_count") {
		t.Errorf("migrate --plan for the built-in entity on a database without memberships:\n%s", r.Stdout)
	}
	e.MustRun("migrate", "--mysql-dsn", dsn)
	showCreate := func(db string) string {
		t.Helper()
		var name, ddl string
		if err := e.DB.QueryRow("SHOW CREATE TABLE `"+db+"`.memberships").Scan(&name, &ddl); err != nil {
			t.Fatal(err)
		}
		return ddl
	}
	if got, want := showCreate(fresh), showCreate(e.DBName); got != want {
		t.Errorf("memberships added later:\n%s\nthe numbered migrations':\n%s", got, want)
	}
	if got, want := versions(fresh), versions(e.DBName); got != want {
		t.Errorf("migrations recorded after memberships was added: %s, want %s", got, want)
	}
	for _, args := range [][]string{{"migrate", "--plan", "--mysql-dsn", dsn}, {"migrate", "--plan", "--mysql-dsn", dsn, "--config", cfg}} {
		if r := e.MustRun(args...); r.Stdout != "nothing to migrate: the database matches\n" {
			t.Errorf("%v after memberships was added: %q", args, r.Stdout)
		}
	}
}

// freshDatabase is the name and DSN of a database on e's server that does
// not exist yet (e's own name with suffix), dropped when the test ends.
func (e *env) freshDatabase(suffix string) (name, dsn string) {
	name = e.DBName + suffix
	e.T.Cleanup(func() { e.DB.Exec("DROP DATABASE IF EXISTS `" + name + "`") })
	return name, strings.Replace(e.DSN, "/"+e.DBName, "/"+name, 1)
}

// A file's entity syncs into a database migrated for it alone: no command
// of the file needs the memberships table.
func TestRunConfigOnlyWithoutMemberships(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 50, Seed: 2})
	db, dsn := e.freshDatabase("_members")
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
	e.MustRun("migrate", "--mysql-dsn", dsn, "--config", cfg)
	e.MustRun("run", "--mysql-dsn", dsn, "--config", cfg)
	var rows, builtin int
	err = e.DB.QueryRow("SELECT (SELECT COUNT(*) FROM `"+db+"`.members), (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'memberships')", db).Scan(&rows, &builtin)
	if err != nil || rows == 0 || builtin != 0 {
		t.Errorf("after run --config: %d rows in members, %d memberships tables (%v)", rows, builtin, err)
	}
}
