package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/erpsync/erpsync/internal/store"
)

// What a test writes in SQL of its own, on either database of the matrix:
// plain lower-case identifiers, CASE WHEN, values passed as arguments. The
// few statements that differ go through the helpers below, which tell the
// database by the DSN's form as erpsync does.

// IsPostgres reports whether dsn names a PostgreSQL database.
func IsPostgres(dsn string) bool { return store.DialectOf(dsn) == store.Postgres }

// Rebind rewrites the '?' placeholders of query into PostgreSQL's $1, $2,
// ... when dsn is PostgreSQL's; database/sql passes them to the driver as
// written. No '?' may stand inside a literal of query.
func Rebind(dsn, query string) string {
	if !IsPostgres(dsn) {
		return query
	}
	var b strings.Builder
	n := 0
	for _, part := range strings.SplitAfter(query, "?") {
		if !strings.HasSuffix(part, "?") {
			b.WriteString(part)
			continue
		}
		n++
		b.WriteString(part[:len(part)-1] + "$" + strconv.Itoa(n))
	}
	return b.String()
}

// Text is a SQL expression that renders expr as text: CAST(expr AS CHAR)
// on MySQL, CAST(expr AS TEXT) on PostgreSQL (where CHAR is one character).
func Text(dsn, expr string) string {
	if IsPostgres(dsn) {
		return "CAST(" + expr + " AS TEXT)"
	}
	return "CAST(" + expr + " AS CHAR)"
}

// DatabaseName returns the name of the database dsn names.
func DatabaseName(t testing.TB, dsn string) string {
	t.Helper()
	if IsPostgres(dsn) {
		cfg, err := store.ParsePostgresDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Database
	}
	cfg, err := store.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.DBName
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

// CreateDatabase creates the database a DSN of DSN names, empty: for tests
// of what erpsync does before migrate.
func CreateDatabase(t testing.TB, dsn string) {
	t.Helper()
	name := DatabaseName(t, dsn)
	q := "CREATE DATABASE `" + name + "`"
	if IsPostgres(dsn) {
		q = `CREATE DATABASE "` + name + `"`
	}
	s, err := store.Open(context.Background(), adminDSN(t, dsn), &store.Options{MaxOpenConns: 1})
	if err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	defer s.Close()
	if err := s.DB().Exec(q).Error; err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
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

// OpenSQL opens a database/sql handle on dsn for a test's own queries (use
// Rebind for their placeholders), with no default database on MySQL when
// noDatabase is set (PostgreSQL has no such connection: it always opens
// the database dsn names). On PostgreSQL the connections carry
// application_name, so that a test can tell them from erpsync's.
func OpenSQL(dsn string, noDatabase bool, application string) (*sql.DB, error) {
	if IsPostgres(dsn) {
		cfg, err := store.ParsePostgresDSN(dsn)
		if err != nil {
			return nil, err
		}
		cfg.RuntimeParams["application_name"] = application
		return stdlib.OpenDB(*cfg), nil
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse dsn: %w", err)
	}
	if noDatabase {
		cfg.DBName = ""
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", cfg.Addr, err)
	}
	return db, nil
}
