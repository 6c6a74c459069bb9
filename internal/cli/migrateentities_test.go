package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// migrate and migrate --plan on the built-in entity: the plan of a
// database not yet migrated is the migrations' statements, one a line;
// after migrate it is the one line that says nothing is left. Not in
// parallel: Main sets go-sql-driver's logger, a global.
func TestMigratePlan(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.DSN(t)
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(ctx, append([]string{"migrate", testenv.DSNFlag(dsn), dsn, "--log-level", "error"}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	// No database: CREATE DATABASE, then what an empty one would get.
	code, noDB, errb := run("--plan")
	if code != ExitOK || errb != "" {
		t.Fatalf("--plan without a database: exit %d, %q, %q", code, noDB, errb)
	}
	// An empty database: the plan is every migration's statements.
	testenv.CreateDatabase(t, dsn)
	code, out, errb := run("--plan")
	if want := store.CreateDatabaseSQLFor(store.DialectOf(dsn), testenv.DatabaseName(t, dsn)) + ";\n" + out; noDB != want {
		t.Errorf("--plan without a database:\n%s\nwant CREATE DATABASE and the plan of an empty one:\n%s", noDB, want)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != ExitOK || !strings.HasPrefix(lines[0], "CREATE TABLE IF NOT EXISTS memberships (") || strings.Count(out, "CREATE TABLE IF NOT EXISTS memberships") != 1 {
		t.Fatalf("--plan on an empty database: exit %d\n%s%s", code, out, errb)
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, ";") {
			t.Errorf("plan line %q does not end in ;", l)
		}
	}
	if code, out, errb := run(); code != ExitOK || !strings.Contains(out, "entities memberships: the tables already match their declarations") {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, errb)
	}
	if code, out, _ := run("--plan"); code != ExitOK || out != nothingToMigrate+"\n" {
		t.Fatalf("--plan after migrate: exit %d, %q", code, out)
	}
	// A column wider in the database than in the file: refused, exit 2,
	// one line, by --plan and by migrate alike.
	st, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	widen := "ALTER TABLE memberships MODIFY member_id VARCHAR(128) NOT NULL"
	if st.Dialect() == store.Postgres {
		widen = "ALTER TABLE memberships ALTER COLUMN member_id TYPE varchar(128)"
	}
	if err := st.DB().Exec(widen).Error; err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--plan"}, {}} {
		code, out, errb := run(args...)
		want := "erpsync: table memberships: column member_id is string(64) in the config file, string(128) in the database: values longer than 64 characters would be cut;"
		if code != ExitUsage || !strings.HasPrefix(errb, want) || strings.Count(errb, "\n") != 1 || strings.Contains(out, "statement") {
			t.Errorf("migrate %v over a narrowing: exit %d\nstdout %q\nstderr %q", args, code, out, errb)
		}
	}
}

// migrateEntities with an entity of its own: the plan prints its CREATE
// TABLE, the apply runs it, and the plan after says nothing is left.
func TestMigrateEntities(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _ := testenv.MigratedStore(t)
	e := &entity.Entity{Name: "customers", Key: []string{"customer"}, UpdatedAt: []string{"changed"},
		Columns: []entity.Column{{Name: "customer", Type: entity.Type{Kind: entity.String, Length: 10}}}}
	ents := []*entity.Entity{entity.Memberships(), e}
	var out bytes.Buffer
	create, statements := "CREATE TABLE IF NOT EXISTS `customers` (", "1 statement"
	if st.Dialect() == store.Postgres {
		// The index on quarantined_at is a statement of its own there.
		create, statements = `CREATE TABLE IF NOT EXISTS "customers" (`, "2 statements"
	}
	if err := migrateEntities(ctx, st, ents, true, &out); err != nil || !strings.HasPrefix(out.String(), create) || strings.Count(out.String(), "\n") != len(statements[:1]) && st.Dialect() == store.MySQL {
		t.Fatalf("plan: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := migrateEntities(ctx, st, ents, false, &out); err != nil || !strings.HasSuffix(out.String(), "entities memberships, customers: "+statements+" applied; the tables match their declarations now\n") {
		t.Fatalf("apply: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := migrateEntities(ctx, st, ents, true, &out); err != nil || out.String() != nothingToMigrate+"\n" {
		t.Fatalf("plan after apply: %v\n%s", err, out.String())
	}
	if err := st.CheckEntities(ctx, ents); err != nil {
		t.Fatal(err)
	}
}

// A command that opens the store refuses a table unlike its entity in one
// line, exit 2, before it reads or writes. Not in parallel: Main.
func TestCommandsCheckEntities(t *testing.T) {
	ctx := context.Background()
	st, dsn := testenv.MigratedStore(t)
	run := func() (int, string) {
		var out, errb bytes.Buffer
		code := Main(ctx, []string{"state", testenv.DSNFlag(dsn), dsn, "--log-level", "error"}, &out, &errb)
		return code, errb.String()
	}
	if code, errb := run(); code != ExitOK {
		t.Fatalf("state on a migrated database: exit %d: %s", code, errb)
	}
	narrow := "ALTER TABLE memberships MODIFY product_code VARCHAR(16) NOT NULL"
	if st.Dialect() == store.Postgres {
		narrow = "ALTER TABLE memberships ALTER COLUMN product_code TYPE varchar(16)"
	}
	if err := st.DB().Exec(narrow).Error; err != nil {
		t.Fatal(err)
	}
	want := "erpsync: table memberships: column product_code is string(32) in the config file, string(16) in the database; run erpsync migrate\n"
	if code, errb := run(); code != ExitUsage || errb != want {
		t.Fatalf("state over a changed table: exit %d\n%q\nwant %q", code, errb, want)
	}
}
