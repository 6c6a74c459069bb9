package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/erpsync/erpsync/internal/cli"
	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// erpsync runs the erpsync binary with args and an environment of no
// ERPSYNC_ setting but env (KEY=VALUE): what the command line and env
// alone give it.
func erpsync(t *testing.T, env []string, args ...string) proctest.Result {
	t.Helper()
	return erpsyncCtx(context.Background(), t, env, args...)
}

// erpsyncCtx is erpsync killed when ctx ends (exit code -1).
func erpsyncCtx(ctx context.Context, t *testing.T, env []string, args ...string) proctest.Result {
	t.Helper()
	c := exec.CommandContext(ctx, bin, args...)
	c.Env = append(append(cli.EnvWithoutSettings(), "ERPSYNC_LOG_FORMAT=json", "ERPSYNC_LOG_LEVEL=warn"), env...)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("erpsync %v: %v", args, err)
	}
	return proctest.Result{Code: code, Stdout: stdout.String(), Stderr: stderr.String()}
}

// closedPort is a 127.0.0.1 address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Giving both databases' DSNs, by flags or variables in any mix, is exit
// 2 and one line that names both, for every command that opens the
// database, before anything connects.
func TestBothDatabasesGivenIsOneLineExit2(t *testing.T) {
	t.Parallel()
	const my, pg = "root@tcp(127.0.0.1:3306)/erpsync_both", "postgres://root@127.0.0.1:5432/erpsync_both"
	dsnFile := filepath.Join(t.TempDir(), "dsn")
	if err := os.WriteFile(dsnFile, []byte(my+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	givens := []struct {
		name string
		env  []string
		args []string
	}{
		{"flags", nil, []string{"--mysql-dsn", my, "--postgres-dsn", pg}},
		{"variables", []string{"ERPSYNC_MYSQL_DSN=" + my, "ERPSYNC_POSTGRES_DSN=" + pg}, nil},
		{"mysql flag, postgres variable", []string{"ERPSYNC_POSTGRES_DSN=" + pg}, []string{"--mysql-dsn", my}},
		{"mysql variable, postgres flag", []string{"ERPSYNC_MYSQL_DSN=" + my}, []string{"--postgres-dsn", pg}},
		{"mysql file, postgres variable", []string{"ERPSYNC_POSTGRES_DSN=" + pg}, []string{"--mysql-dsn-file", dsnFile}},
	}
	commands := [][]string{{"migrate"}, {"run"}, {"backfill", "--since", "2025-01-01T00:00:00Z"}, {"schedule"}, {"verify"},
		{"reconcile"}, {"runs"}, {"state"}, {"relay", "--once"}, {"events"}}
	for _, g := range givens {
		for _, cmd := range commands {
			r := erpsync(t, g.env, append(slices.Clone(cmd), g.args...)...)
			lines := proctest.Lines(r.Stderr)
			if r.Code != 2 || len(lines) != 1 || !strings.HasPrefix(lines[0], "erpsync: --mysql-dsn") ||
				!strings.Contains(lines[0], " and --postgres-dsn") || !strings.Contains(lines[0], "both given: want one") {
				t.Errorf("%s, %v: exit %d, stderr %q; want exit 2 and one line naming --mysql-dsn and --postgres-dsn", g.name, cmd, r.Code, r.Stderr)
			}
		}
	}
	// Where a DSN came from is named: a variable by its name.
	r := erpsync(t, []string{"ERPSYNC_MYSQL_DSN=" + my, "ERPSYNC_POSTGRES_DSN=" + pg}, "run")
	if want := "erpsync: --mysql-dsn (from ERPSYNC_MYSQL_DSN) and --postgres-dsn (from ERPSYNC_POSTGRES_DSN) both given"; !strings.HasPrefix(r.Stderr, want) {
		t.Errorf("stderr %q, want it to start %q", r.Stderr, want)
	}
}

// A DSN of one database's form given to the other's flag is exit 2 and
// one line that says which form, or which flag, is wanted; its password
// is not in it.
func TestADSNOfTheOtherDatabaseSaysWhichIsWanted(t *testing.T) {
	t.Parallel()
	const pw = "Wrong-form-pw-31"
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"mysql form to --postgres-dsn", nil, []string{"run", "--postgres-dsn", "root:" + pw + "@tcp(127.0.0.1:5432)/erpsync"},
			"erpsync: --postgres-dsn: parse postgres dsn: want a postgres:// URL (postgres://user@host:5432/db?sslmode=disable) or a libpq key=value string (host=... dbname=...), not MySQL's user@tcp(host:port)/db form"},
		{"mysql form to ERPSYNC_POSTGRES_DSN", []string{"ERPSYNC_POSTGRES_DSN=root:" + pw + "@tcp(127.0.0.1:5432)/erpsync"}, []string{"migrate"},
			"erpsync: --postgres-dsn: parse postgres dsn: want a postgres:// URL"},
		{"postgres URL to --mysql-dsn", nil, []string{"run", "--mysql-dsn", "postgres://root:" + pw + "@127.0.0.1:5432/erpsync"},
			"erpsync: --mysql-dsn: that is a PostgreSQL DSN: give it as --postgres-dsn (ERPSYNC_POSTGRES_DSN)"},
		{"postgres key=value to ERPSYNC_MYSQL_DSN", []string{"ERPSYNC_MYSQL_DSN=host=127.0.0.1 user=root password=" + pw + " dbname=erpsync"}, []string{"migrate"},
			"erpsync: --mysql-dsn: that is a PostgreSQL DSN: give it as --postgres-dsn (ERPSYNC_POSTGRES_DSN)"},
		{"postgres URL to --migrate-dsn on MySQL", nil, []string{"migrate", "--mysql-dsn", "root@tcp(127.0.0.1:3306)/erpsync", "--migrate-dsn", "postgres://root:" + pw + "@127.0.0.1:5432/erpsync"},
			"erpsync: --migrate-dsn: that is a PostgreSQL DSN, and the database is MySQL's (--mysql-dsn): give --postgres-dsn too, or a MySQL DSN"},
		{"mysql form to --migrate-dsn on PostgreSQL", nil, []string{"migrate", "--postgres-dsn", "postgres://root@127.0.0.1:5432/erpsync", "--migrate-dsn", "root:" + pw + "@tcp(127.0.0.1:3306)/erpsync"},
			"erpsync: --migrate-dsn: parse postgres dsn: want a postgres:// URL"},
		{"mysql TLS files with --postgres-dsn", nil, []string{"runs", "--postgres-dsn", "postgres://root@127.0.0.1:5432/erpsync", "--mysql-tls-ca", "/nonexistent/ca.pem"},
			"erpsync: --mysql-tls-* are MySQL's: with --postgres-dsn give TLS in the DSN (sslmode=verify-full&sslrootcert="},
	}
	for _, c := range cases {
		r := erpsync(t, c.env, c.args...)
		lines := proctest.Lines(r.Stderr)
		if r.Code != 2 || len(lines) != 1 || !strings.HasPrefix(lines[0], c.want) {
			t.Errorf("%s: exit %d, stderr %q;\nwant exit 2 and one line starting %q", c.name, r.Code, r.Stderr, c.want)
		}
		if strings.Contains(r.Out(), pw) {
			t.Errorf("%s: the DSN's password is in the output: %q", c.name, r.Out())
		}
	}
}

