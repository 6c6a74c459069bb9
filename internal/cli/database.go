package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/secret"
	"github.com/erpsync/erpsync/internal/store"
)

// defaultMySQLDSN is --mysql-dsn's default: the database of a command
// given neither DSN.
const defaultMySQLDSN = "root@tcp(127.0.0.1:3306)/erpsync?parseTime=true"

// databaseFlags: the database, MySQL's DSN or PostgreSQL's (one of them),
// and the TLS files of MySQL (PostgreSQL's are named in its DSN).
func (s *settings) databaseFlags(fs *flag.FlagSet) {
	secretVar(fs, &s.MySQLDSN, "mysql-dsn", defaultMySQLDSN, "MySQL DSN (go-sql-driver format); the database is created by migrate; when neither DSN is given, the --config file's database: block names it")
	secretVar(fs, &s.PostgresDSN, "postgres-dsn", "", "PostgreSQL DSN, a postgres:// URL or a libpq key=value string: PostgreSQL (14+) is the database instead of MySQL; the database is created by migrate")
	fs.StringVar(&s.MySQLTLS.CA, "mysql-tls-ca", "", "PEM CA bundle that MySQL's certificate must chain to; turns TLS on (overrides the DSN's tls=)")
	fs.StringVar(&s.MySQLTLS.Cert, "mysql-tls-cert", "", "PEM client certificate for MySQL (with --mysql-tls-key); turns TLS on")
	fs.StringVar(&s.MySQLTLS.Key, "mysql-tls-key", "", "PEM private key of --mysql-tls-cert")
}

// exclusive are the pairs of settings of which a command takes one:
// parse refuses both given, by flags or variables in any mix.
var exclusive = [][2]string{{"mysql-dsn", "postgres-dsn"}}

// checkExclusive returns the usage errors of exclusive pairs both given
// (an empty value is none given, as an unset variable); given holds the
// flags of the command line.
func checkExclusive(fs *flag.FlagSet, given map[string]bool) []error {
	var errs []error
	for _, p := range exclusive {
		if isSet(fs, p[0]) && isSet(fs, p[1]) {
			errs = append(errs, fmt.Errorf("%s and %s both given: want one (the database is MySQL's or PostgreSQL's)", whence(p[0], given), whence(p[1], given)))
		}
	}
	return errs
}

// isSet reports whether the setting name was given a value, by a flag or
// a variable.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || (f.Name == name && f.Value.String() != "") })
	return set
}

// whence names a setting as it was given: its flag, its -file flag, or
// the environment variable it came from.
func whence(name string, given map[string]bool) string {
	switch {
	case given[name]:
		return "--" + name
	case given[name+"-file"]:
		return "--" + name + "-file"
	}
	if _, ok := os.LookupEnv(envName(name)); ok {
		return "--" + name + " (from " + envName(name) + ")"
	}
	return "--" + name + " (from " + envName(name+"-file") + ")"
}

// dialect is the database the settings name: PostgreSQL with
// --postgres-dsn, MySQL otherwise.
func (s *settings) dialect() store.Dialect {
	if s.PostgresDSN != "" {
		return store.Postgres
	}
	return store.MySQL
}

// database is the DSN of the database the settings name and the flag it
// came from: --postgres-dsn when given, --mysql-dsn otherwise (parse
// refuses both); the config file's database.dsn (FILE:LINE) when its
// database block gave it. A DSN that is not of its flag's form is a usage
// error that says which form, or which flag, is wanted.
func (s *settings) database() (dsn, flagName string, err error) {
	dsn, flagName = s.MySQLDSN, "--mysql-dsn"
	if s.dialect() == store.Postgres {
		dsn, flagName = s.PostgresDSN, "--postgres-dsn"
	}
	if err := checkDSN(dsn, flagName, s.dialect()); err != nil {
		return dsn, flagName, err
	}
	return dsn, cmp.Or(s.dsnFrom, flagName), nil
}

// checkDSN checks that dsn, of flagName, is a DSN of database d.
func checkDSN(dsn, flagName string, d store.Dialect) error {
	fix := ", and the database is MySQL's (--mysql-dsn): give --postgres-dsn too, or a MySQL DSN"
	if flagName == "--mysql-dsn" {
		fix = ": give it as --postgres-dsn (ERPSYNC_POSTGRES_DSN)"
	}
	if err := dsnOf(dsn, d, fix); err != nil {
		return usageError{fmt.Errorf("%s: %w", flagName, err)}
	}
	return nil
}

