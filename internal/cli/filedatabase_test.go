package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/secret"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// writeConfig writes a config file of the built-in memberships entity
// (examples/memberships.yaml) reading the ERP at erpURL, with block (a
// database: block, or "") before it, and returns its path.
func writeConfig(t *testing.T, block, erpURL string) string {
	t.Helper()
	b, err := os.ReadFile("../../examples/memberships.yaml")
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Replace(string(b), "url: http://127.0.0.1:8090", "url: "+erpURL, 1)
	path := filepath.Join(t.TempDir(), "erpsync.yaml")
	if err := os.WriteFile(path, []byte(block+body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// mainOut runs erpsync with args and returns its exit code, stdout and
// stderr.
func mainOut(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// memberships counts the rows of the memberships table of dsn.
func memberships(t *testing.T, dsn string) int {
	t.Helper()
	var n int
	if err := testenv.SQLDB(t, dsn).QueryRow("SELECT COUNT(*) FROM memberships").Scan(&n); err != nil {
		t.Fatalf("count memberships of %s: %v", testenv.DatabaseName(t, dsn), err)
	}
	return n
}

// TestFileDatabaseWhenNoDSNGiven: the file's database block sets the DSN
// of its kind when neither the command line nor the environment gives
// one; a DSN given, by flag, variable or -file, of either database, wins
// over the whole block (never "both given"). Not in parallel: t.Setenv.
func TestFileDatabaseWhenNoDSNGiven(t *testing.T) {
	const (
		filePG    = "postgres://app@db.internal:5432/erp?sslmode=verify-full"
		fileMySQL = "app@tcp(db.internal:3306)/erp"
		flagPG    = "postgres://flag@127.0.0.1:5432/flagdb"
		flagMySQL = "flag@tcp(127.0.0.1:3306)/flagdb"
	)
	dsnFile := filepath.Join(t.TempDir(), "dsn")
	if err := os.WriteFile(dsnFile, []byte(flagMySQL+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pg := "database:\n  kind: postgres\n  dsn: " + filePG + "\n"
	my := "database:\n  dsn: " + fileMySQL + "\n"
	for _, c := range []struct {
		name, block string
		args        []string
		env         map[string]string
		mysql, pg   string // the settings' DSNs after parse
	}{
		{name: "postgres from the file", block: pg, mysql: defaultMySQLDSN, pg: filePG},
		{name: "mysql from the file", block: my, mysql: fileMySQL},
		{name: "--mysql-dsn over kind postgres", block: pg, args: []string{"--mysql-dsn", flagMySQL}, mysql: flagMySQL},
		{name: "ERPSYNC_MYSQL_DSN over kind postgres", block: pg, env: map[string]string{"ERPSYNC_MYSQL_DSN": flagMySQL}, mysql: flagMySQL},
		{name: "ERPSYNC_MYSQL_DSN_FILE over kind postgres", block: pg, env: map[string]string{"ERPSYNC_MYSQL_DSN_FILE": dsnFile}, mysql: flagMySQL},
		{name: "--postgres-dsn over kind postgres", block: pg, args: []string{"--postgres-dsn", flagPG}, mysql: defaultMySQLDSN, pg: flagPG},
		{name: "--postgres-dsn over kind mysql", block: my, args: []string{"--postgres-dsn", flagPG}, mysql: defaultMySQLDSN, pg: flagPG},
		{name: "ERPSYNC_POSTGRES_DSN over kind mysql", block: my, env: map[string]string{"ERPSYNC_POSTGRES_DSN": flagPG}, mysql: defaultMySQLDSN, pg: flagPG},
		{name: "an empty variable is none given", block: pg, env: map[string]string{"ERPSYNC_MYSQL_DSN": ""}, pg: filePG},
		{name: "no block", args: []string{"--postgres-dsn", flagPG}, mysql: defaultMySQLDSN, pg: flagPG},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			var s settings
			fs := newFlagSet("erpsync run", &bytes.Buffer{})
			s.connFlags(fs)
			args := append([]string{"--config", writeConfig(t, c.block, "http://127.0.0.1:8090")}, c.args...)
			if err := s.parseEntities(fs, args); err != nil {
				t.Fatal(err)
			}
			if s.MySQLDSN != c.mysql || s.PostgresDSN != c.pg {
				t.Fatalf("--mysql-dsn %q, --postgres-dsn %q; want %q, %q", s.MySQLDSN, s.PostgresDSN, c.mysql, c.pg)
			}
			if _, _, err := s.database(); err != nil {
				t.Fatalf("database: %v", err)
			}
		})
	}
}

// TestFileDatabaseMigratesAndRunsOnPostgres: a file whose database block
// is kind: postgres, without a DSN flag, migrates and syncs into that
// PostgreSQL database; the same file with --mysql-dsn on the command line
// migrates and syncs into MySQL, and leaves PostgreSQL alone.
func TestFileDatabaseMigratesAndRunsOnPostgres(t *testing.T) {
	pgDSN, myDSN := testenv.PostgresDSN(t), testenv.MySQLDSN(t)
	srv := httptest.NewServer(erpmock.New(erpmock.Options{Records: 7, Seed: 3}))
	defer srv.Close()
	cfg := writeConfig(t, "database:\n  kind: postgres\n  dsn: "+pgDSN+"\n", srv.URL)
	prefix := "--lock-prefix=" + testenv.RandomName("erpsync:test:filedb:") + ":"

	if code, out, errb := mainOut("migrate", "--config", cfg, "--log-level", "error"); code != ExitOK || !strings.Contains(out, "database "+testenv.DatabaseName(t, pgDSN)+" at version") {
		t.Fatalf("migrate with the file's database: exit %d\n%s%s", code, out, errb)
	}
	if testenv.DatabaseExists(t, myDSN) {
		t.Fatal("migrate with kind: postgres created the MySQL database")
	}
	if code, out, errb := mainOut("run", "--config", cfg, prefix, "--log-level", "error"); code != ExitOK {
		t.Fatalf("run with the file's database: exit %d\n%s%s", code, out, errb)
	}
	if n := memberships(t, pgDSN); n != 7 {
		t.Fatalf("PostgreSQL holds %d memberships after the run, want 7", n)
	}
	// events reads the outbox of the file's database: the run recorded
	// none (the file turns no events on).
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"events", "--config", cfg}, "the outbox is empty\n"},
		{[]string{"events", "--config", cfg, "--entity", "memberships"}, "the outbox holds no events of memberships\n"},
	} {
		if code, out, errb := mainOut(c.args...); code != ExitOK || out != c.want {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q\nwant exit 0 and %q", c.args, code, out, errb, c.want)
		}
	}

	// --mysql-dsn wins over the whole block: MySQL, not PostgreSQL.
	if code, out, errb := mainOut("migrate", "--config", cfg, "--mysql-dsn", myDSN, "--log-level", "error"); code != ExitOK || !strings.Contains(out, "database "+testenv.DatabaseName(t, myDSN)+" at version") {
		t.Fatalf("migrate with --mysql-dsn over the file: exit %d\n%s%s", code, out, errb)
	}
	srv2 := httptest.NewServer(erpmock.New(erpmock.Options{Records: 4, Seed: 5}))
	defer srv2.Close()
	cfg2 := writeConfig(t, "database:\n  kind: postgres\n  dsn: "+pgDSN+"\n", srv2.URL)
	if code, out, errb := mainOut("run", "--config", cfg2, "--mysql-dsn", myDSN, prefix, "--log-level", "error"); code != ExitOK {
		t.Fatalf("run with --mysql-dsn over the file: exit %d\n%s%s", code, out, errb)
	}
	if n := memberships(t, myDSN); n != 4 {
		t.Fatalf("MySQL holds %d memberships after the run with --mysql-dsn, want 4", n)
	}
	if n := memberships(t, pgDSN); n != 7 {
		t.Fatalf("PostgreSQL holds %d memberships after the run with --mysql-dsn, want its 7", n)
	}
}

// TestFileDatabaseDSNFile: dsn_file is read like the erp block's
// password_file (trailing newline trimmed), and the DSN's password is
// masked in the output from then on; a dsn_file that cannot be read names
// the file's line.
func TestFileDatabaseDSNFile(t *testing.T) {
	const pw = "Dsn-file-pw-61"
	// PostgreSQL trusts root here: the password is carried, not checked.
	pgDSN := strings.Replace(testenv.PostgresDSN(t), "://root@", "://root:"+pw+"@", 1)
	if !strings.Contains(pgDSN, pw) {
		t.Fatalf("no password in %s", pgDSN)
	}
	secretPath := filepath.Join(t.TempDir(), "erpsync-dsn")
	if err := os.WriteFile(secretPath, []byte(pgDSN+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "database:\n  kind: postgres\n  dsn_file: "+secretPath+"\n", "http://127.0.0.1:8090")

	var s settings
	var errb bytes.Buffer
	fs := newFlagSet("erpsync runs", new(secret.Redactor).Writer(&errb))
	s.databaseFlags(fs)
	s.entityFlags(fs)
	if err := s.parseEntities(fs, []string{"--config", cfg}); err != nil {
		t.Fatal(err)
	}
	if s.PostgresDSN != pgDSN || s.dialect() != store.Postgres {
		t.Fatalf("--postgres-dsn %q, want the dsn_file's %q", s.PostgresDSN, pgDSN)
	}
	fs.Output().Write([]byte("password " + pw + "\n"))
	if got := errb.String(); got != "password ***\n" {
		t.Errorf("the redactor let the DSN's password through: %q", got)
	}

	code, out, stderr := mainOut("migrate", "--config", cfg, "--log-level", "debug")
	if code != ExitOK || !testenv.DatabaseExists(t, pgDSN) {
		t.Fatalf("migrate with a dsn_file: exit %d\n%s%s", code, out, stderr)
	}
	if strings.Contains(out+stderr, pw) {
		t.Errorf("the DSN's password is in the output:\n%s%s", out, stderr)
	}

	missing := writeConfig(t, "database:\n  kind: postgres\n  dsn_file: /nonexistent/erpsync-dsn\n", "http://127.0.0.1:8090")
	code, _, stderr = mainOut("runs", "--config", missing)
	if want := "erpsync: " + missing + ":3: database.dsn_file: secret: open /nonexistent/erpsync-dsn: no such file or directory\n"; code != ExitUsage || stderr != want {
		t.Errorf("a missing dsn_file: exit %d, %q\nwant exit 2, %q", code, stderr, want)
	}
}

// TestFileDatabaseWrongForm: a DSN of the other database's form in the
// database block is exit 2, one line naming the file's line and the form
// its kind wants, from every command that loads the file and from config
// check; nothing connects.
func TestFileDatabaseWrongForm(t *testing.T) {
	mysqlWanted := "that is a PostgreSQL DSN: kind: mysql wants MySQL's user:pass@tcp(host:port)/db form; for PostgreSQL give kind: postgres"
	pgWanted := "parse postgres dsn: want a postgres:// URL (postgres://user@host:5432/db?sslmode=disable) or a libpq key=value string (host=... dbname=...), not MySQL's user@tcp(host:port)/db form"
	for _, c := range []struct {
		name, block string
		line        int
		msg         string
	}{
		{"a URL under kind mysql", "database:\n  kind: mysql\n  dsn: postgres://app:Url-pw-77@db:5432/erp\n", 3, "database.dsn (kind: mysql): " + mysqlWanted},
		{"a postgresql URL without kind", "# the database\ndatabase:\n  dsn: postgresql://app@db/erp\n", 3, "database.dsn (kind: mysql): " + mysqlWanted},
		{"a key=value string under kind mysql", "database: {kind: mysql, dsn: \"host=db user=app password=Kv-pw-77 dbname=erp\"}\n", 1, "database.dsn (kind: mysql): " + mysqlWanted},
		{"a MySQL DSN under kind postgres", "database:\n  dsn: \"app:My-pw-77@tcp(db:3306)/erp\"\n  kind: postgres\n", 2, "database.dsn (kind: postgres): " + pgWanted},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := writeConfig(t, c.block, "http://127.0.0.1:8090")
			want := fmt.Sprintf("erpsync: %s:%d: %s\n", cfg, c.line, c.msg)
			for _, args := range [][]string{{"migrate"}, {"run"}, {"runs"}, {"relay", "--once"}, {"config", "check"}} {
				code, out, errb := mainOut(append(args, "--config", cfg)...)
				if code != ExitUsage || errb != want || out != "" {
					t.Errorf("%v: exit %d\nstdout %q\nstderr %q\nwant exit 2 and %q", args, code, out, errb, want)
				}
				if strings.Contains(errb, "-pw-77") {
					t.Errorf("%v: the DSN's password is in %q", args, errb)
				}
			}
		})
	}
}