// A PostgreSQL that does not answer at start is exit 2 and one line that
// says where and what happened, as for MySQL.
func TestAnUnreachablePostgresIsOneLineExit2(t *testing.T) {
	t.Parallel()
	closed := closedPort(t)
	dsn := "postgres://root@" + closed + "/erpsync?sslmode=disable"
	want := "erpsync: postgresql at " + closed + ": connection refused: nothing listens there; check the host and port of "
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"run", "--postgres-dsn", dsn}, "--postgres-dsn"},
		{[]string{"runs", "--postgres-dsn", dsn}, "--postgres-dsn"},
		{[]string{"events", "--postgres-dsn", dsn}, "--postgres-dsn"},
		{[]string{"migrate", "--postgres-dsn", dsn}, "--postgres-dsn"},
		{[]string{"migrate", "--postgres-dsn", "postgres://root@127.0.0.1:5432/erpsync", "--migrate-dsn", dsn}, "--migrate-dsn"},
		// --migrate-dsn alone names the database by its form.
		{[]string{"migrate", "--migrate-dsn", dsn}, "--migrate-dsn"},
	} {
		// An empty ERPSYNC_MYSQL_DSN is none given.
		r := erpsync(t, []string{"ERPSYNC_MYSQL_DSN="}, c.args...)
		lines := proctest.Lines(r.Stderr)
		if r.Code != 2 || len(lines) != 1 || lines[0] != want+c.flag {
			t.Errorf("%v: exit %d, stderr %q;\nwant exit 2 and the one line %q", c.args, r.Code, r.Stderr, want+c.flag)
		}
	}
	// A database that does not exist yet: run migrate.
	fresh := testenv.PostgresDSN(t)
	r := erpsync(t, nil, "runs", "--postgres-dsn", fresh)
	if lines := proctest.Lines(r.Stderr); r.Code != 2 || len(lines) != 1 || !strings.HasSuffix(lines[0], "does not exist: run erpsync migrate") {
		t.Errorf("runs on a database not yet made: exit %d, stderr %q", r.Code, r.Stderr)
	}
}

