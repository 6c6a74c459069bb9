package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// TestDocumentedPostgresGrants runs the least-privilege SQL of
// operations.md for PostgreSQL as the page prints it (its two roles and
// its database given names of the test's own), then migrate as the
// database's owner through --migrate-dsn, and every runtime command of an
// entity with change events as the runtime user. Every table exists only
// after the grants ran, so each is the runtime user's through the
// script's default privileges, as a table of an entity added later is.
func TestDocumentedPostgresGrants(t *testing.T) {
	t.Parallel()
	script := docSQL(t, filepath.Join("..", "..", "docs", "operations.md"), "### Least privilege on PostgreSQL")
	// The page names the runtime role and the database erpsync alike, and
	// the owner erpsync_admin: one name stands for the first two here.
	name, admin, pass := testenv.RandomName("erpsync_rt_"), testenv.RandomName("erpsync_adm_"), testenv.RandomName("pw")
	script = regexp.MustCompile(`\berpsync_admin\b`).ReplaceAllString(script, admin)
	script = regexp.MustCompile(`\berpsync\b`).ReplaceAllString(script, name)
	script = strings.ReplaceAll(script, "PASSWORD '...'", "PASSWORD '"+pass+"'")

	super := testenv.PostgresDSN(t) // a superuser's URL; its database is not made
	t.Cleanup(func() {
		testenv.ExecSQL(t, testenv.WithDatabase(t, super, "postgres"),
			fmt.Sprintf(`DROP DATABASE IF EXISTS "%s" WITH (FORCE)`, name),
			fmt.Sprintf(`DROP ROLE IF EXISTS "%s"`, admin), fmt.Sprintf(`DROP ROLE IF EXISTS "%s"`, name))
	})
	on := testenv.WithDatabase(t, super, "postgres")
	for _, step := range docSQLSteps(script) {
		if step.connect != "" {
			on = testenv.WithDatabase(t, super, step.connect)
			continue
		}
		testenv.ExecSQL(t, on, step.sql)
	}
	as := func(user string) string {
		u, err := url.Parse(testenv.WithDatabase(t, super, name))
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(user, pass)
		return u.String()
	}
	runtime, owner := as(name), as(admin)

	runtimeCommands(t, testenv.DSNEnv(runtime), runtime, owner, "members", "must be owner")
}

