package e2e

import (
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

	"github.com/erpsync/erpsync/erpmock"
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

	m := erpmock.New(erpmock.Options{Records: 500, Seed: 41})
	erp := httptest.NewServer(m)
	t.Cleanup(erp.Close)
	var mu sync.Mutex
	ops := map[string]int{}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch []struct {
			Op string `json:"op"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &batch); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, e := range batch {
			ops[e.Op]++
		}
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	config := filepath.Join(t.TempDir(), "members.yaml")
	if err := os.WriteFile(config, []byte(`erp:
  kind: rest
  url: `+erp.URL+`
events:
  sink: webhook
  url: `+hook.URL+`
  unsigned: true
entities:
  - name: members
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
	env := []string{"ERPSYNC_POSTGRES_DSN=" + runtime, "ERPSYNC_CONFIG=" + config, "ERPSYNC_REDIS_ADDR=" + testenv.RedisAddr(),
		"ERPSYNC_LOCK_PREFIX=" + testenv.RandomName("grants:") + ":"}
	run := func(args ...string) string {
		t.Helper()
		r := erpsync(t, env, args...)
		if r.Code != 0 {
			t.Fatalf("%v as the runtime user: exit %d: %s", args, r.Code, r.Out())
		}
		return r.Stdout
	}

	if r := erpsync(t, env, "migrate"); r.Code == 0 {
		t.Fatalf("migrate as the runtime user: exit 0, want a refusal: %s", r.Out())
	}
	run("migrate", "--migrate-dsn", owner)
	run("run")
	m.Change(40)
	m.Delete(5)
	run("run")
	run("reconcile")
	if out := run("relay", "--once", "--http-addr", ""); !strings.HasPrefix(out, "relay: delivered ") || !strings.Contains(out, "none left pending") {
		t.Fatalf("relay --once: %q", out)
	}
	mu.Lock()
	got := fmt.Sprint(ops)
	enough := ops["insert"] == 500 && ops["update"] > 0 && ops["delete"] == 5
	mu.Unlock()
	if !enough {
		t.Fatalf("the webhook took %s: want 500 inserts, some updates and 5 deletes", got)
	}
	run("verify")
	for _, args := range [][]string{{"runs"}, {"events"}, {"state"}, {"state", "reset", "--yes"}, {"backfill", "--since", "2000-01-01T00:00:00Z"}, {"verify"}} {
		run(args...)
	}
	// Rows only: the owner's tables stay the owner's.
	db := testenv.SQLDB(t, runtime)
	for _, q := range []string{"DROP TABLE sync_runs", "ALTER TABLE members ADD COLUMN x int", "TRUNCATE members"} {
		if _, err := db.Exec(q); err == nil || !strings.Contains(err.Error(), "must be owner") && !strings.Contains(err.Error(), "denied") {
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
