package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/store"
)

// codes is an entity with a string key, its change events recorded, and
// a child whose lines have a string key of their own.
func codes(t testing.TB) *entity.Entity {
	return &entity.Entity{Name: "codes", Key: []string{"code"}, UpdatedAt: []string{"u"}, Events: true,
		Columns:  []entity.Column{{Name: "code", Type: typ(t, "string(8)")}, {Name: "label", Type: typ(t, "string(8)")}},
		Children: []*entity.Child{{Name: "code_parts", Key: []string{"part"}, Columns: []entity.Column{{Name: "part", Type: typ(t, "string(8)")}}}},
	}
}

// TestKeysCompareExactly: "A", "a" and "A " (a trailing space) are three
// rows, each with its own lines, and three change events; memberships
// and the outbox too. utf8mb4_bin, a PAD SPACE collation, made "A " a
// duplicate of "A".
func TestKeysCompareExactly(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	e := codes(t)
	migrateEntities(t, s, e)
	tab, err := store.Compile(e)
	if err != nil {
		t.Fatal(err)
	}
	st := s.For(tab)
	keys := []string{"A", "a", "A "}
	now := time.Now().UTC().Truncate(time.Millisecond)
	var rows []store.Row
	for i, k := range keys {
		rows = append(rows, store.Row{Key: k, Vals: []entity.Value{{S: k}, {S: "L" + string(rune('0'+i))}}, Version: 1, UpdatedAt: now, Fence: 1, RunID: "r",
			Children: []entity.Lines{{{{S: "p"}}, {{S: "p "}}, {{S: "P"}}}}})
	}
	if err := st.InsertRows(ctx, rows); err != nil {
		t.Fatalf("insert %q: %v", keys, err)
	}
	cur, err := st.Versions(ctx, keys)
	if err != nil || len(cur) != 3 {
		t.Fatalf("versions: %v %v", cur, err)
	}
	var n int64
	var distinct int64
	count := "SELECT COUNT(*), COUNT(DISTINCT code, part) FROM code_parts"
	if s.Dialect() == store.Postgres {
		count = "SELECT COUNT(*), COUNT(DISTINCT (code, part)) FROM code_parts"
	}
	if err := s.DB().Raw(count).Row().Scan(&n, &distinct); err != nil || n != 9 || distinct != 9 {
		t.Errorf("lines: %d rows, %d distinct (%v), want 9", n, distinct, err)
	}
	var evKeys []string
	if err := s.DB().Raw("SELECT entity_key FROM erpsync_events WHERE entity = 'codes' ORDER BY id").Scan(&evKeys).Error; err != nil {
		t.Fatal(err)
	}
	if want := []string{`{"code":"A"}`, `{"code":"a"}`, `{"code":"A "}`}; !slices.Equal(evKeys, want) {
		t.Errorf("event keys %q, want %q", evKeys, want)
	}
	// The built-in table, as migration 010 left it.
	if err := s.Insert(ctx, []store.Membership{{ErpID: "M", MemberID: "U", ProductCode: "P", Status: "ACTIVE", StartsAt: now, Version: 1, UpdatedAt: now, Fence: 1},
		{ErpID: "M ", MemberID: "U", ProductCode: "P", Status: "ACTIVE", StartsAt: now, Version: 1, UpdatedAt: now, Fence: 1}}); err != nil {
		t.Errorf("memberships M and \"M \": %v", err)
	}
}

