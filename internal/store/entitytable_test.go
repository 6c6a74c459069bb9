package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

func typ(t testing.TB, s string) entity.Type {
	t.Helper()
	ty, err := entity.ParseType(s)
	if err != nil {
		t.Fatal(err)
	}
	return ty
}

// customers is the entity of the spec's example file.
func customers(t testing.TB) *entity.Entity {
	col := func(name, ty string, nullable bool) entity.Column {
		return entity.Column{Name: name, From: []string{name}, Type: typ(t, ty), Nullable: nullable}
	}
	return &entity.Entity{
		Name: "customers", Key: []string{"company", "customer"},
		UpdatedAt: []string{"LastChangeDateTime"}, Version: []string{"ChangeCounter"},
		Columns: []entity.Column{
			col("company", "string(4)", false),
			col("customer", "string(10)", false),
			col("name", "string(80)", false),
			col("credit_limit", "decimal(15,2)", true),
			col("blocked", "bool", false),
			col("founded_on", "date", true),
			col("rating", "int64", false),
			col("seen_at", "datetime", true),
			col("notes", "text", true),
			col("extra", "json", true),
			col("visits", "int32", false),
		},
	}
}

// clone copies e deep enough to change its columns.
func clone(e *entity.Entity) *entity.Entity {
	c := *e
	c.Key = slices.Clone(e.Key)
	c.Columns = slices.Clone(e.Columns)
	return &c
}

