package store_test

import (
	"testing"

	"github.com/erpsync/erpsync/internal/store"
)

// PostgreSQL numbers the placeholders outside quotes; a '?' in a string
// literal or a quoted name stays, and MySQL's statements are unchanged.
func TestPlaceholders(t *testing.T) {
	for _, c := range []struct{ in, pg string }{
		{"SELECT 1", "SELECT 1"},
		{"UPDATE t SET a = ? WHERE b = ? AND c IN (?, ?)", "UPDATE t SET a = $1 WHERE b = $2 AND c IN ($3, $4)"},
		{`SELECT '?', "a?b", ? FROM t WHERE x = 'it''s ?' AND y = ?`, `SELECT '?', "a?b", $1 FROM t WHERE x = 'it''s ?' AND y = $2`},
	} {
		if got := store.Postgres.Placeholders(c.in); got != c.pg {
			t.Errorf("Postgres.Placeholders(%q) = %q, want %q", c.in, got, c.pg)
		}
		if got := store.MySQL.Placeholders(c.in); got != c.in {
			t.Errorf("MySQL.Placeholders(%q) = %q, want it unchanged", c.in, got)
		}
	}
}