// TestMigrateMakesKeysExact: a key column that does not compare byte for
// byte (utf8mb4_bin as erpsync made it before, or a case-insensitive
// collation made by hand) is a mismatch that every command reports, and
// migrate changes it, rows and all: the change separates keys, it merges
// none.
func TestMigrateMakesKeysExact(t *testing.T) {
	t.Parallel()
	s, e := customersKeyed(t, "utf8mb4_bin")
	ctx := context.Background()
	for _, coll := range []string{"utf8mb4_bin", "utf8mb4_general_ci"} {
		collate(t, s, coll)
		var me *store.SchemaMismatchError
		if err := s.CheckEntities(ctx, []*entity.Entity{e}); !errors.As(err, &me) || !strings.Contains(err.Error(), "column customer is string(10) (collation utf8mb4_nopad_bin) in the config file, string(10) (collation "+coll+") in the database; run erpsync migrate") {
			t.Errorf("%s: check: %v", coll, err)
		}
		p := migrateEntities(t, s, e)
		if want := []string{"ALTER TABLE `customers` MODIFY COLUMN `customer` VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL"}; !slices.Equal(p.Statements, want) {
			t.Errorf("%s: plan %q, want %q", coll, p.Statements, want)
		}
		assertMatches(t, s, e)
	}
	insertCustomer(t, s, "1000", "C1 ")
	insertCustomer(t, s, "1000", "c1")
	var colls []string
	if err := s.DB().Raw(`SELECT COLLATION_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()
 AND (TABLE_NAME, COLUMN_NAME) IN (('memberships', 'erp_id'), ('erpsync_events', 'entity_key')) ORDER BY TABLE_NAME`).Scan(&colls).Error; err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(colls, []string{"utf8mb4_nopad_bin", "utf8mb4_nopad_bin"}) {
		t.Errorf("erpsync_events.entity_key, memberships.erp_id: %q", colls)
	}
}

// customersKeyed is a migrated customers table with the row (1000, C1),
// its customer column then made of collation coll.
func customersKeyed(t *testing.T, coll string) (*store.Store, *entity.Entity) {
	s, _ := mysqlStore(t) // MySQL's collations
	e := customers(t)
	migrateEntities(t, s, e)
	insertCustomer(t, s, "1000", "C1")
	collate(t, s, coll)
	return s, e
}

// collate makes the customers table's customer column of collation coll,
// as a table made before or by hand.
func collate(t *testing.T, s *store.Store, coll string) {
	if err := s.DB().Exec("ALTER TABLE customers MODIFY customer VARCHAR(10) CHARACTER SET utf8mb4 COLLATE " + coll + " NOT NULL").Error; err != nil {
		t.Fatal(err)
	}
}

// TestDecimalKeyScale: a key's text is its stored digits ("1.50"), which
// its lock and event keys carry: migrate widens a decimal key's
// precision, and changes its scale only while the table has no rows.
func TestDecimalKeyScale(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	e := &entity.Entity{Name: "prices", Key: []string{"amount"}, UpdatedAt: []string{"u"},
		Columns: []entity.Column{{Name: "amount", Type: typ(t, "decimal(10,2)")}}}
	migrateEntities(t, s, e)
	widen := func(ty string) *entity.Entity {
		c := clone(e)
		c.Columns[0].Type = typ(t, ty)
		return c
	}
	e = widen("decimal(11,3)") // an empty table: its scale may change
	migrateEntities(t, s, e)
	if err := s.DB().Exec(strings.ReplaceAll("INSERT INTO prices (amount, erp_version, erp_updated_at, fence_token, created_at, updated_at) VALUES (1.5, 1, NOW, 1, NOW, NOW)", "NOW", nowSQL(s))).Error; err != nil {
		t.Fatal(err)
	}
	migrateEntities(t, s, widen("decimal(14,3)"))
	var le *store.LossyChangeError
	_, err := s.PlanEntities(ctx, []*entity.Entity{widen("decimal(15,4)")})
	if !errors.As(err, &le) || err.Error() != "table prices: column amount is decimal(15,4) in the config file, decimal(14,3) in the database: "+
		"the key's text would change (a key amount of decimal(14,3) is written with 4 decimal places, its lock and event keys with it); "+
		"keep the scale of decimal(14,3) (a wider precision is fine), or sync the new key into a table of another name (table:)" {
		t.Errorf("plan: %v", err)
	}
}

// TestKeyTaken: on a key column whose collation cannot tell two keys
// apart, KeyTaken names the row's other key, so that the record is
// quarantined instead of written over it.
func TestKeyTaken(t *testing.T) {
	t.Parallel()
	s, e := customersKeyed(t, "utf8mb4_general_ci")
	ctx := context.Background()
	tab, err := store.Compile(e)
	if err != nil {
		t.Fatal(err)
	}
	st := s.For(tab)
	for key, want := range map[string]string{"1000\x1fc1": "1000\x1fC1", "1000\x1fC1 ": "1000\x1fC1", "1000\x1fC1": "", "1000\x1fC2": ""} {
		other, taken, err := st.KeyTaken(ctx, key)
		if err != nil || taken != (want != "") || other != want {
			t.Errorf("%q: %q %v %v, want %q", key, other, taken, err, want)
		}
	}
}
