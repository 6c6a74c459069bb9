package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/store"
)

// cloneDocument copies e deep enough to change its columns and its
// children's.
func cloneDocument(e *entity.Entity) *entity.Entity {
	c := clone(e)
	c.Children = make([]*entity.Child, len(e.Children))
	for i, ch := range e.Children {
		cc := *ch
		cc.Key = slices.Clone(ch.Key)
		cc.Columns = slices.Clone(ch.Columns)
		c.Children[i] = &cc
	}
	return c
}

// A child table is created with its entity's: the parent key columns
// (binary strings, as the parent's), the child's columns (its key strings
// binary), erp_version, and a UNIQUE index over both keys, no index on
// quarantined_at; migrate then lengthens, widens and adds to it as to an
// entity's table, and records the children in the definition.
func TestChildTablesAdditiveChanges(t *testing.T) {
	t.Parallel()
	s := setup(t)
	e := orders(t)
	p := migrateEntities(t, s, e)
	want := pick(s, []string{
		"CREATE TABLE IF NOT EXISTS `orders` (`company` VARCHAR(4) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL, `order_no` BIGINT NOT NULL, `status` VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL, `amount` DECIMAL(15,2) NULL, `erp_version` BIGINT NOT NULL, `erp_updated_at` DATETIME(3) NOT NULL, `fence_token` BIGINT NOT NULL, `created_at` DATETIME(3) NOT NULL, `updated_at` DATETIME(3) NOT NULL, `deleted_at` DATETIME(3) NULL, `quarantined_at` DATETIME(3) NULL, `quarantined_version` BIGINT NULL, `restore_count` BIGINT NULL, `quarantined_updated_at` DATETIME(3) NULL, UNIQUE KEY `uq_orders_company_order_no` (`company`, `order_no`), INDEX `ix_orders_quarantined` (`quarantined_at`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
		"CREATE TABLE IF NOT EXISTS `order_items` (`company` VARCHAR(4) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL, `order_no` BIGINT NOT NULL, `line_no` INT NOT NULL, `material` VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL, `quantity` DECIMAL(13,3) NOT NULL, `note` TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NULL, `erp_version` BIGINT NOT NULL, UNIQUE KEY `uq_order_items_company_order_no_line_no` (`company`, `order_no`, `line_no`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
		"CREATE TABLE IF NOT EXISTS `order_texts` (`company` VARCHAR(4) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL, `order_no` BIGINT NOT NULL, `lang` VARCHAR(2) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL, `kind` INT NOT NULL, `body` VARCHAR(80) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NULL, `erp_version` BIGINT NOT NULL, UNIQUE KEY `uq_order_texts_company_order_no_lang_kind` (`company`, `order_no`, `lang`, `kind`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
	}, []string{
		`CREATE TABLE IF NOT EXISTS "orders" ("company" varchar(4) COLLATE "C" NOT NULL, "order_no" bigint NOT NULL, "status" varchar(10) NOT NULL, "amount" numeric(15,2) NULL, "erp_version" bigint NOT NULL, "erp_updated_at" timestamptz(3) NOT NULL, "fence_token" bigint NOT NULL, "created_at" timestamptz(3) NOT NULL, "updated_at" timestamptz(3) NOT NULL, "deleted_at" timestamptz(3) NULL, "quarantined_at" timestamptz(3) NULL, "quarantined_version" bigint NULL, "restore_count" bigint NULL, "quarantined_updated_at" timestamptz(3) NULL, CONSTRAINT "uq_orders_company_order_no" UNIQUE ("company", "order_no"))`,
		`CREATE INDEX IF NOT EXISTS "ix_orders_quarantined" ON "orders" ("quarantined_at")`,
		`CREATE TABLE IF NOT EXISTS "order_items" ("company" varchar(4) COLLATE "C" NOT NULL, "order_no" bigint NOT NULL, "line_no" integer NOT NULL, "material" varchar(40) NOT NULL, "quantity" numeric(13,3) NOT NULL, "note" text NULL, "erp_version" bigint NOT NULL, CONSTRAINT "uq_order_items_company_order_no_line_no" UNIQUE ("company", "order_no", "line_no"))`,
		`CREATE TABLE IF NOT EXISTS "order_texts" ("company" varchar(4) COLLATE "C" NOT NULL, "order_no" bigint NOT NULL, "lang" varchar(2) COLLATE "C" NOT NULL, "kind" integer NOT NULL, "body" varchar(80) NULL, "erp_version" bigint NOT NULL, CONSTRAINT "uq_order_texts_company_order_no_lang_kind" UNIQUE ("company", "order_no", "lang", "kind"))`,
	})
	if !slices.Equal(p.Statements, want) {
		t.Fatalf("create:\n%s\nwant:\n%s", strings.Join(p.Statements, "\n"), strings.Join(want, "\n"))
	}
	migrateSteps(t, s, e, cloneDocument, []migrateStep{
		{"new nullable line column", func(e *entity.Entity) {
			e.Children[0].Columns = append(e.Children[0].Columns, entity.Column{Name: "plant", Type: typ(t, "string(4)"), Nullable: true})
		}, pick(s, []string{"ALTER TABLE `order_items` ADD COLUMN `plant` VARCHAR(4) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NULL"},
			[]string{`ALTER TABLE "order_items" ADD COLUMN "plant" varchar(4) NULL`})},
		{"longer line string and wider line decimal", func(e *entity.Entity) {
			e.Children[0].Columns[1].Type = typ(t, "string(60)")
			e.Children[0].Columns[2].Type = typ(t, "decimal(15,4)")
		}, pick(s, []string{"ALTER TABLE `order_items` MODIFY COLUMN `material` VARCHAR(60) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL, MODIFY COLUMN `quantity` DECIMAL(15,4) NOT NULL"},
			[]string{`ALTER TABLE "order_items" ALTER COLUMN "material" TYPE varchar(60), ALTER COLUMN "quantity" TYPE numeric(15,4)`})},
		{"longer parent key string: in every table", func(e *entity.Entity) { e.Columns[0].Type = typ(t, "string(6)") }, pick(s, []string{
			"ALTER TABLE `orders` MODIFY COLUMN `company` VARCHAR(6) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL",
			"ALTER TABLE `order_items` MODIFY COLUMN `company` VARCHAR(6) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL",
			"ALTER TABLE `order_texts` MODIFY COLUMN `company` VARCHAR(6) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL",
		}, []string{
			`ALTER TABLE "orders" ALTER COLUMN "company" TYPE varchar(6) COLLATE "C"`,
			`ALTER TABLE "order_items" ALTER COLUMN "company" TYPE varchar(6) COLLATE "C"`,
			`ALTER TABLE "order_texts" ALTER COLUMN "company" TYPE varchar(6) COLLATE "C"`,
		})},
		{"a new child", func(e *entity.Entity) {
			e.Children = append(e.Children, &entity.Child{Name: "notes", Key: []string{"seq"}, Columns: []entity.Column{{Name: "seq", Type: typ(t, "int32")}}})
		}, pick(s, []string{"CREATE TABLE IF NOT EXISTS `notes` (`company` VARCHAR(6) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL, `order_no` BIGINT NOT NULL, `seq` INT NOT NULL, `erp_version` BIGINT NOT NULL, UNIQUE KEY `uq_notes_company_order_no_seq` (`company`, `order_no`, `seq`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci"},
			[]string{`CREATE TABLE IF NOT EXISTS "notes" ("company" varchar(6) COLLATE "C" NOT NULL, "order_no" bigint NOT NULL, "seq" integer NOT NULL, "erp_version" bigint NOT NULL, CONSTRAINT "uq_notes_company_order_no_seq" UNIQUE ("company", "order_no", "seq"))`})},
	})
	var def string
	s.DB().Raw("SELECT definition FROM erpsync_entities WHERE name = 'orders'").Scan(&def)
	if !strings.Contains(def, `"children":[{"name":"items","table":"order_items","from":["Items"],"key":["line_no"],"columns":[{"name":"line_no","from":["line_no"],"type":"int32"}`) ||
		!strings.Contains(def, `{"name":"plant","type":"string(4)","nullable":true}`) || !strings.Contains(def, `{"name":"notes","table":"notes","key":["seq"]`) {
		t.Fatalf("recorded definition lacks the children: %s", def)
	}
}

