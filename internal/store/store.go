package store

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/erpsync/erpsync/internal/dberr"
	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/outbox"
)

var (
	// ErrDuplicate is returned when an insert hit the UNIQUE index on erp_id.
	ErrDuplicate = errors.New("store: duplicate erp_id")
	// ErrFenced is returned when a checkpoint write carried an older fencing
	// token than the one stored.
	ErrFenced = errors.New("store: refused by fencing token")
	// ErrNotMigrated is returned by CheckSchema when migrations are missing.
	ErrNotMigrated = errors.New("store: schema not migrated (run `erpsync migrate`)")
	// ErrUnavailable wraps a failure to reach the database.
	ErrUnavailable = errors.New("store: mysql unavailable")
	// ErrNoDatabase is a server that answers but has no database of the
	// DSN's name (MySQL 1049): migrate creates it.
	ErrNoDatabase = errors.New("store: database does not exist")
)

// ConnectError is a MySQL server that could not be reached at Addr:
// nothing listens there (Refused), or nothing answered within Timeout.
// It matches ErrUnavailable.
type ConnectError struct {
	// Dialect is the database that could not be reached.
	Dialect Dialect
	Addr    string
	Refused bool
	// Login is a server that answered and refused the login: the user,
	// the password or the user's right to the database.
	Login bool
	// Timeout is the bound that passed without an answer: the dial or the
	// handshake did not finish within it. Zero for other failures.
	Timeout time.Duration
	Err     error
}

// Error says in one phrase what happened where.
func (e *ConnectError) Error() string {
	switch {
	case e.Refused:
		return fmt.Sprintf("store: %s at %s: connection refused", e.Dialect, e.Addr)
	case e.Timeout > 0:
		return fmt.Sprintf("store: %s at %s: connection timed out after %s", e.Dialect, e.Addr, e.Timeout)
	case e.Login:
		return fmt.Sprintf("store: %s at %s refuses the login: %v: check the user and password of the DSN, and the user's right to the database", e.Dialect, e.Addr, e.Err)
	}
	if e.Dialect == Postgres {
		return fmt.Sprintf("store: postgresql unavailable at %s: %v", e.Addr, e.Err)
	}
	return fmt.Sprintf("%v at %s: %v", ErrUnavailable, e.Addr, e.Err)
}

