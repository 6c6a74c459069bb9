package testenv

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/store"
)

// The database matrix: ERPSYNC_TEST_DB=postgres runs the suites that use
// DSN on PostgreSQL (at ERPSYNC_TEST_POSTGRES_URL, default
// postgres://root@127.0.0.1:5432/), anything else on MySQL. The same tests
// run on both: a matrix, not a copy.

// Postgres reports whether the matrix runs this test binary on PostgreSQL.
func Postgres() bool { return strings.EqualFold(os.Getenv("ERPSYNC_TEST_DB"), "postgres") }

// DSN returns a DSN of the matrix's database naming a database that does
// not exist yet and is dropped when the test ends.
func DSN(t testing.TB) string {
	if Postgres() {
		return PostgresDSN(t)
	}
	return MySQLDSN(t)
}

// DSNFlag is the erpsync flag that takes dsn: --postgres-dsn for a
// PostgreSQL DSN, --mysql-dsn otherwise.
func DSNFlag(dsn string) string {
	if store.DialectOf(dsn) == store.Postgres {
		return "--postgres-dsn"
	}
	return "--mysql-dsn"
}

// DSNEnv is the environment variable that takes dsn: ERPSYNC_POSTGRES_DSN
// or ERPSYNC_MYSQL_DSN.
func DSNEnv(dsn string) string {
	if store.DialectOf(dsn) == store.Postgres {
		return "ERPSYNC_POSTGRES_DSN"
	}
	return "ERPSYNC_MYSQL_DSN"
}

// postgresBase is the URL of the test PostgreSQL without a database.
func postgresBase() string {
	base := os.Getenv("ERPSYNC_TEST_POSTGRES_URL")
	if base == "" {
		base = "postgres://root@127.0.0.1:5432/"
	}
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	return base
}

// PostgresDSN returns a postgres:// DSN naming a database that does not
// exist yet and is dropped when the test ends.
func PostgresDSN(t testing.TB) string { return PostgresDSNNamed(t, "erpsync_t_") }

// PostgresDSNNamed is PostgresDSN for a database whose name starts with
// prefix.
func PostgresDSNNamed(t testing.TB, prefix string) string {
	t.Helper()
	name := RandomName(prefix)
	dsn := postgresBase() + name + "?sslmode=disable"
	t.Cleanup(func() {
		s, err := store.Open(context.Background(), postgresBase()+"postgres?sslmode=disable", &store.Options{MaxOpenConns: 1})
		if err == nil {
			s.DB().Exec(`DROP DATABASE IF EXISTS "` + name + `" WITH (FORCE)`)
			s.Close()
		}
	})
	return dsn
}

// CreatePostgresDatabase creates the database a DSN of PostgresDSN names,
// empty: for tests of what erpsync does before migrate.
func CreatePostgresDatabase(t testing.TB, dsn string) {
	t.Helper()
	cfg, err := store.ParsePostgresDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(context.Background(), postgresBase()+"postgres?sslmode=disable", &store.Options{MaxOpenConns: 1})
	if err != nil {
		t.Fatalf("create database %s: %v", cfg.Database, err)
	}
	defer s.Close()
	if err := s.DB().Exec(store.CreateDatabaseSQLFor(store.Postgres, cfg.Database)).Error; err != nil {
		t.Fatalf("create database %s: %v", cfg.Database, err)
	}
}