// A change to a child table that could lose data is refused as one to an
// entity's table is, naming the child's table, and changes nothing; the
// check every command runs names a child table that does not match.
func TestChildTablesRefusedAndChecked(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	e := orders(t)
	migrateEntities(t, s, e)
	insertDocument(t, s, e)
	before := schemaOf(t, s, "order_items")
	for _, c := range []struct {
		name    string
		change  func(e *entity.Entity)
		subject string
	}{
		{"narrower line string", func(e *entity.Entity) { e.Children[0].Columns[1].Type = typ(t, "string(20)") }, "column material"},
		{"narrower line decimal", func(e *entity.Entity) { e.Children[0].Columns[2].Type = typ(t, "decimal(12,2)") }, "column quantity"},
		{"dropped line column", func(e *entity.Entity) { e.Children[0].Columns = e.Children[0].Columns[:3] }, "column note"},
		{"new not null line column on a table with rows", func(e *entity.Entity) {
			e.Children[0].Columns = append(e.Children[0].Columns, entity.Column{Name: "plant", Type: typ(t, "string(4)")})
		}, "column plant"},
		{"changed line key", func(e *entity.Entity) { e.Children[0].Key = []string{"line_no", "quantity"} }, "the key"},
	} {
		next := cloneDocument(e)
		c.change(next)
		_, err := s.PlanEntities(ctx, []*entity.Entity{next})
		var le *store.LossyChangeError
		if !errors.As(err, &le) || le.Table != "order_items" || le.Subject != c.subject {
			t.Fatalf("%s: %v, want a LossyChangeError of order_items, %s", c.name, err, c.subject)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s: a refusal of more than one line: %q", c.name, err)
		}
		err = s.CheckEntities(ctx, []*entity.Entity{next})
		var me *store.SchemaMismatchError
		if !errors.As(err, &me) || me.Table != "order_items" || !errors.Is(err, store.ErrNotMigrated) || !strings.HasSuffix(err.Error(), "; run erpsync migrate") {
			t.Fatalf("%s: check: %v, want a mismatch of order_items", c.name, err)
		}
	}
	if after := schemaOf(t, s, "order_items"); after != before {
		t.Fatalf("refused changes changed order_items:\n%s\n---\n%s", before, after)
	}
	gone := cloneDocument(e)
	gone.Children[1].Table = "order_texts2"
	if err := s.CheckEntities(ctx, []*entity.Entity{gone}); err == nil || err.Error() != "table order_texts2 does not exist; run erpsync migrate" {
		t.Fatalf("check of a child table not made: %v", err)
	}
}

