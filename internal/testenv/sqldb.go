package testenv

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/erpsync/erpsync/internal/store"
)

// SQLDB opens a test's own handle on the database of dsn, MySQL's or
// PostgreSQL's, closed when the test ends: the handle a harness reads
// tables with. On PostgreSQL its statements take MySQL's '?' placeholders
// too (rewritten to $1, $2, ...), so that a test's queries read the same on
// both databases; its sessions are named erpsync-harness
// (application_name), never erpsync.
func SQLDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	var db *sql.DB
	if store.DialectOf(dsn) == store.Postgres {
		cfg, err := store.ParsePostgresDSN(dsn)
		if err != nil {
			t.Fatalf("open harness db: %v", err)
		}
		cfg.RuntimeParams["application_name"] = "erpsync-harness"
		db = sql.OpenDB(qmarkConnector{stdlib.GetConnector(*cfg)})
	} else {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatalf("open harness db: %v", err)
		}
		cfg.ParseTime = true
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			t.Fatalf("open harness db: %v", err)
		}
		db = sql.OpenDB(c)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// qmarkConnector opens pgx connections whose statements take '?'
// placeholders.
type qmarkConnector struct{ driver.Connector }

func (c qmarkConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return qmarkConn{conn}, nil
}

type qmarkConn struct{ driver.Conn }

func (c qmarkConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, Placeholders(q), args)
}

func (c qmarkConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, Placeholders(q), args)
}

func (c qmarkConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, Placeholders(q))
}

func (c qmarkConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c qmarkConn) CheckNamedValue(v *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(v)
}

func (c qmarkConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

// Placeholders rewrites the '?' placeholders of q outside quotes into
// PostgreSQL's $1, $2, ... (store.Postgres.Placeholders).
func Placeholders(q string) string { return store.Postgres.Placeholders(q) }
