package store_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// On MariaDB, Options.IdleTxTimeout is the sessions'
// idle_transaction_timeout in whole seconds, rounded up, unless the DSN
// sets it; the server then ends a session idle inside a transaction that
// long and rolls it back. MySQL has no such setting: the store opens
// without it.
func TestMySQLIdleTxTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base, dsn := mysqlStore(t)
	mariadb := testenv.MariaDB(t)
	var global string
	if mariadb {
		if err := base.DB().Raw("SELECT @@GLOBAL.idle_transaction_timeout").Row().Scan(&global); err != nil {
			t.Fatal(err)
		}
	}
	open := func(dsn string, idle time.Duration) *store.Store {
		t.Helper()
		s, err := store.Open(ctx, dsn, &store.Options{IdleTxTimeout: idle})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	for _, c := range []struct {
		dsn  string
		idle time.Duration
		want string
	}{
		{dsn, 12 * time.Second, "12"},
		{dsn, 1500 * time.Millisecond, "2"},
		{dsn + "&idle_transaction_timeout=5", 12 * time.Second, "5"},
		{dsn, 0, global},
	} {
		s := open(c.dsn, c.idle)
		var got string
		err := s.DB().Raw("SELECT @@SESSION.idle_transaction_timeout").Row().Scan(&got)
		if !mariadb {
			if err == nil {
				t.Errorf("a MySQL server that is not MariaDB has idle_transaction_timeout (%s)", got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("IdleTxTimeout %s, DSN %s: idle_transaction_timeout %q (%v), want %q", c.idle, c.dsn, got, err, c.want)
		}
	}
	if !mariadb {
		return
	}

	idleTxEnded(t, open(dsn, time.Second))
}

// idleTxEnded checks that the server of s, opened with an IdleTxTimeout
// of a second, ends a transaction of s left idle for three and rolls its
// row back.
func idleTxEnded(t *testing.T, s *store.Store) {
	t.Helper()
	ctx := context.Background()
	db, err := s.DB().DB()
	if err != nil {
		t.Fatal(err)
	}
	now := nowSQL(s)
	insert := "INSERT INTO memberships (erp_id, member_id, product_code, status, starts_at, erp_version, erp_updated_at, fence_token, created_at, updated_at) VALUES ('idle', 'u', 'p', 'ACTIVE', " + now + ", 1, " + now + ", 1, " + now + ", " + now + ")"
	// A second between BEGIN and the INSERT ends the transaction before
	// its INSERT (a busy machine): it is begun again, up to three times.
	var tx *sql.Tx
	for try := 1; ; try++ {
		if tx, err = db.BeginTx(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if _, err = tx.ExecContext(ctx, insert); err == nil {
			break
		}
		_ = tx.Rollback()
		if try == 3 {
			t.Fatalf("insert: %v", err)
		}
	}
	defer tx.Rollback()
	time.Sleep(3 * time.Second)
	if err := tx.Commit(); err == nil {
		t.Fatal("a transaction idle for 3s past a 1s timeout committed")
	}
	var n int64
	if err := s.DB().Raw("SELECT COUNT(*) FROM memberships WHERE erp_id = 'idle'").Row().Scan(&n); err != nil || n != 0 {
		t.Errorf("the ended transaction's row: %d rows (%v), want 0", n, err)
	}
}

// TestTransactionOfAnEndedSessionRunsAgain: a process pauses inside a
// quarantine's transaction, or one of quarantine marks, past the
// sessions' idle-in-transaction timeout; the server ends its session and
// rolls the transaction back. Woken, the store runs the transaction again,
// whole, on a new session: its row is written once and the caller sees no
// error. Before, the caller got the server's end of the session (25P03 on
// PostgreSQL, "driver: bad connection" on MariaDB), and a run that was
// quarantining failed. MySQL proper has no such timeout.
func TestTransactionOfAnEndedSessionRunsAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base, dsn := testenv.MigratedStore(t)
	if base.Dialect() == store.MySQL && !testenv.MariaDB(t) {
		t.Log("MySQL has no idle-in-transaction timeout: nothing ends the session")
		return
	}
	s, err := store.Open(ctx, dsn, &store.Options{IdleTxTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	now := nowSQL(s)
	for _, c := range []struct {
		what string
		run  func(write func(tx *sql.Tx) error) error
	}{
		{"quarantine", func(write func(tx *sql.Tx) error) error { return s.InTxResumed(ctx, "a paused quarantine", write) }},
		{"marks", func(write func(tx *sql.Tx) error) error {
			_, err := s.EachInTx(ctx, "paused marks", 1, func(tx *sql.Tx, _ int) (sql.Result, error) {
				if err := write(tx); err != nil {
					return nil, err
				}
				return tx.ExecContext(ctx, "SELECT 1") // after the pause: the session is gone
			})
			return err
		}},
	} {
		t.Run(c.what, func(t *testing.T) {
			t.Parallel()
			id := "paused-" + c.what
			insert := "INSERT INTO memberships (erp_id, member_id, product_code, status, starts_at, erp_version, erp_updated_at, fence_token, created_at, updated_at) VALUES ('" + id + "', 'u', 'p', 'ACTIVE', " + now + ", 1, " + now + ", 1, " + now + ", " + now + ")"
			attempts := 0
			err := c.run(func(tx *sql.Tx) error {
				attempts++
				if _, err := tx.ExecContext(ctx, insert); err != nil {
					return err
				}
				if attempts == 1 {
					time.Sleep(3 * time.Second) // paused, three times the timeout
				}
				return nil
			})
			var n int64
			if err := s.DB().Raw("SELECT COUNT(*) FROM memberships WHERE erp_id = ?", id).Row().Scan(&n); err != nil {
				t.Fatal(err)
			}
			if err != nil || attempts != 2 || n != 1 {
				t.Fatalf("the paused transaction: %v after %d attempts, %d rows; want no error, 2 attempts (the first ended by the server), 1 row", err, attempts, n)
			}
		})
	}
}