// TestFileDatabaseEveryCommand: every command that loads the file opens
// the database its database block names (here a PostgreSQL database not
// yet created, which each names in its exit-2 line) and never the default
// --mysql-dsn; config check takes the block.
func TestFileDatabaseEveryCommand(t *testing.T) {
	pgDSN := testenv.PostgresDSN(t)
	name := testenv.DatabaseName(t, pgDSN)
	cfg := writeConfig(t, "database:\n  kind: postgres\n  dsn: "+pgDSN+"\nevents: {sink: webhook, url: \"http://127.0.0.1:1/hook\", unsigned: true}\n", "http://127.0.0.1:1")
	want := "erpsync: database \"" + name + "\" does not exist: run erpsync migrate\n"
	for _, args := range [][]string{
		{"run"}, {"backfill", "--since", "2025-01-01T00:00:00Z"}, {"schedule", "--every", "1m", "--http-addr", ""},
		{"verify"}, {"reconcile"}, {"runs"}, {"state"}, {"relay", "--once", "--http-addr", ""}, {"events"},
	} {
		code, out, errb := mainOut(append(args, "--config", cfg, "--log-level", "error")...)
		if code != ExitUsage || errb != want {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q\nwant exit 2 and %q", args, code, out, errb, want)
		}
	}
	if code, out, errb := mainOut("config", "check", "--config", cfg); code != ExitOK || !strings.HasPrefix(out, "memberships: table memberships") {
		t.Errorf("config check: exit %d\nstdout %q\nstderr %q", code, out, errb)
	}
	// A database that does not answer names the file's line, not a flag
	// the command was not given.
	down := writeConfig(t, "database:\n  kind: postgres\n  dsn: postgres://root@127.0.0.1:1/none\n", "http://127.0.0.1:1")
	code, _, errb := mainOut("runs", "--config", down)
	if want := "check the host and port of database.dsn (" + down + ":3)\n"; code != ExitUsage || !strings.HasSuffix(errb, want) {
		t.Errorf("runs on a database that does not answer: exit %d, %q; want exit 2 ending %q", code, errb, want)
	}
}