// dsnOf checks that dsn is a DSN of database d, and says which form is
// wanted when it is not: a PostgreSQL DSN where MySQL's is wanted is
// "that is a PostgreSQL DSN" followed by fix, what to give instead.
func dsnOf(dsn string, d store.Dialect, fix string) error {
	switch {
	case d == store.Postgres:
		_, err := store.ParsePostgresDSN(dsn)
		return err
	case store.DialectOf(dsn) == store.Postgres:
		return errors.New("that is a PostgreSQL DSN" + fix)
	}
	_, err := store.ParseDSN(dsn)
	return err
}

// applyFileDatabase sets the DSN from the config file's database block,
// --postgres-dsn for kind: postgres and --mysql-dsn for kind: mysql, when
// neither the command line nor the environment gave one (--mysql-dsn,
// --postgres-dsn, their variables or -file): a DSN given wins over the
// whole block, so that the two never mix into both given. The DSN must be
// of its kind's form (a usage error naming the file's line otherwise);
// its password is masked in the output from then on.
func (s *settings) applyFileDatabase(fs *flag.FlagSet, f *entity.File) error {
	if f.Database == nil || fs.Lookup("mysql-dsn") == nil || isSet(fs, "mysql-dsn") || isSet(fs, "postgres-dsn") {
		return nil
	}
	name, dsn, from, err := fileDSN(fs, f, true)
	if err != nil {
		return usageError{err}
	}
	s.dsnFrom = from
	return fs.Set(name, dsn)
}

// fileDSN returns the flag the file's database block stands for, its DSN
// (dsn, or with readFile the content of dsn_file; "" for a dsn_file not
// read) and where the DSN came from, database.dsn (FILE:LINE). The
// redactor of fs's output learns the DSN's password first. A DSN that is
// not of the block's kind is an error, FILE:LINE of dsn or dsn_file, that
// says which form is wanted (dsnOf, the flags' check).
func fileDSN(fs *flag.FlagSet, f *entity.File, readFile bool) (name, dsn, from string, err error) {
	db := f.Database
	name, d := "mysql-dsn", store.MySQL
	if db.Kind == entity.DatabasePostgres {
		name, d = "postgres-dsn", store.Postgres
	}
	key, dsn := "database.dsn", db.DSN
	if db.DSNFile != "" {
		if !readFile {
			return name, "", "", nil
		}
		key = "database.dsn_file"
		if dsn, err = secret.ReadFile(db.DSNFile); err != nil {
			return "", "", "", fmt.Errorf("%s:%d: %s: %w", f.Path, db.DSNLine, key, err)
		}
	}
	redact(fs, secretParts[name](dsn)...)
	fix := ": kind: mysql wants MySQL's user:pass@tcp(host:port)/db form; for PostgreSQL give kind: postgres"
	if err := dsnOf(dsn, d, fix); err != nil {
		return "", "", "", fmt.Errorf("%s:%d: %s (kind: %s): %w", f.Path, db.DSNLine, key, db.Kind, err)
	}
	return name, dsn, fmt.Sprintf("%s (%s:%d)", key, f.Path, db.DSNLine), nil
}

// databaseName is the name of the database dsn (a checked DSN) names.
func databaseName(dsn string) string {
	_, name, _ := store.Target(dsn)
	return name
}

// dsnPassword is the password a DSN of either form holds; the whole value
// when it does not parse (it may hold one all the same).
func dsnPassword(v string) []string {
	if store.DialectOf(v) == store.Postgres {
		cfg, err := store.ParsePostgresDSN(v)
		if err != nil {
			return []string{v}
		}
		return []string{cfg.Password}
	}
	cfg, err := mysql.ParseDSN(v)
	if err != nil {
		return []string{v}
	}
	return []string{cfg.Passwd}
}

// storeOptions are the store options the database flags describe for a
// database d. The --mysql-tls-* files are MySQL's: PostgreSQL's TLS is
// set in its DSN (sslmode=verify-full, sslrootcert=...), and the files
// given with PostgreSQL are a usage error.
func (s *settings) storeOptions(d store.Dialect) (*store.Options, error) {
	if d == store.Postgres {
		if !s.MySQLTLS.Empty() {
			return nil, usageError{errors.New("--mysql-tls-* are MySQL's: with --postgres-dsn give TLS in the DSN (sslmode=verify-full&sslrootcert=/path/ca.pem, sslcert= and sslkey= for a client certificate)")}
		}
		idle := idleTxTimeout(s.LockTTL)
		return &store.Options{IdleTxTimeout: idle, LockTimeout: 2 * idle}, nil
	}
	t, err := loadTLS("--mysql-tls-*", s.MySQLTLS)
	if err != nil {
		return nil, err
	}
	return &store.Options{TLS: t, IdleTxTimeout: idleTxTimeout(s.LockTTL)}, nil
}