// Is makes a ConnectError match ErrUnavailable.
func (e *ConnectError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap is the driver's error.
func (e *ConnectError) Unwrap() error { return e.Err }

// Options tune a Store. The zero value is usable.
type Options struct {
	// MaxOpenConns bounds the connection pool. Defaults to 32.
	MaxOpenConns int
	// PingTimeout bounds the connection check in Open: the dial, the
	// handshake and the first ping. Defaults to the DSN's timeout= (5s
	// when it has none).
	PingTimeout time.Duration
	// TLS, when set, encrypts every connection with this client
	// configuration (a custom CA, say) and takes precedence over the DSN's
	// tls parameter. Defaults to nil: the DSN decides.
	TLS *tls.Config
	// NoLoadData records change events with an INSERT, never a LOAD DATA
	// LOCAL INFILE: for a server that answers a load with an error other
	// than a refusal (the embedded server of `erpsync demo`). Defaults to
	// false: a load, and an INSERT once the server refuses loads.
	NoLoadData bool
	// IdleTxTimeout is the sessions' idle_in_transaction_session_timeout
	// on PostgreSQL, and their idle_transaction_timeout (in seconds,
	// rounded up) on MariaDB 10.3 and later, unless the DSN sets it: the
	// server ends a session left idle inside a transaction this long and
	// rolls the transaction back. A process paused mid-transaction would
	// otherwise hold its uncommitted rows' locks until it wakes, and every
	// other writer of those rows would wait on them: without a bound on
	// PostgreSQL (the server's lock_timeout is 0), on MariaDB for
	// innodb_lock_wait_timeout a statement, each try. Defaults to 0: the
	// server's setting. MySQL has no such setting and ignores it
	// (InnoDB's waits end after innodb_lock_wait_timeout).
	IdleTxTimeout time.Duration
	// LockTimeout, on PostgreSQL, is the sessions' lock_timeout unless the
	// DSN sets one: a statement that waits this long for a lock fails
	// (SQLSTATE 55P03) instead of waiting on. It bounds the wait behind a
	// process paused in the middle of a statement (a COPY whose rows it
	// had not all sent), whose session is active, not idle, and which
	// IdleTxTimeout does not end; as innodb_lock_wait_timeout bounds
	// InnoDB's. Defaults to 0: the server's setting (0, no bound). MySQL
	// ignores it.
	LockTimeout time.Duration
}

// withDefaults is a copy of opt (nil: the zero Options) with its defaults
// filled: 32 connections, and ping, the DSN's connect timeout, as the
// bound of the first ping.
func (opt *Options) withDefaults(ping time.Duration) Options {
	o := Options{}
	if opt != nil {
		o = *opt
	}
	if o.MaxOpenConns <= 0 {
		o.MaxOpenConns = 32
	}
	if o.PingTimeout <= 0 {
		o.PingTimeout = ping
	}
	return o
}

// Store is a handle on erpsync's MySQL database. It is safe for concurrent use.
type Store struct {
	db  *gorm.DB
	sql *sql.DB
	d   Dialect
	// conn names the server and database in errors, and the password
	// they must not show.
	conn connInfo
	cfg  *mysql.Config // MySQL's parsed DSN; nil on PostgreSQL
	// rec records the change events of the writes, shared by the Stores
	// For and Scoped return: it remembers a server that refused a load.
	rec *outbox.Recorder
	// notify tells a listening relay of commits that recorded events,
	// shared like rec; nil on MySQL, which has no notifications.
	notify *outbox.Notifier
	t      *Table // the entity table the row methods write
	// scope is the WHERE test of the rows ScanRows reads ("" for all): the
	// rows of one source of an entity of several.
	scope string
}

// memberships is the built-in entity's table, what a Store writes until
// For binds it to another.
var memberships = mustCompile(entity.Memberships())

// For returns a Store on the same connections that writes t's table.
func (s *Store) For(t *Table) *Store {
	c := *s
	c.t = t
	if t != nil && t.twins != nil {
		c.t = t.in(s.d)
	}
	return &c
}

// Scoped returns a Store whose ScanRows reads only the rows whose columns
// hold the given values (column name to value, as a source's constants
// are): the rows of one source of an entity read from several, which a
// verify or reconcile of that source compares with its feed. nil or empty
// reads every row.
func (s *Store) Scoped(set map[string]string) *Store {
	c := *s
	c.scope = ""
	if len(set) == 0 {
		return &c
	}
	l := newLiteral(s.d)
	defer l.free()
	first := true
	for i, col := range s.t.ent.Columns { // in column order: the same text whatever the map's order
		v, ok := set[col.Name]
		if !ok {
			continue
		}
		if !first {
			l.sql(" AND ")
		}
		first = false
		l.ident(col.Name)
		l.sql(" = ")
		l.keyPart(s.t.kinds[i], v)
	}
	c.scope = l.text()
	return &c
}

// Memberships returns the built-in memberships entity's table.
func Memberships() *Table { return memberships }

// Table returns the entity table the store writes.
func (s *Store) Table() *Table { return s.t }

// ParseDSN parses a go-sql-driver DSN and sets what erpsync relies on:
// parseTime, UTC, client-side interpolation (one round trip a statement) and
// dial, read and write timeouts when the DSN has none.
func ParseDSN(dsn string) (*mysql.Config, error) {
	if scheme, _, ok := strings.Cut(dsn, "://"); ok && !strings.ContainsAny(scheme, "@(/") {
		return nil, fmt.Errorf("parse mysql dsn: a %s:// URL: want the go-sql-driver form user:pass@tcp(host:port)/db?parseTime=true", scheme)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse mysql dsn: %w", err)
	}
	if cfg.DBName == "" {
		return nil, errors.New("parse mysql dsn: no database name (want user@tcp(host:port)/dbname)")
	}
	if strings.ContainsAny(cfg.DBName, "`\x00/\\.") {
		return nil, fmt.Errorf("parse mysql dsn: invalid database name %q", cfg.DBName)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 60 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 60 * time.Second
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if _, ok := cfg.Params["time_zone"]; !ok {
		cfg.Params["time_zone"] = "'+00:00'"
	}
	return cfg, nil
}

// connInfo is what errors say of a connection: the server's address, the
// database, and the password to keep out of them.
type connInfo struct {
	addr, db, password string
}

// redact keeps the password out of an error message.
func (c connInfo) redact(err error) string {
	msg := err.Error()
	if c.password != "" {
		msg = strings.ReplaceAll(msg, c.password, "***")
	}
	return msg
}

// Open connects to the database named in dsn and checks that it answers.
// The DSN's form says which database it is (DialectOf): a postgres:// URL
// or a libpq key=value string opens PostgreSQL, anything else MySQL. It
// does not create or migrate anything; see Migrate.
func Open(ctx context.Context, dsn string, opt *Options) (*Store, error) {
	if DialectOf(dsn) == Postgres {
		return openPostgresDSN(ctx, dsn, opt)
	}
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	return open(ctx, cfg, opt.withDefaults(cfg.Timeout))
}

func open(ctx context.Context, cfg *mysql.Config, o Options) (*Store, error) {
	if o.TLS != nil {
		cfg = cfg.Clone()
		cfg.TLS = o.TLS.Clone()
		cfg.TLSConfig = ""
	}
	pool, err := connect(ctx, cfg, o)
	if err != nil {
		return nil, err
	}
	if idle := withIdleTxTimeout(ctx, pool, cfg, o.IdleTxTimeout, o.PingTimeout); idle != cfg {
		pool.Close()
		cfg = idle
		if pool, err = connect(ctx, cfg, o); err != nil {
			return nil, err
		}
	}
	db, err := gorm.Open(gormmysql.New(gormmysql.Config{Conn: pool, DSNConfig: cfg}), &gorm.Config{
		Logger:                 logger.Discard,
		TranslateError:         true,
		SkipDefaultTransaction: true,
		DisableAutomaticPing:   true,
	})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("%w at %s: %s", ErrUnavailable, cfg.Addr, redact(err, cfg))
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	sqlDB.SetConnMaxLifetime(30 * time.Minute)
	rec := new(outbox.Recorder)
	if o.NoLoadData {
		rec = outbox.NewInsertRecorder()
	}
	info := connInfo{addr: cfg.Addr, db: cfg.DBName, password: cfg.Passwd}
	return &Store{db: db, sql: sqlDB, d: MySQL, conn: info, cfg: cfg, rec: rec, t: memberships}, nil
}

// connect opens a pool of o.MaxOpenConns on cfg and pings it within
// o.PingTimeout: gorm.Open asks the version without a deadline, and an
// unreachable host cost the dial timeout once per retry.
func connect(ctx context.Context, cfg *mysql.Config, o Options) (*sql.DB, error) {
	bound := o.PingTimeout
	// A connector, not a DSN string: a tls.Config has no DSN form.
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("open mysql: %s", redact(err, cfg))
	}
	pool := patientPool(conn, mysqlFull, o.MaxOpenConns)
	pctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if err := pool.PingContext(pctx); err != nil {
		pool.Close()
		return nil, unavailable(err, cfg, bound)
	}
	return pool, nil
}

// myIdleTxTimeout is MariaDB's session setting of Options.IdleTxTimeout,
// in whole seconds; MySQL has none.
const myIdleTxTimeout = "idle_transaction_timeout"

// withIdleTxTimeout is cfg with MariaDB's idle_transaction_timeout set to
// d, rounded up to a second, when the server of pool has that setting
// (MariaDB 10.3 and later; asked within bound) and cfg does not set it
// itself; else cfg unchanged.
func withIdleTxTimeout(ctx context.Context, pool *sql.DB, cfg *mysql.Config, d, bound time.Duration) *mysql.Config {
	if _, set := cfg.Params[myIdleTxTimeout]; d <= 0 || set {
		return cfg
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var name, value string
	err := pool.QueryRowContext(ctx, `SHOW VARIABLES LIKE 'idle\_transaction\_timeout'`).Scan(&name, &value)
	if err != nil {
		// MySQL (no such row), or a server that would not say: InnoDB's
		// innodb_lock_wait_timeout still bounds the waits.
		return cfg
	}
	params := maps.Clone(cfg.Params)
	if params == nil {
		params = map[string]string{}
	}
	params[myIdleTxTimeout] = strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
	cfg = cfg.Clone()
	cfg.Params = params
	return cfg
}

// unavailable translates a failure to reach the database within bound:
// ErrNoDatabase for MySQL's 1049, a *ConnectError otherwise. A dial that
// ran out of time and a server that accepted the connection but sent no
// handshake (a blackhole, a proxy with nothing behind it) both time out.
func unavailable(err error, cfg *mysql.Config, bound time.Duration) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1049 {
		return fmt.Errorf("%w: %q at %s", ErrNoDatabase, cfg.DBName, cfg.Addr)
	}
	ce := &ConnectError{Addr: cfg.Addr, Err: errors.New(redact(err, cfg))}
	var ne net.Error
	var oe *net.OpError
	switch {
	case dberr.LoginRefused(err):
		ce.Login = true
	case errors.Is(err, syscall.ECONNREFUSED):
		ce.Refused = true
	case errors.As(err, &oe) && oe.Op == "dial" && oe.Timeout():
		ce.Timeout = min(bound, cfg.Timeout)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		ce.Timeout = bound
	}
	return ce
}

// redact keeps a password out of an error message.
func redact(err error, cfg *mysql.Config) string {
	return connInfo{password: cfg.Passwd}.redact(err)
}

// Close sends the notification still due (PostgreSQL) and closes the
// connection pool.
func (s *Store) Close() error {
	if s.notify != nil {
		s.notify.Close()
	}
	return s.sql.Close()
}

// DB returns the underlying gorm handle.
func (s *Store) DB() *gorm.DB { return s.db }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.sql.PingContext(ctx); err != nil {
		return fmt.Errorf("%w: %s", ErrUnavailable, s.conn.redact(err))
	}
	return nil
}