// insertDocument writes one document of e, with one line of each child.
func insertDocument(t *testing.T, s *store.Store, e *entity.Entity) {
	t.Helper()
	tbl, err := store.Compile(e)
	if err != nil {
		t.Fatal(err)
	}
	r := store.Row{Key: "1000" + entity.KeySeparator + "1", Vals: []entity.Value{{S: "1000"}, {I: 1}, {S: "OPEN"}, {Null: true}}, Version: 1, Fence: 1,
		Children: []entity.Lines{{{{I: 10}, {S: "M"}, {S: "1.000"}, {Null: true}}}, {{{S: "de"}, {I: 0}, {S: "Text"}}}}}
	if err := s.For(tbl).InsertRows(context.Background(), []store.Row{r}); err != nil {
		t.Fatal(err)
	}
}

// A table made before restore_count (migration 008) and
// quarantined_updated_at (011) were erpsync's own columns fails the check
// every command runs, naming the first, and migrate adds them, nullable, to the
// table and keeps its rows; the check then lets commands through.
func TestMigrateAddsLateColumns(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	e := orders(t)
	migrateEntities(t, s, e)
	insertDocument(t, s, e)
	if err := s.DB().Exec("ALTER TABLE orders DROP COLUMN restore_count, DROP COLUMN quarantined_updated_at").Error; err != nil {
		t.Fatal(err)
	}
	err := s.CheckEntities(ctx, []*entity.Entity{e})
	if err == nil || !strings.Contains(err.Error(), "restore_count") {
		t.Fatalf("check of a table without restore_count and quarantined_updated_at: %v", err)
	}
	p := migrateEntities(t, s, e)
	if want := pick(s, []string{"ALTER TABLE `orders` ADD COLUMN `restore_count` BIGINT NULL, ADD COLUMN `quarantined_updated_at` DATETIME(3) NULL"},
		[]string{`ALTER TABLE "orders" ADD COLUMN "restore_count" bigint NULL, ADD COLUMN "quarantined_updated_at" timestamptz(3) NULL`}); !slices.Equal(p.Statements, want) {
		t.Fatalf("migrate planned %q, want %q", p.Statements, want)
	}
	var n int64
	if err := s.DB().Raw("SELECT COUNT(*) FROM orders WHERE restore_count IS NULL").Scan(&n).Error; err != nil || n == 0 {
		t.Fatalf("%d rows kept, %v", n, err)
	}
}