// idleTxTimeout is how long a session of erpsync on PostgreSQL or MariaDB
// may sit idle inside a transaction before the server ends it
// (store.Options.IdleTxTimeout): the lock TTL, past which a process that
// stopped there (paused, frozen) has lost its record locks to other
// writers, whose writes of the same rows its open transaction would hold
// back until it wakes; 30s, --lock-ttl's default, for a command without
// record locks (the relay's --lock-ttl is its relay lock's, and its
// transactions are a few statements long); never under 10s, so that a
// busy machine's pause between two statements of a transaction does not
// end it. The process, when it wakes, finds its session gone and writes
// those records again under fresh locks.
//
// The PostgreSQL sessions' lock_timeout (store.Options.LockTimeout) is twice that: a
// write that waited so long on a row lock waits on a process paused in the
// middle of a statement, which the idle timeout does not end (its session
// is active), and fails, its records left to a later run, as InnoDB's
// waits end after innodb_lock_wait_timeout; twice, so that a session
// paused idle inside a transaction is ended before the writes that wait
// on it give up.
func idleTxTimeout(lockTTL time.Duration) time.Duration {
	if lockTTL <= 0 {
		lockTTL = 30 * time.Second
	}
	return max(lockTTL, 10*time.Second)
}

// openStore opens the database the settings name and checks its schema
// and the entities' tables.
// Failures are depErrors (exit 2), bad DSNs and TLS files usageErrors.
func (s *settings) openStore(ctx context.Context) (*store.Store, error) {
	return s.openStoreOf(ctx, s.entityList())
}

// openStoreOf is openStore checking the tables of ents alone: none for a
// command that reads only erpsync's own tables (the outbox, the run
// history), which a database migrated for a config file's entities has
// without the built-in memberships table.
func (s *settings) openStoreOf(ctx context.Context, ents []*entity.Entity) (*store.Store, error) {
	dsn, flagName, err := s.database()
	if err != nil {
		return nil, err
	}
	opt, err := s.storeOptions(s.dialect())
	if err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, dsn, opt)
	if errors.Is(err, store.ErrNoDatabase) {
		return nil, depError{fmt.Errorf("database %q does not exist: run erpsync migrate", databaseName(dsn))}
	}
	if err != nil {
		return nil, dbUnavailable(err, s.dialect(), flagName)
	}
	if err := st.CheckSchema(ctx); err != nil {
		st.Close()
		return nil, dbError(st, err)
	}
	if len(ents) > 0 {
		if err := checkEntities(ctx, st, ents); err != nil {
			st.Close()
			return nil, err
		}
	}
	return st, nil
}

// dbError is a failure of st's database: exit 2, the line starting with
// the database's name (mysql: or postgresql:).
func dbError(st *store.Store, err error) error {
	return depError{fmt.Errorf("%s: %w", st.Dialect(), err)}
}

// dbUnavailable is the exit-2 line of a database d that did not answer at
// start: where, what happened (refused, timed out) and what to check. The
// DSN came from dsnFlag.
func dbUnavailable(err error, d store.Dialect, dsnFlag string) error {
	var ce *store.ConnectError
	if errors.As(err, &ce) {
		d = ce.Dialect
	}
	product, bound := "MySQL", "timeout="
	if d == store.Postgres {
		product, bound = "PostgreSQL", "connect_timeout="
	}
	switch {
	case ce == nil:
	case ce.Refused:
		return depError{fmt.Errorf("%s at %s: connection refused: nothing listens there; check the host and port of %s", d, ce.Addr, dsnFlag)}
	case ce.Timeout > 0:
		return depError{fmt.Errorf("%s at %s: connection timed out after %s: no %s answered; check the host and port of %s and that no firewall drops the packets (%s in the DSN sets the bound)", d, ce.Addr, ce.Timeout, product, dsnFlag, bound)}
	}
	return depError{fmt.Errorf("%s: %w", d, err)}
}
