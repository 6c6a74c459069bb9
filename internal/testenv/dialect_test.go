package testenv

import "testing"

func TestRebindNumbersPlaceholdersOnPostgres(t *testing.T) {
	const pg, my = "postgres://root@127.0.0.1:5432/db?sslmode=disable", "root@tcp(127.0.0.1:3306)/db?parseTime=true"
	for _, c := range []struct{ dsn, in, want string }{
		{pg, "SELECT a FROM t WHERE b = ? AND c IN (?, ?)", "SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)"},
		{pg, "SELECT 1", "SELECT 1"},
		{pg, "?", "$1"},
		{my, "SELECT a FROM t WHERE b = ?", "SELECT a FROM t WHERE b = ?"},
	} {
		if got := Rebind(c.dsn, c.in); got != c.want {
			t.Errorf("Rebind(%s, %q) = %q, want %q", c.dsn, c.in, got, c.want)
		}
	}
}

func TestWithDatabaseKeepsServerAndUser(t *testing.T) {
	for _, c := range []struct{ dsn, want string }{
		{"postgres://u:p@127.0.0.1:5432/a?sslmode=disable", "postgres://u:p@127.0.0.1:5432/b?sslmode=disable"},
		{"u:p@tcp(127.0.0.1:3306)/a?parseTime=true", "u:p@tcp(127.0.0.1:3306)/b?parseTime=true"},
	} {
		got := WithDatabase(t, c.dsn, "b")
		if got != c.want {
			t.Errorf("WithDatabase(%s, b) = %s, want %s", c.dsn, got, c.want)
		}
		if name := DatabaseName(t, got); name != "b" {
			t.Errorf("DatabaseName(%s) = %s, want b", got, name)
		}
	}
}
