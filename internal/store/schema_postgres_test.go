package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// The tests of this file run on PostgreSQL whatever the matrix says
// (testenv.PostgresDSN); the tests of the other files run there with
// ERPSYNC_TEST_DB=postgres.

// pgStore migrates a fresh PostgreSQL database and opens it.
func pgStore(t *testing.T) (*store.Store, string) {
	t.Helper()
	return migratedStore(t, testenv.PostgresDSN(t))
}

// Two migrates at once on a database that does not exist: one creates it,
// each migration is applied once, and a third migrate applies nothing.
func TestPostgresMigrateAtOnceAndAgain(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresDSN(t)
	ctx := context.Background()
	results := make([]*store.MigrateResult, 2)
	errs := make([]error, 2)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			<-start
			results[i], errs[i] = store.Migrate(ctx, dsn)
		})
	}
	close(start)
	wg.Wait()
	created, applied := 0, map[int]int{}
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("migrate %d: %v", i, errs[i])
		}
		if res.CreatedDatabase {
			created++
		}
		for _, m := range res.Applied {
			applied[m.Version]++
		}
	}
	ms, err := store.MigrationsOf(store.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if created != 1 || len(applied) != len(ms) {
		t.Fatalf("created the database %d times, applied %v; want once, each of %d migrations", created, applied, len(ms))
	}
	for v, n := range applied {
		if n != 1 {
			t.Errorf("migration %d applied %d times", v, n)
		}
	}
	res, err := store.Migrate(ctx, dsn)
	if err != nil || len(res.Applied) != 0 || res.CreatedDatabase || res.Current != ms[len(ms)-1].Version {
		t.Fatalf("migrate again: %+v, %v; want nothing done", res, err)
	}
	s, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CheckSchema(ctx); err != nil {
		t.Fatalf("CheckSchema: %v", err)
	}
	// The same versions and names as MySQL's.
	my, _ := store.Migrations()
	var names []string
	if err := s.DB().Raw("SELECT name FROM schema_migrations ORDER BY version").Scan(&names).Error; err != nil {
		t.Fatal(err)
	}
	for i, m := range my {
		if i >= len(names) || names[i] != m.Name || ms[i].Version != m.Version {
			t.Fatalf("schema_migrations %q, want MySQL's %q", names, m.Name)
		}
	}
}

// A database migrated for a config file's entities alone gets no
// memberships table; migrated for memberships later, it gets the table
// with its index (a CREATE INDEX statement of its own on PostgreSQL).
func TestPostgresMigrateBuiltinLater(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresDSN(t)
	ctx := context.Background()
	if _, err := store.MigrateWith(ctx, dsn, nil, []*entity.Entity{customers(t)}); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n int
	s.DB().Raw("SELECT COUNT(*) FROM pg_class WHERE relname IN ('memberships', 'ix_memberships_quarantined')").Scan(&n)
	if n != 0 {
		t.Fatalf("memberships made for customers alone: %d relations", n)
	}
	res, err := store.MigrateWith(ctx, dsn, nil, []*entity.Entity{entity.Memberships()})
	if err != nil || len(res.Applied) != 0 {
		t.Fatalf("migrate for memberships: %+v, %v", res, err)
	}
	s.DB().Raw("SELECT COUNT(*) FROM pg_class WHERE relname IN ('memberships', 'ix_memberships_quarantined')").Scan(&n)
	if n != 2 {
		t.Fatalf("memberships and its index after a migrate for it: %d relations, want 2", n)
	}
	if err := s.CheckEntities(ctx, []*entity.Entity{entity.Memberships()}); err != nil {
		t.Fatalf("CheckEntities: %v", err)
	}
}

