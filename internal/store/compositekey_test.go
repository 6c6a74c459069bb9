package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/store"
)

// TestCompositeKeysOfEveryKind: a key of every kind a key column may have
// finds its own row and no other, through every read by keys (the guards
// of Versions, the rows of ScanRowsOf): int64 past 2^53, negative numbers,
// a decimal's scale, both booleans, dates, and strings that differ only in
// case, a trailing space or a quote. A key that differs from a row's in
// one part finds nothing.
func TestCompositeKeysOfEveryKind(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	e := &entity.Entity{Name: "every_keys", Key: []string{"s", "i", "n", "d", "b", "day"}, UpdatedAt: []string{"u"},
		Columns: []entity.Column{{Name: "s", Type: typ(t, "string(8)")}, {Name: "i", Type: typ(t, "int32")}, {Name: "n", Type: typ(t, "int64")},
			{Name: "d", Type: typ(t, "decimal(10,2)")}, {Name: "b", Type: typ(t, "bool")}, {Name: "day", Type: typ(t, "date")}, {Name: "label", Type: typ(t, "string(8)")}}}
	migrateEntities(t, s, e)
	tab, err := store.Compile(e)
	if err != nil {
		t.Fatal(err)
	}
	st := s.For(tab)
	type key struct {
		s    string
		i, n int64
		d    string
		b    bool
		day  string
	}
	text := func(k key) string {
		return entity.KeyText([]string{k.s, fmt.Sprint(k.i), fmt.Sprint(k.n), k.d, fmt.Sprint(k.b), k.day})
	}
	present := []key{
		{"A", 1, 9007199254740993, "12.30", true, "2025-01-31"},
		{"a", 1, 9007199254740993, "12.30", true, "2025-01-31"},
		{"A ", -1, -9007199254740993, "-0.50", false, "1999-12-31"},
		{"it's", 2147483647, 1, "0.00", false, "2000-02-29"},
	}
	absent := []key{
		{"A", 1, 9007199254740992, "12.30", true, "2025-01-31"}, // int64 one below, the same as a double
		{"A", 1, 9007199254740993, "12.31", true, "2025-01-31"},
		{"A", 1, 9007199254740993, "12.30", false, "2025-01-31"},
		{"A", 1, 9007199254740993, "12.30", true, "2025-02-01"},
		{"A", 2, 9007199254740993, "12.30", true, "2025-01-31"},
		{"it", 2147483647, 1, "0.00", false, "2000-02-29"},
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	var rows []store.Row
	var keys []string
	for i, k := range present {
		b := int64(0)
		if k.b {
			b = 1
		}
		vals := []entity.Value{{S: k.s}, {I: k.i}, {I: k.n}, {S: k.d}, {I: b}, {S: k.day}, {S: fmt.Sprint("L", i)}}
		rows = append(rows, store.Row{Key: text(k), Vals: vals, Version: int64(10 + i), UpdatedAt: now, Fence: 1, RunID: "r"})
		keys = append(keys, text(k))
	}
	if err := st.InsertRows(ctx, rows); err != nil {
		t.Fatalf("insert: %v", err)
	}
	for _, k := range absent {
		keys = append(keys, text(k))
	}
	cur, err := st.Versions(ctx, keys)
	if err != nil {
		t.Fatalf("versions: %v", err)
	}
	if len(cur) != len(present) {
		t.Errorf("versions found %d rows, want %d: %v", len(cur), len(present), cur)
	}
	for i, k := range present {
		if c, ok := cur[text(k)]; !ok || c.Version != int64(10+i) {
			t.Errorf("key %q: %+v (found %v), want version %d", text(k), c, ok, 10+i)
		}
	}
	got := map[string]bool{}
	if err := st.ScanRowsOf(ctx, keys, func(r *store.Stored) error {
		got[r.Key] = true
		return nil
	}); err != nil {
		t.Fatalf("scan rows of keys: %v", err)
	}
	if len(got) != len(present) {
		t.Errorf("ScanRowsOf found %v, want the %d present keys", got, len(present))
	}
	for _, k := range present {
		if !got[text(k)] {
			t.Errorf("ScanRowsOf missed %q", text(k))
		}
	}
}