// DatabaseName is the name of the database the store is connected to.
func (s *Store) DatabaseName() string { return s.conn.db }

// Dialect is the SQL the store's database speaks.
func (s *Store) Dialect() Dialect { return s.d }

// isDuplicate reports whether err is MySQL's ER_DUP_ENTRY or PostgreSQL's
// unique_violation.
func isDuplicate(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1062
	}
	return dberr.PgCode(err) == pgUniqueViolation || errors.Is(err, gorm.ErrDuplicatedKey)
}

// isTransient reports whether err is a deadlock (MySQL 1213, PostgreSQL
// 40P01), a lock wait timeout (1205, 55P03) or a serialization failure
// (40001): the statement may simply be run again.
func isTransient(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1213 || me.Number == 1205
	}
	switch dberr.PgCode(err) {
	case pgDeadlock, pgLockNotAvailable, pgSerialization:
		return true
	}
	return false
}

// execRetrying runs a statement, and runs it again after a deadlock or a
// lock wait timeout (retrying).
func (s *Store) execRetrying(ctx context.Context, query string, args ...any) (res sql.Result, err error) {
	err = retrying(func() (err error) {
		res, err = s.sql.ExecContext(ctx, s.d.Placeholders(query), args...)
		return err
	})
	return res, err
}

// retryable reports whether err is transient (isTransient) or one of also
// says it may be retried.
func retryable(err error, also []func(error) bool) bool {
	if isTransient(err) {
		return true
	}
	for _, ok := range also {
		if ok(err) {
			return true
		}
	}
	return false
}

// retrying runs fn, and runs it again after a deadlock or a lock wait
// timeout, or an error also says may be retried, five times at most.
func retrying(fn func() error, also ...func(error) bool) (err error) {
	for attempt := 0; attempt < 5; attempt++ {
		if err = fn(); err == nil || !retryable(err, also) {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 20 * time.Millisecond)
	}
	return err
}
