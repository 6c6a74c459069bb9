package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
	gormpg "gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/erpsync/erpsync/internal/dberr"
	"github.com/erpsync/erpsync/internal/outbox"
)

// PostgreSQL's SQLSTATE codes the store tells apart.
const (
	pgUniqueViolation  = "23505"
	pgDeadlock         = "40P01"
	pgSerialization    = "40001"
	pgLockNotAvailable = "55P03"
	pgUndefinedTable   = "42P01"
	pgDuplicateColumn  = "42701"
	pgDuplicateObject  = "42710"
	pgDuplicateTable   = "42P07"
	pgNoDatabase       = "3D000"
	pgIdleTxEnded      = "25P03"
	// pgTooManyConnections is too_many_connections: max_connections, or
	// a role's or a database's CONNECTION LIMIT.
	pgTooManyConnections = "53300"
)

// ParsePostgresDSN parses a postgres:// URL or a libpq key=value string
// and sets what erpsync relies on: the session's time zone UTC (a
// timestamptz reads and writes as UTC), the simple protocol (statements
// carry their values written in, and a prepared statement per text would
// be one round trip more and a cache that never hits), and a connect
// timeout of 5s when the DSN has none. A DSN of MySQL's form is refused
// with a line that says which form is wanted.
func ParsePostgresDSN(dsn string) (*pgx.ConnConfig, error) {
	if DialectOf(dsn) != Postgres {
		return nil, errors.New("parse postgres dsn: want a postgres:// URL (postgres://user@host:5432/db?sslmode=disable) or a libpq key=value string (host=... dbname=...), not MySQL's user@tcp(host:port)/db form")
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse postgres dsn: %w", err)
	}
	if cfg.Database == "" {
		return nil, errors.New("parse postgres dsn: no database name (want postgres://user@host:5432/dbname)")
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	cfg.RuntimeParams["timezone"] = "UTC"
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "erpsync"
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	return cfg, nil
}

func openPostgresDSN(ctx context.Context, dsn string, opt *Options) (*Store, error) {
	cfg, err := ParsePostgresDSN(dsn)
	if err != nil {
		return nil, err
	}
	return openPostgres(ctx, cfg, opt.withDefaults(cfg.ConnectTimeout))
}

// The session settings Options.IdleTxTimeout and Options.LockTimeout set.
const (
	pgIdleTxTimeout = "idle_in_transaction_session_timeout"
	pgLockTimeout   = "lock_timeout"
)

// pgAddr is host:port of a connection's configuration.
func pgAddr(cfg *pgx.ConnConfig) string {
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}

func openPostgres(ctx context.Context, cfg *pgx.ConnConfig, o Options) (*Store, error) {
	cfg = cfg.Copy() // the caller's stays as it was
	if o.TLS != nil {
		cfg.TLSConfig = o.TLS.Clone()
		cfg.Fallbacks = nil
	}
	for name, d := range map[string]time.Duration{pgIdleTxTimeout: o.IdleTxTimeout, pgLockTimeout: o.LockTimeout} {
		if _, set := cfg.RuntimeParams[name]; d > 0 && !set {
			cfg.RuntimeParams[name] = strconv.FormatInt(max(d.Milliseconds(), 1), 10)
		}
	}
	info := connInfo{addr: pgAddr(cfg), db: cfg.Database, password: cfg.Password}
	pool := patientPool(stdlib.GetConnector(*cfg, stdlib.OptionAfterConnect(utcTimes)), pgFull, o.MaxOpenConns)
	pctx, cancel := context.WithTimeout(ctx, o.PingTimeout)
	defer cancel()
	if err := pool.PingContext(pctx); err != nil {
		pool.Close()
		return nil, pgUnavailable(err, info, o.PingTimeout)
	}
	db, err := gorm.Open(gormpg.New(gormpg.Config{Conn: pool}), &gorm.Config{
		Logger:                 logger.Discard,
		TranslateError:         true,
		SkipDefaultTransaction: true,
		DisableAutomaticPing:   true,
	})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("%w at %s: %s", ErrUnavailable, info.addr, info.redact(err))
	}
	pool.SetConnMaxLifetime(30 * time.Minute)
	// Events are recorded with PostgreSQL's INSERT ... ON CONFLICT DO
	// NOTHING: COPY has no ON CONFLICT, and the outbox's UNIQUE index
	// must drop a change recorded twice.
	rec := outbox.NewPostgresRecorder()
	notify := outbox.NewNotifier(pool, outbox.NotifyEvery)
	return &Store{db: db, sql: pool, d: Postgres, conn: info, rec: rec, notify: notify, t: memberships.in(Postgres)}, nil
}

// utcTimes makes a connection read timestamptz values in time.UTC, as
// MySQL's DATETIME reads with loc=UTC: pgx reads them in an unnamed zone
// of offset 0, which prints "+00:00" where a time.UTC prints "Z".
func utcTimes(_ context.Context, c *pgx.Conn) error {
	c.TypeMap().RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}})
	return nil
}

// pgUnavailable translates a failure to reach PostgreSQL within bound:
// ErrNoDatabase for 3D000, a *ConnectError otherwise.
func pgUnavailable(err error, info connInfo, bound time.Duration) error {
	if dberr.PgCode(err) == pgNoDatabase {
		return fmt.Errorf("%w: %q at %s", ErrNoDatabase, info.db, info.addr)
	}
	ce := &ConnectError{Dialect: Postgres, Addr: info.addr, Err: errors.New(info.redact(err))}
	var ne net.Error
	switch {
	case dberr.LoginRefused(err):
		ce.Login = true
	case errors.Is(err, syscall.ECONNREFUSED):
		ce.Refused = true
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		ce.Timeout = bound
	}
	return ce
}