// schemaOf is what the database holds of table (its columns, their types,
// its indexes) and of every entity's recorded definition: what a refused
// migrate must leave as it was.
func schemaOf(t testing.TB, s *store.Store, table string) string {
	t.Helper()
	lines := func(query string, args ...any) []string {
		var out []string
		if err := s.DB().Raw(query, args...).Scan(&out).Error; err != nil {
			t.Fatal(err)
		}
		return out
	}
	if s.Dialect() == store.Postgres {
		out := lines(`SELECT concat_ws(' ', c.column_name, format_type(a.atttypid, a.atttypmod), c.is_nullable, COALESCE(c.collation_name, '-'), COALESCE(col_description(a.attrelid, a.attnum), '-'))
FROM information_schema.columns c JOIN pg_attribute a ON a.attrelid = format('%I.%I', c.table_schema, c.table_name)::regclass AND a.attnum = c.ordinal_position
WHERE c.table_schema = current_schema() AND c.table_name = ? ORDER BY c.ordinal_position`, table)
		out = append(out, lines(`SELECT concat_ws(' ', 'index', indexname, indexdef) FROM pg_indexes WHERE schemaname = current_schema() AND tablename = ? ORDER BY indexname`, table)...)
		out = append(out, lines("SELECT concat_ws(' ', 'recorded', name, table_name, definition, applied_at) FROM erpsync_entities ORDER BY name")...)
		return strings.Join(out, "\n")
	}
	out := lines(`SELECT CONCAT_WS(' ', COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COALESCE(COLLATION_NAME, '-'))
FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, table)
	out = append(out, lines(`SELECT CONCAT_WS(' ', 'index', INDEX_NAME, NON_UNIQUE, SEQ_IN_INDEX, COLUMN_NAME)
FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY INDEX_NAME, SEQ_IN_INDEX`, table)...)
	out = append(out, lines("SELECT CONCAT_WS(' ', 'recorded', name, table_name, definition, applied_at) FROM erpsync_entities ORDER BY name")...)
	return strings.Join(out, "\n")
}

func migrateEntities(t testing.TB, s *store.Store, ents ...*entity.Entity) *store.EntityPlan {
	t.Helper()
	ctx := context.Background()
	p, err := s.PlanEntities(ctx, ents)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	applied, err := s.ApplyEntities(ctx, p)
	if err != nil {
		t.Fatalf("apply %q: %v", p.Statements, err)
	}
	assertMatches(t, s, ents...)
	return applied
}

// assertMatches checks that the tables match ents: nothing left to plan,
// and CheckEntities lets a command through.
func assertMatches(t testing.TB, s *store.Store, ents ...*entity.Entity) {
	t.Helper()
	ctx := context.Background()
	again, err := s.PlanEntities(ctx, ents)
	if err != nil || !again.Empty() {
		t.Fatalf("plan after apply: %q, %v; want nothing", again.Statements, err)
	}
	if err := s.CheckEntities(ctx, ents); err != nil {
		t.Fatalf("CheckEntities after apply: %v", err)
	}
}

// The built-in entity against the table the migrations made plans
// nothing, and a check lets it through.
func TestMembershipsPlansNothing(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	p, err := s.PlanEntities(ctx, []*entity.Entity{entity.Memberships()})
	if err != nil || !p.Empty() {
		t.Fatalf("plan of memberships: %q, pending %v, %v; want nothing", p.Statements, p.Pending, err)
	}
	before := schemaOf(t, s, "memberships")
	migrateEntities(t, s, entity.Memberships())
	after := schemaOf(t, s, "memberships")
	if !strings.Contains(after, `recorded memberships memberships {"name":"memberships"`) {
		t.Fatalf("definition not recorded:\n%s", after)
	}
	if tableOnly(before) != tableOnly(after) {
		t.Fatalf("apply of an empty plan changed memberships:\n%s\n---\n%s", before, after)
	}
}

func tableOnly(schema string) string {
	lines := strings.Split(schema, "\n")
	return strings.Join(slices.DeleteFunc(lines, func(l string) bool { return strings.HasPrefix(l, "recorded ") }), "\n")
}

// A table CREATEd from the built-in entity has the columns, types and
// indexes of the memberships table the migrations made.
func TestCreatedMembershipsIsTheShippedTable(t *testing.T) {
	t.Parallel()
	s := setup(t)
	twin := entity.Memberships()
	twin.Name, twin.Table = "twin", "memberships_twin"
	p := migrateEntities(t, s, twin)
	want := 1 // PostgreSQL: and the index, a statement of its own
	if s.Dialect() == store.Postgres {
		want = 2
	}
	if len(p.Statements) != want || !strings.HasPrefix(p.Statements[0], "CREATE TABLE") {
		t.Fatalf("plan of a new table: %q", p.Statements)
	}
	shipped := tableOnly(schemaOf(t, s, "memberships"))
	created := strings.ReplaceAll(tableOnly(schemaOf(t, s, "memberships_twin")), "memberships_twin", "memberships")
	if shipped != created {
		t.Fatalf("shipped memberships:\n%s\ncreated from the entity:\n%s", shipped, created)
	}
	if s.Dialect() == store.Postgres {
		return // no engine, no table collation
	}
	var shippedOpts, createdOpts string
	q := "SELECT CONCAT_WS(' ', ENGINE, TABLE_COLLATION) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?"
	s.DB().Raw(q, "memberships").Scan(&shippedOpts)
	s.DB().Raw(q, "memberships_twin").Scan(&createdOpts)
	if shippedOpts != createdOpts || shippedOpts != "InnoDB utf8mb4_unicode_ci" {
		t.Fatalf("table options: shipped %q, created %q", shippedOpts, createdOpts)
	}
}

// A migrate before the numbered migrations ran plans them, and plans
// nothing for memberships, which they make.
func TestPlanBeforeMigrations(t *testing.T) {
	t.Parallel()
	s := emptyDatabase(t)
	ctx := context.Background()
	p, err := s.PlanEntities(ctx, []*entity.Entity{entity.Memberships(), customers(t)})
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := store.Migrations()
	create, n := "CREATE TABLE IF NOT EXISTS `customers`", 1
	if s.Dialect() == store.Postgres {
		create, n = `CREATE TABLE IF NOT EXISTS "customers"`, 3 // and its index, its json column's comment
	}
	if len(p.Pending) != len(ms) || len(p.Statements) != n || !strings.HasPrefix(p.Statements[0], create) {
		t.Fatalf("plan on an empty database: pending %d, statements %q", len(p.Pending), p.Statements)
	}
	if _, err := s.ApplyEntities(ctx, p); !errors.Is(err, store.ErrNotMigrated) {
		t.Fatalf("apply before the migrations: %v, want ErrNotMigrated", err)
	}
}

// Each additive change plans the statement it needs, and after it the
// table matches the file.
func TestAdditiveChanges(t *testing.T) {
	t.Parallel()
	s := setup(t)
	if s.Dialect() == store.Postgres {
		additiveChangesPostgres(t, s)
		return
	}
	e := customers(t)
	p := migrateEntities(t, s, e)
	want := "CREATE TABLE IF NOT EXISTS `customers` (`company` VARCHAR(4) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL, `customer` VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL, `name` VARCHAR(80) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL, `credit_limit` DECIMAL(15,2) NULL,"
	if len(p.Statements) != 1 || !strings.HasPrefix(p.Statements[0], want) ||
		!strings.HasSuffix(p.Statements[0], "UNIQUE KEY `uq_customers_company_customer` (`company`, `customer`), INDEX `ix_customers_quarantined` (`quarantined_at`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci") {
		t.Fatalf("create: %q", p.Statements)
	}
	steps := []migrateStep{
		{"new nullable column", func(e *entity.Entity) {
			e.Columns = append(e.Columns, entity.Column{Name: "city", Type: typ(t, "string(40)"), Nullable: true})
		}, []string{"ALTER TABLE `customers` ADD COLUMN `city` VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NULL"}},
		{"longer string", func(e *entity.Entity) { e.Columns[2].Type = typ(t, "string(120)") },
			[]string{"ALTER TABLE `customers` MODIFY COLUMN `name` VARCHAR(120) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL"}},
		{"longer key string", func(e *entity.Entity) { e.Columns[1].Type = typ(t, "string(12)") },
			[]string{"ALTER TABLE `customers` MODIFY COLUMN `customer` VARCHAR(12) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL"}},
		{"wider decimal", func(e *entity.Entity) { e.Columns[3].Type = typ(t, "decimal(18,4)") },
			[]string{"ALTER TABLE `customers` MODIFY COLUMN `credit_limit` DECIMAL(18,4) NULL"}},
		{"not null made nullable", func(e *entity.Entity) { e.Columns[4].Nullable = true },
			[]string{"ALTER TABLE `customers` MODIFY COLUMN `blocked` BOOLEAN NULL"}},
		{"new not null column on an empty table", func(e *entity.Entity) {
			e.Columns = append(e.Columns, entity.Column{Name: "region", Type: typ(t, "int32")})
		}, []string{"ALTER TABLE `customers` ADD COLUMN `region` INT NULL", "ALTER TABLE `customers` MODIFY COLUMN `region` INT NOT NULL"}},
		{"two at once", func(e *entity.Entity) {
			e.Columns[2].Type = typ(t, "string(200)")
			e.Columns = append(e.Columns, entity.Column{Name: "zip", Type: typ(t, "string(10)"), Nullable: true})
		}, []string{"ALTER TABLE `customers` MODIFY COLUMN `name` VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL, ADD COLUMN `zip` VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NULL"}},
	}
	migrateSteps(t, s, e, clone, steps)
	var def string
	s.DB().Raw("SELECT definition FROM erpsync_entities WHERE name = 'customers'").Scan(&def)
	if !strings.Contains(def, `{"name":"zip","type":"string(10)","nullable":true}`) || !strings.Contains(def, `"decimal(18,4)"`) {
		t.Fatalf("recorded definition is not the last one: %s", def)
	}
}

// migrateStep is a change to an entity and the statements migrate must
// run for it.
type migrateStep struct {
	name   string
	change func(e *entity.Entity)
	want   []string
}

// migrateSteps applies each step's change to a copy of the last entity
// (made by clone) and migrates it, and fails t unless migrate ran the
// step's statements.
func migrateSteps(t *testing.T, s *store.Store, e *entity.Entity, clone func(*entity.Entity) *entity.Entity, steps []migrateStep) {
	t.Helper()
	for _, st := range steps {
		e = clone(e)
		st.change(e)
		p := migrateEntities(t, s, e)
		if !slices.Equal(p.Statements, st.want) {
			t.Fatalf("%s: ran %q, want %q", st.name, p.Statements, st.want)
		}
	}
}

// insertCustomer writes a row of customers by hand.
func insertCustomer(t testing.TB, s *store.Store, company, customer string) {
	t.Helper()
	query := `INSERT INTO customers (company, customer, name, credit_limit, blocked, rating, visits,
 erp_version, erp_updated_at, fence_token, created_at, updated_at)
 VALUES (?, ?, 'Name', 1234.50, 0, 1, 2, 1, UTC_TIMESTAMP(3), 1, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))`
	if s.Dialect() == store.Postgres {
		query = `INSERT INTO customers (company, customer, name, credit_limit, blocked, rating, visits,
 erp_version, erp_updated_at, fence_token, created_at, updated_at)
 VALUES (?, ?, 'Name', 1234.50, false, 1, 2, 1, now(), 1, now(), now())`
	}
	err := s.DB().Exec(query, company, customer).Error
	if err != nil {
		t.Fatal(err)
	}
}

// Each change that could lose data is refused with one line that names
// the table and the column, and changes nothing: not the table, not the
// recorded definition.
func TestLossyChangesRefused(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	base := customers(t)
	migrateEntities(t, s, base)
	insertCustomer(t, s, "1000", "C1")
	cases := []struct {
		name   string
		change func(e *entity.Entity)
		want   string
	}{
		{"dropped column", func(e *entity.Entity) { e.Columns = slices.Delete(e.Columns, 5, 6) },
			"table customers: column founded_on is absent in the config file, date nullable in the database: dropping it would lose its values; declare it again (nullable: true), or drop it by hand (ALTER TABLE customers DROP COLUMN founded_on) and run erpsync migrate again"},
		{"narrower string", func(e *entity.Entity) { e.Columns[2].Type = typ(t, "string(40)") },
			"table customers: column name is string(40) in the config file, string(80) in the database: values longer than 40 characters would be cut; migrate only lengthens strings and widens decimals: declare string(80) again, or change the column by hand and run erpsync migrate again"},
		{"narrower key string", func(e *entity.Entity) { e.Columns[0].Type = typ(t, "string(3)") }, "column company is string(3) in the config file, string(4) in the database: values longer than 3 characters"},
		{"smaller scale", func(e *entity.Entity) { e.Columns[3].Type = typ(t, "decimal(15,1)") }, "column credit_limit is decimal(15,1) in the config file, decimal(15,2) in the database: digits past 1 decimal places would be rounded away"},
		{"fewer integer digits", func(e *entity.Entity) { e.Columns[3].Type = typ(t, "decimal(16,4)") }, "column credit_limit is decimal(16,4) in the config file, decimal(15,2) in the database: values of more than 12 integer digits would not fit"},
		{"changed type", func(e *entity.Entity) { e.Columns[6].Type = typ(t, "int32") }, "column rating is int32 in the config file, int64 in the database: values would be converted"},
		{"int32 to string", func(e *entity.Entity) { e.Columns[10].Type = typ(t, "string(20)") }, "column visits is string(20) in the config file, int32 in the database"},
		{"nullable made not null", func(e *entity.Entity) { e.Columns[3].Nullable = false }, "column credit_limit is decimal(15,2) not null in the config file, decimal(15,2) nullable in the database: rows that hold NULL there would have no value"},
		{"changed key", func(e *entity.Entity) { e.Key = []string{"customer"} }, "table customers: the key is (customer) in the config file, (company, customer) in the database"},
		{"key reordered", func(e *entity.Entity) { e.Key = []string{"customer", "company"} }, "the key is (customer, company) in the config file, (company, customer) in the database"},
		{"new not null column on a table with rows", func(e *entity.Entity) {
			e.Columns = append(e.Columns, entity.Column{Name: "region", Type: typ(t, "int32")})
		}, "table customers: column region is int32 not null in the config file, absent in the database: the rows the table has would have no value there; declare it nullable: true"},
		{"an additive change beside a lossy one", func(e *entity.Entity) {
			e.Columns = append(e.Columns, entity.Column{Name: "city", Type: typ(t, "string(40)"), Nullable: true})
			e.Columns[2].Type = typ(t, "string(10)")
		}, "column name is string(10)"},
	}
	before := schemaOf(t, s, "customers")
	for _, c := range cases {
		e := clone(base)
		c.change(e)
		_, err := s.PlanEntities(ctx, []*entity.Entity{e})
		var le *store.LossyChangeError
		if !errors.As(err, &le) || le.Table != "customers" || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: plan = %v, want a one-line LossyChangeError with %q", c.name, err, c.want)
		}
		// Apply plans again under the lock and refuses the same.
		if _, err := s.ApplyEntities(ctx, &store.EntityPlan{Entities: []*entity.Entity{e}}); !errors.As(err, &le) {
			t.Errorf("%s: apply = %v, want a LossyChangeError", c.name, err)
		}
		if after := schemaOf(t, s, "customers"); after != before {
			t.Fatalf("%s: a refused change changed the schema:\n%s\n---\n%s", c.name, before, after)
		}
	}
	// A table made by hand, without erpsync's own columns, is refused too.
	foreign := "CREATE TABLE foreign_things (id VARCHAR(10) NOT NULL, UNIQUE KEY (id))"
	if s.Dialect() == store.Postgres {
		foreign = "CREATE TABLE foreign_things (id varchar(10) NOT NULL UNIQUE)"
	}
	if err := s.DB().Exec(foreign).Error; err != nil {
		t.Fatal(err)
	}
	e := &entity.Entity{Name: "things", Table: "foreign_things", Key: []string{"id"}, Columns: []entity.Column{{Name: "id", Type: typ(t, "string(10)")}}}
	_, err := s.PlanEntities(ctx, []*entity.Entity{e})
	if err == nil || !strings.Contains(err.Error(), "table foreign_things: column erp_version is int64 not null in the config file, absent in the database: erpsync keeps its bookkeeping there") {
		t.Errorf("a table made by hand: %v", err)
	}
}

// A plan made while the table was empty adds a NOT NULL column; a row
// written before the plan is applied stops it, since the apply plans
// again under the lock.
func TestApplyPlansAgain(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	migrateEntities(t, s, customers(t))
	e := customers(t)
	e.Columns = append(e.Columns, entity.Column{Name: "region", Type: typ(t, "int32")})
	p, err := s.PlanEntities(ctx, []*entity.Entity{e})
	want := 2 // added NULL, then made NOT NULL
	if s.Dialect() == store.Postgres {
		want = 1 // PostgreSQL refuses a NOT NULL column on a table with rows itself
	}
	if err != nil || len(p.Statements) != want {
		t.Fatalf("plan on an empty table: %q, %v", p.Statements, err)
	}
	insertCustomer(t, s, "1000", "C1")
	before := schemaOf(t, s, "customers")
	var le *store.LossyChangeError
	if _, err := s.ApplyEntities(ctx, p); !errors.As(err, &le) || le.Subject != "column region" {
		t.Fatalf("apply after a row arrived: %v, want a LossyChangeError", err)
	}
	if after := schemaOf(t, s, "customers"); after != before {
		t.Fatalf("the refused apply changed the schema:\n%s\n---\n%s", before, after)
	}
}

// CheckEntities names the table and the column that differ.
func TestCheckEntitiesMismatch(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	e := customers(t)
	err := s.CheckEntities(ctx, []*entity.Entity{entity.Memberships(), e})
	var me *store.SchemaMismatchError
	if !errors.As(err, &me) || err.Error() != "table customers does not exist; run erpsync migrate" || !errors.Is(err, store.ErrNotMigrated) {
		t.Fatalf("check before migrate: %v", err)
	}
	narrow := clone(e)
	narrow.Columns[3].Type = typ(t, "decimal(12,2)")
	migrateEntities(t, s, narrow)
	cases := []struct {
		change func(e *entity.Entity)
		want   string
	}{
		{func(*entity.Entity) {}, "table customers: column credit_limit is decimal(15,2) in the config file, decimal(12,2) in the database; run erpsync migrate"},
		{func(e *entity.Entity) { e.Columns[3].Type = typ(t, "decimal(12,2)"); e.Columns[4].Nullable = true },
			"table customers: column blocked is bool nullable in the config file, bool not null in the database; run erpsync migrate"},
		{func(e *entity.Entity) {
			e.Columns[3].Type = typ(t, "decimal(12,2)")
			e.Columns = append(e.Columns, entity.Column{Name: "city", Type: typ(t, "string(40)"), Nullable: true})
		}, "table customers: column city is string(40) nullable in the config file, absent in the database; run erpsync migrate"},
		{func(e *entity.Entity) {
			e.Columns[3].Type = typ(t, "decimal(12,2)")
			e.Columns = e.Columns[:len(e.Columns)-1]
		},
			"table customers: column visits is absent in the config file, int32 not null in the database; run erpsync migrate"},
		{func(e *entity.Entity) { e.Columns[3].Type = typ(t, "decimal(12,2)"); e.Key = e.Key[1:] },
			"table customers: the key is (customer) in the config file, (company, customer) in the database; run erpsync migrate"},
	}
	for _, c := range cases {
		f := clone(e)
		c.change(f)
		err := s.CheckEntities(ctx, []*entity.Entity{entity.Memberships(), f})
		if !errors.As(err, &me) || err.Error() != c.want {
			t.Errorf("check = %v\nwant %s", err, c.want)
		}
	}
	drop, add := "ALTER TABLE customers DROP INDEX ix_customers_quarantined", "ALTER TABLE `customers` ADD INDEX `ix_customers_quarantined` (`quarantined_at`)"
	if s.Dialect() == store.Postgres {
		drop, add = "DROP INDEX ix_customers_quarantined", `CREATE INDEX IF NOT EXISTS "ix_customers_quarantined" ON "customers" ("quarantined_at")`
	}
	if err := s.DB().Exec(drop).Error; err != nil {
		t.Fatal(err)
	}
	err = s.CheckEntities(ctx, []*entity.Entity{narrow})
	if err == nil || err.Error() != "table customers: the index on quarantined_at is declared in the config file, absent in the database; run erpsync migrate" {
		t.Errorf("check without the quarantine index: %v", err)
	}
	p := migrateEntities(t, s, narrow)
	if !slices.Equal(p.Statements, []string{add}) {
		t.Errorf("migrate of a missing index: %q", p.Statements)
	}
}

// Instances migrating the same entities at once, each through its own
// connections: every one succeeds, each statement runs once, and the
// tables and records end as one migrate makes them.
func TestApplyEntitiesConcurrently(t *testing.T) {
	t.Parallel()
	_, dsn := testenv.MigratedStore(t)
	ctx := context.Background()
	for round, change := range []func(e *entity.Entity){
		func(*entity.Entity) {},
		func(e *entity.Entity) {
			e.Columns[2].Type = typ(t, "string(100)")
			e.Columns = append(e.Columns, entity.Column{Name: "city", Type: typ(t, "string(40)"), Nullable: true})
		},
	} {
		a, b := customers(t), customers(t)
		b.Name, b.Table = "suppliers", "suppliers"
		change(a)
		change(b)
		const instances = 6
		ran := make([]int, instances)
		errs := make([]error, instances)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range instances {
			wg.Go(func() {
				s, err := store.Open(ctx, dsn, nil)
				if err != nil {
					errs[i] = err
					return
				}
				defer s.Close()
				<-start
				p, err := s.PlanEntities(ctx, []*entity.Entity{a, b})
				if err != nil {
					errs[i] = err
					return
				}
				applied, err := s.ApplyEntities(ctx, p)
				if err != nil {
					errs[i] = err
					return
				}
				ran[i] = len(applied.Statements)
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		total := 0
		for _, n := range ran {
			total += n
		}
		want := 2 // one a table
		if testenv.Postgres() && round == 0 {
			want = 6 // a table, its index, its json column's comment
		}
		if total != want {
			t.Fatalf("round %d: %d statements run in all (%v), want %d", round, total, ran, want)
		}
		s, err := store.Open(ctx, dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		assertMatches(t, s, a, b)
		var n int64
		s.DB().Raw("SELECT COUNT(*) FROM erpsync_entities").Scan(&n)
		s.Close()
		if n != 2 {
			t.Fatalf("round %d: %d recorded entities, want 2", round, n)
		}
	}
}

func ExampleLossyChangeError() {
	err := &store.LossyChangeError{Table: "customers", Subject: "column name", File: "string(40)", Database: "string(80)",
		Loss: "values longer than 40 characters would be cut", Fix: "declare string(80) again"}
	fmt.Println(err)
	// Output: table customers: column name is string(40) in the config file, string(80) in the database: values longer than 40 characters would be cut; declare string(80) again
}
