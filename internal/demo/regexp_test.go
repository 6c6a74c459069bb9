package demo

import (
	"database/sql"
	"math/rand/v2"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"

	"github.com/erpsync/erpsync/internal/testenv"
)

// TestEmbeddedMySQLRegexpAgreesWithMariaDB: the embedded server's REGEXP,
// REGEXP_INSTR and REGEXP_SUBSTR (go.mod replaces the ICU library they
// call with internal/regexshim, over Go's regexp) answer as the real
// MariaDB does, for drawn patterns of what the two regex dialects share
// (literals, ., classes, \d, anchors, groups, alternation, quantifiers;
// REGEXP_REPLACE of patterns that cannot match the empty string)
// against drawn subjects with multi-byte characters (no letter of two
// cases: MariaDB's default collation matches without case). MariaDB has
// no position or occurrence arguments; those are checked against MySQL
// 8's answers, in characters.
func TestEmbeddedMySQLRegexpAgreesWithMariaDB(t *testing.T) {
	embedded, err := sql.Open("mysql", StartMySQLForTest(t).DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.Close()
	dsn := testenv.MySQLDSN(t)
	testenv.CreateDatabase(t, dsn)
	maria, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer maria.Close()
	r := rand.New(rand.NewPCG(7, 0x5e9))
	atoms := []string{"a", "b", "é", "1", ".", "[ab]", "[^a]", `\d`, "(a|b)", "(ab)", "a*", "b+", "é?", "^", "$", "a{2}", "[0-9]+"}
	letters := []string{"a", "b", "é", "1", "2", "x", "ab", "日"}
	draw := func(parts []string, max int) string {
		var b strings.Builder
		for range 1 + r.IntN(max) {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		return b.String()
	}
	ask := func(db *sql.DB, q string, args ...any) (string, error) {
		var v sql.NullString
		err := db.QueryRow(q, args...).Scan(&v)
		if !v.Valid {
			return "NULL", err
		}
		return v.String, err
	}
	queries := []string{
		"SELECT ? REGEXP ?",
		"SELECT REGEXP_INSTR(?, ?)",
		"SELECT REGEXP_SUBSTR(?, ?)",
		"SELECT REGEXP_REPLACE(?, ?, '#')",
	}
	compared := 0
	for range 300 {
		p, s := draw(atoms, 4), draw(letters, 6)
		for _, q := range queries {
			if empty, _ := ask(maria, "SELECT '' REGEXP ?", p); strings.Contains(q, "REPLACE") && empty != "0" {
				continue // MariaDB replaces no empty match; MySQL every one
			}
			want, werr := ask(maria, q, s, p)
			got, gerr := ask(embedded, q, s, p)
			if strings.Contains(q, "SUBSTR") && want == "" && got == "NULL" {
				// MariaDB answers '' for no match and for an empty one;
				// MySQL (and the embedded server) NULL for no match.
				got = ""
			}
			if (werr != nil) != (gerr != nil) || want != got {
				t.Errorf("%s with %q, %q: embedded %q (%v), MariaDB %q (%v)", q, s, p, got, gerr, want, werr)
			}
			compared++
		}
	}
	if compared == 0 {
		t.Fatal("nothing compared")
	}
	for _, c := range []struct{ q, want string }{
		{"SELECT REGEXP_INSTR('aXbXc', 'X', 1, 2)", "4"},
		{"SELECT REGEXP_INSTR('aXbXc', 'X', 3)", "4"},
		{"SELECT REGEXP_INSTR('日aXb', 'X', 1, 1, 1)", "4"},
		{"SELECT REGEXP_INSTR('aXbXc', 'X', 1, 3)", "0"},
		{"SELECT REGEXP_SUBSTR('a1b22c333', '[0-9]+', 1, 3)", "333"},
		{"SELECT REGEXP_SUBSTR('日1é22', '[0-9]+', 3)", "22"},
		{"SELECT REGEXP_REPLACE('abcabc', 'b', 'X', 1, 2)", "abcaXc"},
		{"SELECT REGEXP_REPLACE('abcabc', 'b', 'X', 3)", "abcaXc"},
		{"SELECT REGEXP_REPLACE('abc', '(b)', '[$1]')", "a[b]c"},
		{"SELECT REGEXP_LIKE('ABC', 'b', 'i')", "1"},
		{"SELECT REGEXP_LIKE('ABC', 'b', 'c')", "0"},
		{"SELECT REGEXP_LIKE('a\nb', '^b', 'm')", "1"},
	} {
		if got, err := ask(embedded, c.q); err != nil || got != c.want {
			t.Errorf("%s: %q (%v), want %q", c.q, got, err, c.want)
		}
	}
}
