package testenv

import "testing"

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
