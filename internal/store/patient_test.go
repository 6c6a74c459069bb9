package store_test

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// limitedUser creates a user allowed n connections at once (a role's
// CONNECTION LIMIT, an account's MAX_USER_CONNECTIONS), dropped when the
// test ends, and returns dsn as that user, and the user's name.
func limitedUser(t *testing.T, dsn string, n int) (string, string) {
	t.Helper()
	user, pass := testenv.RandomName("erpsync_lim_"), testenv.RandomName("pw-")
	if testenv.IsPostgres(dsn) {
		admin := testenv.WithDatabase(t, dsn, "postgres")
		t.Cleanup(func() { testenv.ExecSQL(t, admin, `DROP ROLE IF EXISTS "`+user+`"`) })
		testenv.ExecSQL(t, admin, fmt.Sprintf(`CREATE ROLE "%s" LOGIN PASSWORD '%s' CONNECTION LIMIT %d`, user, pass, n))
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(user, pass)
		return u.String(), user
	}
	cfg, err := store.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	admin := cfg.Clone()
	admin.DBName = "mysql"
	t.Cleanup(func() { testenv.ExecSQL(t, admin.FormatDSN(), fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", user)) })
	testenv.ExecSQL(t, admin.FormatDSN(), fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s' WITH MAX_USER_CONNECTIONS %d", user, pass, n),
		fmt.Sprintf("GRANT SELECT ON `%s`.* TO '%s'@'%%'", cfg.DBName, user))
	cfg.User, cfg.Passwd = user, pass
	return cfg.FormatDSN(), user
}

// TestAConnectionWaitsWhileTheServerHasNoneToSpare: a store allowed more
// connections than the server lets its user have (here 2, by the user's
// connection limit; elsewhere max_connections shared by several
// processes) runs 8 statements at once, each holding its connection for
// 200 ms: every statement succeeds, the connections the server refused
// made again once others came free. Each refusal failed its statement
// ("too many connections").
func TestAConnectionWaitsWhileTheServerHasNoneToSpare(t *testing.T) {
	t.Parallel()
	_, dsn := testenv.MigratedStore(t)
	limited, _ := limitedUser(t, dsn, 2)
	st, err := store.Open(context.Background(), limited, &store.Options{MaxOpenConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sleep := "SELECT SLEEP(0.2)"
	if st.Dialect() == store.Postgres {
		sleep = "SELECT pg_sleep(0.2)"
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = st.DB().WithContext(context.Background()).Exec(sleep).Error })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("statement %d: %v", i, err)
		}
	}
}

// TestAStoreWithoutConnectionsWaitsForAnotherToEnd: while another process
// (here another store) holds every connection the server lets the user
// have, a new store's first connection waits until they come free (that
// store closes after 500 ms), not failing its open.
func TestAStoreWithoutConnectionsWaitsForAnotherToEnd(t *testing.T) {
	t.Parallel()
	root, dsn := testenv.MigratedStore(t)
	limited, user := limitedUser(t, dsn, 2)
	ctx := context.Background()
	first, err := store.Open(ctx, limited, &store.Options{MaxOpenConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	sleep := "SELECT SLEEP(0.5)"
	if first.Dialect() == store.Postgres {
		sleep = "SELECT pg_sleep(0.5)"
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if err := first.DB().Exec(sleep).Error; err != nil {
				t.Error(err)
			}
		})
	}
	go func() {
		wg.Wait()
		first.Close()
	}()
	// Both of first's connections are open at the server.
	sessions := "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ?"
	if first.Dialect() == store.Postgres {
		sessions = "SELECT COUNT(*) FROM pg_stat_activity WHERE usename = ?"
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		var n int
		if err := root.DB().Raw(sessions, user).Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions of %s after a minute, want 2", n, user)
		}
	}
	second, err := store.Open(ctx, limited, &store.Options{MaxOpenConns: 2, PingTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("the second store: %v", err)
	}
	defer second.Close()
	if err := second.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAHeldConnectionIsNotWaitedFor: a pool whose one connection is held
// for good (as the relay's listener holds its own) and which the server
// refuses another does not wait for that one: its statement connects once
// the other client's connections come free (a second store closes after
// 500 ms). Bounded to the one it held, it waited for it until its
// context ended.
func TestAHeldConnectionIsNotWaitedFor(t *testing.T) {
	t.Parallel()
	_, dsn := testenv.MigratedStore(t)
	limited, _ := limitedUser(t, dsn, 2)
	ctx := context.Background()
	st, err := store.Open(ctx, limited, &store.Options{MaxOpenConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pool, err := st.DB().DB()
	if err != nil {
		t.Fatal(err)
	}
	held, err := pool.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	other, err := store.Open(ctx, limited, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(500*time.Millisecond, func() { other.Close() })
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := st.DB().WithContext(sctx).Exec("SELECT 1").Error; err != nil {
		t.Fatalf("the statement beside the held connection: %v", err)
	}
}