// additiveChangesPostgres is TestAdditiveChanges' PostgreSQL half: the
// statements are PostgreSQL's forms of MySQL's.
func additiveChangesPostgres(t *testing.T, s *store.Store) {
	e := customers(t)
	p := migrateEntities(t, s, e)
	want := []string{
		`CREATE TABLE IF NOT EXISTS "customers" ("company" varchar(4) COLLATE "C" NOT NULL, "customer" varchar(10) COLLATE "C" NOT NULL, "name" varchar(80) NOT NULL, "credit_limit" numeric(15,2) NULL, "blocked" boolean NOT NULL, "founded_on" date NULL, "rating" bigint NOT NULL, "seen_at" timestamptz(3) NULL, "notes" text NULL, "extra" text NULL, "visits" integer NOT NULL, "erp_version" bigint NOT NULL, "erp_updated_at" timestamptz(3) NOT NULL, "fence_token" bigint NOT NULL, "created_at" timestamptz(3) NOT NULL, "updated_at" timestamptz(3) NOT NULL, "deleted_at" timestamptz(3) NULL, "quarantined_at" timestamptz(3) NULL, "quarantined_version" bigint NULL, "restore_count" bigint NULL, "quarantined_updated_at" timestamptz(3) NULL, CONSTRAINT "uq_customers_company_customer" UNIQUE ("company", "customer"))`,
		`CREATE INDEX IF NOT EXISTS "ix_customers_quarantined" ON "customers" ("quarantined_at")`,
		`COMMENT ON COLUMN "customers"."extra" IS 'erpsync:json'`,
	}
	if !slices.Equal(p.Statements, want) {
		t.Fatalf("create: %q\nwant %q", p.Statements, want)
	}
	steps := []migrateStep{
		{"new nullable column", func(e *entity.Entity) {
			e.Columns = append(e.Columns, entity.Column{Name: "city", Type: typ(t, "string(40)"), Nullable: true})
		}, []string{`ALTER TABLE "customers" ADD COLUMN "city" varchar(40) NULL`}},
		{"longer string", func(e *entity.Entity) { e.Columns[2].Type = typ(t, "string(120)") },
			[]string{`ALTER TABLE "customers" ALTER COLUMN "name" TYPE varchar(120)`}},
		{"longer key string", func(e *entity.Entity) { e.Columns[1].Type = typ(t, "string(12)") },
			[]string{`ALTER TABLE "customers" ALTER COLUMN "customer" TYPE varchar(12) COLLATE "C"`}},
		{"wider decimal", func(e *entity.Entity) { e.Columns[3].Type = typ(t, "decimal(18,4)") },
			[]string{`ALTER TABLE "customers" ALTER COLUMN "credit_limit" TYPE numeric(18,4)`}},
		{"not null made nullable", func(e *entity.Entity) { e.Columns[4].Nullable = true },
			[]string{`ALTER TABLE "customers" ALTER COLUMN "blocked" DROP NOT NULL`}},
		{"new not null column on an empty table", func(e *entity.Entity) {
			e.Columns = append(e.Columns, entity.Column{Name: "region", Type: typ(t, "int32")})
		}, []string{`ALTER TABLE "customers" ADD COLUMN "region" integer NOT NULL`}},
		{"new json column", func(e *entity.Entity) {
			e.Columns = append(e.Columns, entity.Column{Name: "tags", Type: typ(t, "json"), Nullable: true})
		}, []string{`ALTER TABLE "customers" ADD COLUMN "tags" text NULL`, `COMMENT ON COLUMN "customers"."tags" IS 'erpsync:json'`}},
		{"two at once", func(e *entity.Entity) {
			e.Columns[2].Type = typ(t, "string(200)")
			e.Columns = append(e.Columns, entity.Column{Name: "zip", Type: typ(t, "string(10)"), Nullable: true})
		}, []string{`ALTER TABLE "customers" ALTER COLUMN "name" TYPE varchar(200), ADD COLUMN "zip" varchar(10) NULL`}},
	}
	migrateSteps(t, s, e, clone, steps)
	var def string
	s.DB().Raw("SELECT definition FROM erpsync_entities WHERE name = 'customers'").Scan(&def)
	if !strings.Contains(def, `{"name":"zip","type":"string(10)","nullable":true}`) || !strings.Contains(def, `"decimal(18,4)"`) {
		t.Fatalf("recorded definition is not the last one: %s", def)
	}
}