// A PostgreSQL DSN's password is masked in every line erpsync writes,
// whichever form and source the DSN has: a bad value of another setting
// that is the password (parse quotes it) reaches stderr as ***.
func TestThePostgresPasswordIsNeverInTheOutput(t *testing.T) {
	t.Parallel()
	const pw = "Pg-Secret-pw-77"
	closed := closedPort(t)
	host, port, _ := net.SplitHostPort(closed)
	url := "postgres://root:" + pw + "@" + closed + "/erpsync?sslmode=disable"
	keyValue := "host=" + host + " port=" + port + " user=root password=" + pw + " dbname=erpsync sslmode=disable"
	dsnFile := filepath.Join(t.TempDir(), "dsn")
	if err := os.WriteFile(dsnFile, []byte(url+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		env  []string
		args []string
	}{
		{"URL flag", nil, []string{"run", "--postgres-dsn", url}},
		{"key=value flag", nil, []string{"run", "--postgres-dsn", keyValue}},
		{"URL variable", []string{"ERPSYNC_POSTGRES_DSN=" + url}, []string{"verify"}},
		{"key=value variable", []string{"ERPSYNC_POSTGRES_DSN=" + keyValue}, []string{"state"}},
		{"file", nil, []string{"reconcile", "--postgres-dsn-file", dsnFile}},
		{"migrate-dsn", nil, []string{"migrate", "--postgres-dsn", "postgres://root@" + closed + "/erpsync", "--migrate-dsn", keyValue}},
	} {
		// The bad value: one line, exit 2, the password masked (migrate
		// has no Redis setting to give it).
		if c.args[0] != "migrate" {
			r := erpsync(t, append(slices.Clone(c.env), "ERPSYNC_REDIS_DB="+pw), c.args...)
			if r.Code != 2 || strings.Contains(r.Out(), pw) || !strings.Contains(r.Stderr, "--redis-db *** (from ERPSYNC_REDIS_DB)") {
				t.Errorf("%s, a bad value that is the password: exit %d, output %q; want exit 2 and the password masked", c.name, r.Code, r.Out())
			}
		}
		// The unreachable database, its debug log included.
		r := erpsync(t, append(slices.Clone(c.env), "ERPSYNC_LOG_LEVEL=debug"), c.args...)
		if r.Code != 2 || strings.Contains(r.Out(), pw) || !strings.Contains(r.Stderr, "postgresql at "+closed+": connection refused") {
			t.Errorf("%s, unreachable: exit %d, output %q; want exit 2, the refused line and no password", c.name, r.Code, r.Out())
		}
	}
}

// migrate --postgres-dsn creates the database and every table on
// PostgreSQL; a second migrate changes nothing, --plan then has nothing to
// do, and the commands that read the database open it.
func TestMigrateOnPostgres(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresDSN(t)
	cfg, err := store.ParsePostgresDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}

	// Before the database exists, --plan prints PostgreSQL's statements
	// and creates nothing.
	r := erpsync(t, nil, "migrate", "--plan", "--postgres-dsn", dsn)
	lines := proctest.Lines(r.Stdout)
	if r.Code != 0 || len(lines) < 2 || !strings.HasPrefix(lines[0], "CREATE DATABASE ") || !strings.Contains(lines[0], `"`+cfg.Database+`"`) ||
		strings.Contains(r.Stdout, "`") || strings.Contains(r.Stdout, "utf8mb4") {
		t.Errorf("migrate --plan on a fresh PostgreSQL install: exit %d, want PostgreSQL's CREATE DATABASE, then the tables:\n%s", r.Code, r.Out())
	}
	admin, err := sql.Open("pgx", strings.Replace(dsn, "/"+cfg.Database+"?", "/postgres?", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var n int
	if err := admin.QueryRow("SELECT COUNT(*) FROM pg_database WHERE datname = $1", cfg.Database).Scan(&n); err != nil || n != 0 {
		t.Fatalf("migrate --plan made the database (%d, %v)", n, err)
	}

	r = erpsync(t, nil, "migrate", "--postgres-dsn", dsn)
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "database "+cfg.Database+" at version ") {
		t.Fatalf("migrate --postgres-dsn: exit %d:\n%s", r.Code, r.Out())
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var list string
	if err := db.QueryRow("SELECT COALESCE(string_agg(table_name, ' '), '') FROM information_schema.tables WHERE table_schema = current_schema()").Scan(&list); err != nil {
		t.Fatal(err)
	}
	tables := strings.Fields(list)
	for _, want := range append([]string{store.MembershipsTable}, entity.OwnTables...) {
		if !slices.Contains(tables, want) {
			t.Errorf("after migrate the database has %v, want %s among them", tables, want)
		}
	}

	for _, args := range [][]string{{"migrate"}, {"runs"}, {"state"}, {"events"}} {
		if r := erpsync(t, []string{"ERPSYNC_POSTGRES_DSN=" + dsn}, args...); r.Code != 0 {
			t.Errorf("%v after migrate: exit %d:\n%s", args, r.Code, r.Out())
		}
	}
	r = erpsync(t, nil, "migrate", "--plan", "--postgres-dsn", dsn)
	if r.Code != 0 || r.Stdout != "nothing to migrate: the database matches\n" {
		t.Errorf("migrate --plan after migrate: exit %d:\n%s", r.Code, r.Out())
	}
}
