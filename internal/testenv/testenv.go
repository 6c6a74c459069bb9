// Package testenv gives tests their own database and Redis key prefix on the
// real servers the README names: MariaDB/MySQL at ERPSYNC_TEST_MYSQL_DSN
// (default root@tcp(127.0.0.1:3306)/) and Redis at ERPSYNC_TEST_REDIS_ADDR
// (default 127.0.0.1:6379). Nothing here fakes a server.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/internal/store"
)

// RandomName returns prefix followed by 8 random hex digits.
func RandomName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// MySQLDSN returns a DSN naming a database that does not exist yet and is
// dropped when the test ends.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv("ERPSYNC_TEST_MYSQL_DSN")
	if base == "" {
		base = "root@tcp(127.0.0.1:3306)/"
	}
	name := RandomName("erpsync_t_")
	host, _, _ := strings.Cut(base, "/")
	dsn := host + "/" + name + "?parseTime=true"
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

// MigratedStore returns a store on a fresh, migrated database, and its DSN.
func MigratedStore(t testing.TB) (*store.Store, string) {
	t.Helper()
	dsn := MySQLDSN(t)
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

// RedisAddr is the address of the test Redis.
func RedisAddr() string {
	if a := os.Getenv("ERPSYNC_TEST_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
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