// A table is created, planned again to nothing, widened, and a lossy
// change refused, on PostgreSQL: a json column reads back as json, not as
// the text it is stored in; a key column made without COLLATE "C" is
// moved to it; a decimal key's scale changes only on a table without
// rows.
func TestPostgresEntityTable(t *testing.T) {
	t.Parallel()
	s, _ := pgStore(t)
	ctx := context.Background()
	e := customers(t)
	migrateEntities(t, s, e)
	insertCustomer(t, s, "1000", "C1")
	lossy := func(name string, change func(e *entity.Entity), want string) {
		t.Helper()
		f := clone(e)
		change(f)
		_, err := s.PlanEntities(ctx, []*entity.Entity{f})
		var le *store.LossyChangeError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: plan = %v, want a LossyChangeError with %q", name, err, want)
		}
	}
	lossy("json to text", func(e *entity.Entity) { e.Columns[9].Type = typ(t, "text") }, "column extra is text in the config file, json in the database")
	lossy("text to json", func(e *entity.Entity) { e.Columns[8].Type = typ(t, "json") }, "column notes is json in the config file, text in the database")
	lossy("narrower datetime", func(e *entity.Entity) { e.Columns[7].Type = typ(t, "datetime(0)") }, "fraction digits of a second past 0 would be cut")

	// A key column without the exact collation.
	if err := s.DB().Exec(`ALTER TABLE customers ALTER COLUMN customer TYPE varchar(10) COLLATE "default"`).Error; err != nil {
		t.Fatal(err)
	}
	err := s.CheckEntities(ctx, []*entity.Entity{e})
	if err == nil || !strings.Contains(err.Error(), "column customer is string(10) (collation C) in the config file, string(10) (collation ) in the database") {
		t.Fatalf("check of a key without COLLATE \"C\": %v", err)
	}
	p := migrateEntities(t, s, e)
	if !slices.Equal(p.Statements, []string{`ALTER TABLE "customers" ALTER COLUMN "customer" TYPE varchar(10) COLLATE "C"`}) {
		t.Fatalf("migrate of a loose key: %q", p.Statements)
	}

	// A decimal key.
	prices := &entity.Entity{Name: "prices", Key: []string{"amount"}, Columns: []entity.Column{
		{Name: "amount", Type: typ(t, "decimal(10,2)")},
		{Name: "label", Type: typ(t, "string(20)"), Nullable: true},
	}}
	migrateEntities(t, s, prices)
	wider := clone(prices)
	wider.Columns[0].Type = typ(t, "decimal(12,3)")
	p = migrateEntities(t, s, wider)
	if !slices.Equal(p.Statements, []string{`ALTER TABLE "prices" ALTER COLUMN "amount" TYPE numeric(12,3)`}) {
		t.Fatalf("scale of an empty table's key: %q", p.Statements)
	}
	if err := s.DB().Exec(`INSERT INTO prices (amount, erp_version, erp_updated_at, fence_token, created_at, updated_at) VALUES (1.5, 1, now(), 1, now(), now())`).Error; err != nil {
		t.Fatal(err)
	}
	widest := clone(wider)
	widest.Columns[0].Type = typ(t, "decimal(14,4)")
	_, err = s.PlanEntities(ctx, []*entity.Entity{widest})
	var le *store.LossyChangeError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "the key's text would change") {
		t.Fatalf("scale of a key with rows: %v, want refused", err)
	}
}

// An older fencing token is refused (ErrFenced) and moves nothing; an
// advance never moves a checkpoint back.
func TestPostgresCheckpointFence(t *testing.T) {
	t.Parallel()
	s, _ := pgStore(t)
	ctx := context.Background()
	t0 := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	if err := s.SaveCheckpoint(ctx, "j", t0, 200, "r2"); err != nil {
		t.Fatal(err)
	}
	err := s.SaveCheckpoint(ctx, "j", t0.Add(time.Hour), 199, "r1")
	if !errors.Is(err, store.ErrFenced) || !strings.Contains(err.Error(), "(ours 199, stored 200)") {
		t.Fatalf("older token: %v, want ErrFenced", err)
	}
	if cp, _, _ := s.Checkpoint(ctx, "j"); !cp.Position.Equal(t0) || cp.Fence != 200 || cp.RunID != "r2" {
		t.Fatalf("an older token moved the checkpoint: %+v", cp)
	}
	if err := s.SaveCheckpoint(ctx, "j", t0.Add(2*time.Hour), 200, "r3"); err != nil {
		t.Fatalf("the same token: %v", err)
	}
	for _, pos := range []time.Time{t0.Add(5 * time.Hour), t0.Add(time.Hour)} {
		if err := s.AdvanceCheckpoint(ctx, "shared", pos, "a"); err != nil {
			t.Fatal(err)
		}
	}
	if cp, _, _ := s.Checkpoint(ctx, "shared"); !cp.Position.Equal(t0.Add(5 * time.Hour)) {
		t.Fatalf("advance moved back: %+v", cp)
	}
}

// migrate --plan on a PostgreSQL database that does not exist: every
// migration pending, memberships as they make it, a new entity's table
// created; the database is not created.
func TestPostgresPlanNewDatabase(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresDSN(t)
	ctx := context.Background()
	if _, err := store.Open(ctx, dsn, nil); !errors.Is(err, store.ErrNoDatabase) {
		t.Fatalf("open before: %v, want ErrNoDatabase", err)
	}
	p, err := store.PlanNewDatabase(ctx, dsn, nil, []*entity.Entity{entity.Memberships(), customers(t)})
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := store.MigrationsOf(store.Postgres)
	if len(p.Pending) != len(ms) || len(p.Statements) != 3 || !strings.HasPrefix(p.Statements[0], `CREATE TABLE IF NOT EXISTS "customers" (`) {
		t.Fatalf("plan: %d pending, statements %q", len(p.Pending), p.Statements)
	}
	if !strings.Contains(p.Pending[0].SQL, `erp_id         varchar(64) COLLATE "C" NOT NULL`) {
		t.Fatalf("pending 001 is not PostgreSQL's:\n%s", p.Pending[0].SQL)
	}
	if got := store.CreateDatabaseSQLFor(store.Postgres, "erp"); got != `CREATE DATABASE "erp" ENCODING 'UTF8' TEMPLATE template0` {
		t.Fatalf("create database: %s", got)
	}
	if _, err := store.Open(ctx, dsn, nil); !errors.Is(err, store.ErrNoDatabase) {
		t.Fatalf("open after the plan: %v, want ErrNoDatabase still", err)
	}
}

