package testenv

import (
	"context"
	"net/url"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/erpsync/erpsync/internal/store"
)

// What a test writes in SQL of its own, on either database of the matrix:
// plain lower-case identifiers, CASE WHEN, values passed as arguments ('?'
// through SQLDB). The few statements that differ go through the helpers
// below, which tell the database by the DSN's form as erpsync does.

// IsPostgres reports whether dsn names a PostgreSQL database.
func IsPostgres(dsn string) bool { return store.DialectOf(dsn) == store.Postgres }

// DatabaseName returns the name of the database dsn names.
func DatabaseName(t testing.TB, dsn string) string {
	t.Helper()
	_, name, err := store.Target(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// WithDatabase returns dsn naming the database name instead of its own,
// on the same server with the same user.
func WithDatabase(t testing.TB, dsn, name string) string {
	t.Helper()
	if IsPostgres(dsn) {
		u, err := url.Parse(dsn)
		if err != nil || u.Scheme == "" {
			t.Fatalf("with database %s: want a postgres:// URL, not %q", name, dsn)
		}
		u.Path = "/" + name
		return u.String()
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = name
	return cfg.FormatDSN()
}

// adminDSN is dsn naming the server's maintenance database: mysql, or
// postgres.
func adminDSN(t testing.TB, dsn string) string {
	if IsPostgres(dsn) {
		return WithDatabase(t, dsn, "postgres")
	}
	return WithDatabase(t, dsn, "mysql")
}

// DatabaseExists reports whether the database dsn names exists on its
// server.
func DatabaseExists(t testing.TB, dsn string) bool {
	t.Helper()
	name := DatabaseName(t, dsn)
	q := "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?"
	if IsPostgres(dsn) {
		q = "SELECT COUNT(*) FROM pg_database WHERE datname = ?"
	}
	s, err := store.Open(context.Background(), adminDSN(t, dsn), &store.Options{MaxOpenConns: 1})
	if err != nil {
		t.Fatalf("look for database %s: %v", name, err)
	}
	defer s.Close()
	var n int64
	if err := s.DB().Raw(q, name).Scan(&n).Error; err != nil {
		t.Fatalf("look for database %s: %v", name, err)
	}
	return n > 0
}