// TestDocumentedMySQLGrants runs the least-privilege SQL of security.md
// for MySQL as the page prints it (the test's own user and database; no
// REQUIRE SSL, which needs a server with TLS: TestSecureTransport has
// one), its memberships lines and those of a config file's entity and
// change events, on the tables migrate made as root, then every runtime
// command of that entity as the user.
func TestDocumentedMySQLGrants(t *testing.T) {
	t.Parallel()
	script := docSQL(t, filepath.Join("..", "..", "docs", "security.md"), "## Least privilege in MySQL")
	root := testenv.MySQLDSN(t)
	cfg, err := store.ParseDSN(root)
	if err != nil {
		t.Fatal(err)
	}
	db, user, pass := cfg.DBName, testenv.RandomName("erpsync_lp_"), testenv.RandomName("pw")
	script = strings.ReplaceAll(script, "'erpsync'@'%'", "'"+user+"'@'%'")
	script = strings.ReplaceAll(script, "erpsync.", "`"+db+"`.")
	script = strings.ReplaceAll(script, "IDENTIFIED BY '...'", "IDENTIFIED BY '"+pass+"'")
	script = strings.ReplaceAll(script, " REQUIRE SSL", "")
	admin := testenv.WithDatabase(t, root, "mysql")
	t.Cleanup(func() { testenv.ExecSQL(t, admin, fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", user)) })
	// The grants name tables: migrate makes them first, as root, the
	// built-in memberships' and the config file's.
	config := writeGrantsConfig(t, "customers")
	for _, env := range [][]string{{"ERPSYNC_MYSQL_DSN=" + root}, {"ERPSYNC_MYSQL_DSN=" + root, "ERPSYNC_CONFIG=" + config.path}} {
		if r := erpsync(t, env, "migrate"); r.Code != 0 {
			t.Fatalf("migrate as root: exit %d: %s", r.Code, r.Out())
		}
	}
	for _, step := range docSQLSteps(script) {
		testenv.ExecSQL(t, admin, step.sql)
	}
	rt := cfg.Clone()
	rt.User, rt.Passwd = user, pass
	runtimeCommandsWith(t, config, "ERPSYNC_MYSQL_DSN", rt.FormatDSN(), "denied")
}

// grantsConfig is the config file of the grants tests: an entity of the
// erpmock's memberships with change events to a webhook, and what the
// webhook took.
type grantsConfig struct {
	path, entity string
	m            *erpmock.Mock
	mu           sync.Mutex
	ops          map[string]int
}

// writeGrantsConfig starts an erpmock and a webhook and writes the config
// file of an entity named entity that reads the one and sends to the other.
func writeGrantsConfig(t *testing.T, entity string) *grantsConfig {
	t.Helper()
	c := &grantsConfig{entity: entity, m: erpmock.New(erpmock.Options{Records: 500, Seed: 41}), ops: map[string]int{}}
	erp := httptest.NewServer(c.m)
	t.Cleanup(erp.Close)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch []struct {
			Op string `json:"op"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &batch); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, e := range batch {
			c.ops[e.Op]++
		}
		c.mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	c.path = filepath.Join(t.TempDir(), entity+".yaml")
	if err := os.WriteFile(c.path, []byte(`erp:
  kind: rest
  url: `+erp.URL+`
events:
  sink: webhook
  url: `+hook.URL+`
  unsigned: true
entities:
  - name: `+entity+`
    source: /api/v1/memberships
    key: erp_id
    updated_at: updated_at
    version: version
    events: true
    columns:
      - {name: erp_id, type: string(16)}
      - {name: member, from: member_id, type: string(16)}
      - {name: status, type: string(16)}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// runtimeCommands is runtimeCommandsWith a config file of its own, whose
// tables migrate makes as owner.
func runtimeCommands(t *testing.T, dsnVar, runtime, owner, entity, refusal string) {
	t.Helper()
	c := writeGrantsConfig(t, entity)
	if r := erpsync(t, []string{dsnVar + "=" + runtime, "ERPSYNC_CONFIG=" + c.path}, "migrate"); r.Code == 0 {
		t.Fatalf("migrate as the runtime user: exit 0, want a refusal: %s", r.Out())
	}
	if r := erpsync(t, []string{dsnVar + "=" + runtime, "ERPSYNC_CONFIG=" + c.path}, "migrate", "--migrate-dsn", owner); r.Code != 0 {
		t.Fatalf("migrate with --migrate-dsn: exit %d: %s", r.Code, r.Out())
	}
	runtimeCommandsWith(t, c, dsnVar, runtime, refusal)
}

// runtimeCommandsWith runs every runtime command of c's entity as the
// user of runtime (its DSN in dsnVar), the ERP changing and deleting
// between them, and checks the webhook took every change; then that the
// user may not drop, alter or empty the tables (the database's refusal
// says refusal).
func runtimeCommandsWith(t *testing.T, c *grantsConfig, dsnVar, runtime, refusal string) {
	t.Helper()
	env := []string{dsnVar + "=" + runtime, "ERPSYNC_CONFIG=" + c.path, "ERPSYNC_REDIS_ADDR=" + testenv.RedisAddr(),
		"ERPSYNC_LOCK_PREFIX=" + testenv.RandomName("grants:") + ":"}
	run := func(args ...string) string {
		t.Helper()
		r := erpsync(t, env, args...)
		if r.Code != 0 {
			t.Fatalf("%v as the runtime user: exit %d: %s", args, r.Code, r.Out())
		}
		return r.Stdout
	}
	run("run")
	c.m.Change(40)
	c.m.Delete(5)
	run("run")
	run("reconcile")
	if out := run("relay", "--once", "--http-addr", ""); !strings.HasPrefix(out, "relay: delivered ") || !strings.Contains(out, "none left pending") {
		t.Fatalf("relay --once: %q", out)
	}
	c.mu.Lock()
	got := fmt.Sprint(c.ops)
	enough := c.ops["insert"] == 500 && c.ops["update"] > 0 && c.ops["delete"] == 5
	c.mu.Unlock()
	if !enough {
		t.Fatalf("the webhook took %s: want 500 inserts, some updates and 5 deletes", got)
	}
	for _, args := range [][]string{{"verify"}, {"runs"}, {"events"}, {"state"}, {"state", "reset", "--yes"}, {"backfill", "--since", "2000-01-01T00:00:00Z"}, {"verify"}} {
		run(args...)
	}
	// Rows only: the owner's tables stay the owner's.
	db := testenv.SQLDB(t, runtime)
	for _, q := range []string{"DROP TABLE sync_runs", "ALTER TABLE " + c.entity + " ADD COLUMN x int", "TRUNCATE " + c.entity} {
		if _, err := db.Exec(q); err == nil || !strings.Contains(err.Error(), refusal) && !strings.Contains(err.Error(), "denied") {
			t.Errorf("%s as the runtime user: %v, want a refusal", q, err)
		}
	}
}

// docSQL returns the text of the first ```sql block after the line
// heading in the Markdown file path.
func docSQL(t *testing.T, path, heading string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q", path, heading)
	}
	_, block, ok := strings.Cut(after, "```sql\n")
	if !ok {
		t.Fatalf("%s: no sql block after %q", path, heading)
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatalf("%s: the sql block after %q does not end", path, heading)
	}
	return block
}

// docSQLStep is a statement of a psql script, or its \c to a database.
type docSQLStep struct{ sql, connect string }

// docSQLSteps splits a psql script into its statements (comments left
// out) and \c lines.
func docSQLSteps(script string) []docSQLStep {
	var steps []docSQLStep
	var stmt strings.Builder
	for _, line := range strings.Split(script, "\n") {
		if db, ok := strings.CutPrefix(strings.TrimSpace(line), `\c `); ok {
			steps = append(steps, docSQLStep{connect: strings.TrimSpace(db)})
			continue
		}
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		stmt.WriteString(line + "\n")
		for {
			s := stmt.String()
			i := strings.Index(s, ";")
			if i < 0 {
				break
			}
			if q := strings.TrimSpace(s[:i]); q != "" {
				steps = append(steps, docSQLStep{sql: q})
			}
			stmt.Reset()
			stmt.WriteString(s[i+1:])
		}
	}
	return steps
}

// TestARelayDeniedStops: a relay whose user may read the outbox but not
// raise the relay's fence (no INSERT, UPDATE on erpsync_relay_fence) stops
// on the first mark the database refuses, exit 1 with the refusal, and
// leaves the events pending, instead of sending the same batch again at
// every retry.
func TestARelayDeniedStops(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 10, Seed: 3})
	c := writeGrantsConfig(t, "customers")
	root := []string{testenv.DSNEnv(e.DSN) + "=" + e.DSN, "ERPSYNC_CONFIG=" + c.path, "ERPSYNC_REDIS_ADDR=" + testenv.RedisAddr(),
		"ERPSYNC_LOCK_PREFIX=" + e.Prefix}
	for _, cmd := range []string{"migrate", "run"} {
		if r := erpsync(t, root, cmd); r.Code != 0 {
			t.Fatalf("%s as root: exit %d: %s", cmd, r.Code, r.Out())
		}
	}
	limited := e.runtimeUser(t)
	user := userOf(t, limited)
	grants := []string{fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE ON `%s`.erpsync_events TO '%s'@'%%'", e.DBName, user),
		fmt.Sprintf("GRANT SELECT ON `%s`.erpsync_relay_fence TO '%s'@'%%'", e.DBName, user)}
	if e.Postgres {
		grants = []string{fmt.Sprintf(`GRANT SELECT, INSERT, UPDATE, DELETE ON erpsync_events TO "%s"`, user),
			fmt.Sprintf(`GRANT SELECT ON erpsync_relay_fence TO "%s"`, user)}
	}
	testenv.ExecSQL(t, e.DSN, grants...)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := append(root[1:], testenv.DSNEnv(limited)+"="+limited)
	r := erpsyncCtx(ctx, t, env, "relay", "--http-addr", "", "--poll", "50ms", "--max-backoff", "200ms", "--batch-size", "100")
	out := r.Out()
	if ctx.Err() != nil || r.Code != 1 || !strings.Contains(out, "raise fence") {
		t.Fatalf("relay without the fence's privileges: exit %d (want 1 on the refusal, not retries for a minute):\n%s", r.Code, out)
	}
	if n := strings.Count(out, "delivery failed"); n > 0 {
		t.Errorf("the relay retried %d times after the refusal", n)
	}
	c.mu.Lock()
	delivered := c.ops["insert"]
	c.mu.Unlock()
	if delivered != 100 {
		t.Errorf("the webhook took %d events, want one batch, once: 100", delivered)
	}
}