// Options.IdleTxTimeout is every session's
// idle_in_transaction_session_timeout unless the DSN gives its own, and a
// transaction left idle past it is ended by the server.
func TestPostgresIdleTxTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, dsn := pgStore(t)
	// Each option sets its own setting, and a setting the DSN gives wins.
	show := func(dsn string, idle, lock time.Duration) (idleGot, lockGot string) {
		t.Helper()
		s, err := store.Open(ctx, dsn, &store.Options{IdleTxTimeout: idle, LockTimeout: lock})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.DB().Raw("SELECT current_setting('idle_in_transaction_session_timeout'), current_setting('lock_timeout')").Row().Scan(&idleGot, &lockGot); err != nil {
			t.Fatal(err)
		}
		return idleGot, lockGot
	}
	for _, c := range []struct {
		dsn              string
		idle, lock       time.Duration
		wantIdle, wantLk string
	}{
		{dsn, 12 * time.Second, 24 * time.Second, "12s", "24s"},
		{dsn, 1500 * time.Millisecond, 0, "1500ms", "0"},
		{dsn + "&idle_in_transaction_session_timeout=5000", 12 * time.Second, 0, "5s", "0"},
		{dsn + "&idle_in_transaction_session_timeout=0&lock_timeout=7000", 12 * time.Second, 24 * time.Second, "0", "7s"},
	} {
		if idle, lock := show(c.dsn, c.idle, c.lock); idle != c.wantIdle || lock != c.wantLk {
			t.Errorf("IdleTxTimeout %s, LockTimeout %s, DSN %s: the session's timeouts are %s and %s, want %s and %s", c.idle, c.lock, c.dsn, idle, lock, c.wantIdle, c.wantLk)
		}
	}

	s, err := store.Open(ctx, dsn, &store.Options{IdleTxTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	idleTxEnded(t, s)
}

// Options.LockTimeout bounds a write's wait behind a session that holds
// the row's lock while active in a statement (here pg_sleep; a process
// paused in the middle of a COPY looks the same to the server), which the
// idle timeout does not end: the write fails with lock_not_available,
// where without it, it would wait for the holder, then insert.
func TestPostgresLockTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	holder, dsn := pgStore(t)
	db, err := holder.DB().DB()
	if err != nil {
		t.Fatal(err)
	}
	hctx, stop := context.WithCancel(ctx)
	held := make(chan error, 1)
	inserted := make(chan struct{})
	go func() {
		tx, err := db.BeginTx(hctx, nil)
		if err == nil {
			defer tx.Rollback()
			_, err = tx.ExecContext(hctx, "INSERT INTO memberships (erp_id, member_id, product_code, status, starts_at, erp_version, erp_updated_at, fence_token, created_at, updated_at) VALUES ('busy', 'u', 'p', 'ACTIVE', now(), 1, now(), 1, now(), now())")
		}
		close(inserted)
		if err == nil {
			_, err = tx.ExecContext(hctx, "SELECT pg_sleep(120)")
		}
		held <- err
	}()
	defer func() {
		stop()
		<-held
	}()
	<-inserted

	s, err := store.Open(ctx, dsn, &store.Options{IdleTxTimeout: time.Second, LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Wait until the holder's statement is running, so that the row's lock
	// is held by an active session.
	for {
		var n int
		if err := s.DB().Raw("SELECT COUNT(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'SELECT pg_sleep(120)%'").Row().Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		select {
		case err := <-held:
			t.Fatalf("the holder ended before it slept: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	err = s.DB().Exec("INSERT INTO memberships (erp_id, member_id, product_code, status, starts_at, erp_version, erp_updated_at, fence_token, created_at, updated_at) VALUES ('busy', 'w', 'p', 'ACTIVE', now(), 2, now(), 2, now(), now()) ON CONFLICT (erp_id) DO NOTHING").Error
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
		t.Fatalf("the write behind an active holder: %v, want lock_not_available (55P03)", err)
	}
}
