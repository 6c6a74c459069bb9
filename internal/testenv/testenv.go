// Package testenv gives tests their own database and Redis key prefix on the
// real servers the README names: MariaDB/MySQL at ERPSYNC_TEST_MYSQL_DSN
// (default root@tcp(127.0.0.1:3306)/) and Redis at ERPSYNC_TEST_REDIS_ADDR
// (default 127.0.0.1:6379). Nothing here fakes a server.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/internal/store"
)

// PropertyRand is the random source of a property test: of a new seed,
// or of ERPSYNC_PROPERTY_SEED, which replays one; stream tells tests
// apart.
func PropertyRand(t testing.TB, stream uint64) *mrand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("ERPSYNC_PROPERTY_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (ERPSYNC_PROPERTY_SEED replays it)", seed)
	return mrand.New(mrand.NewPCG(seed, stream))
}

// RandomName returns prefix followed by 8 random hex digits.
func RandomName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// mysqlServer is the user and address part of ERPSYNC_TEST_MYSQL_DSN,
// before its "/".
func mysqlServer() string {
	base := os.Getenv("ERPSYNC_TEST_MYSQL_DSN")
	if base == "" {
		base = "root@tcp(127.0.0.1:3306)/"
	}
	host, _, _ := strings.Cut(base, "/")
	return host
}

// MariaDB says whether the MySQL server of ERPSYNC_TEST_MYSQL_DSN is
// MariaDB (its version says so), failing t when it does not answer. The
// server is asked once per test binary.
func MariaDB(t testing.TB) bool {
	t.Helper()
	maria, err := isMariaDB()
	if err != nil {
		t.Fatal(err)
	}
	return maria
}

var isMariaDB = sync.OnceValues(func() (bool, error) {
	s, err := store.Open(context.Background(), mysqlServer()+"/mysql", nil)
	if err != nil {
		return false, err
	}
	defer s.Close()
	var version string
	if err := s.DB().Raw("SELECT VERSION()").Row().Scan(&version); err != nil {
		return false, fmt.Errorf("mysql version: %w", err)
	}
	return strings.Contains(version, "MariaDB"), nil
})

// MySQLDSN returns a DSN naming a database that does not exist yet and is
// dropped when the test ends.
func MySQLDSN(t testing.TB) string { return MySQLDSNNamed(t, "erpsync_t_") }

// MySQLDSNNamed is MySQLDSN for a database whose name starts with prefix.
func MySQLDSNNamed(t testing.TB, prefix string) string {
	t.Helper()
	name := RandomName(prefix)
	dsn := mysqlServer() + "/" + name + "?parseTime=true"
	t.Cleanup(func() {
		cfg, err := store.ParseDSN(dsn)
		if err != nil {
			return
		}
		cfg.DBName = "mysql"
		s, err := store.Open(context.Background(), cfg.FormatDSN(), nil)
		if err == nil {
			s.DB().Exec("DROP DATABASE IF EXISTS `" + name + "`")
			s.Close()
		}
	})
	return dsn
}

// CreateDatabase creates the database a DSN of MySQLDSN or PostgresDSN
// names, empty: for tests of what erpsync does before migrate.
func CreateDatabase(t testing.TB, dsn string) {
	t.Helper()
	if store.DialectOf(dsn) == store.Postgres {
		CreatePostgresDatabase(t, dsn)
		return
	}
	cfg, err := store.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	name := cfg.DBName
	cfg.DBName = "mysql"
	s, err := store.Open(context.Background(), cfg.FormatDSN(), nil)
	if err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	defer s.Close()
	if err := s.DB().Exec("CREATE DATABASE `" + name + "`").Error; err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
}

// MigratedStore returns a store on a fresh, migrated database of the
// matrix (DSN), and its DSN.
func MigratedStore(t testing.TB) (*store.Store, string) {
	t.Helper()
	return MigratedStoreAt(t, DSN(t))
}

// MigratedStoreAt is MigratedStore on the database of dsn (of MySQLDSN
// or PostgresDSN), whatever the matrix says.
func MigratedStoreAt(t testing.TB, dsn string) (*store.Store, string) {
	t.Helper()
	ctx := context.Background()
	if _, err := store.Migrate(ctx, dsn); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	s, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dsn
}

// Build builds the main package pkg (like "./cmd/erpsync") of this module
// into dir and returns the binary's path: tests that start erpsync as a
// child process need it, since their own executable is the test binary.
func Build(dir, pkg string) (string, error) {
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	build := exec.Command("go", "build", "-o", bin, pkg)
	build.Dir = strings.TrimSpace(string(root))
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// RedisAddr is the address of the test Redis.
func RedisAddr() string {
	if a := os.Getenv("ERPSYNC_TEST_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// NATSURL is the address of the test NATS server (with JetStream).
func NATSURL() string {
	if u := os.Getenv("ERPSYNC_TEST_NATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// AMQPURL is the address of the test RabbitMQ broker.
func AMQPURL() string {
	if u := os.Getenv("ERPSYNC_TEST_AMQP_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// Redis returns a client of the test Redis, closed when the test ends.
func Redis(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: RedisAddr()})
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("redis at %s: %v", RedisAddr(), err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// RepoRoot returns the module's root directory: where the repository's
// files (examples, testdata) are.
func RepoRoot(t testing.TB) string {
	t.Helper()
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("find module root: %v", err)
	}
	return strings.TrimSpace(string(root))
}

// MainWithBinary is a TestMain of tests that run the binary of pkg: it
// builds it into a temporary directory, stores its path in *bin, runs the
// tests, removes the binary and exits with the tests' code (1 when the
// build fails).
func MainWithBinary(m *testing.M, pkg string, bin *string) {
	b, remove, err := BuildTemp(pkg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bin = b
	code := m.Run()
	remove()
	os.Exit(code)
}

// BuildTemp is Build into a new temporary directory; remove deletes the
// directory and the binary.
func BuildTemp(pkg string) (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "erpsync-bin-")
	if err != nil {
		return "", nil, fmt.Errorf("build %s: %w", pkg, err)
	}
	remove = func() { os.RemoveAll(dir) }
	if bin, err = Build(dir, pkg); err != nil {
		remove()
		return "", nil, err
	}
	return bin, remove, nil
}
