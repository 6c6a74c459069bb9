package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/erpsync/erpsync/internal/dberr"
	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/migrations"
)

// Migration is one versioned SQL file.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

var migrationName = regexp.MustCompile(`^(\d+)_([a-z0-9_]+)\.up\.sql$`)

// Migrations lists the embedded up-migrations of MySQL in version order.
// PostgreSQL's (MigrationsOf) have the same versions and names.
func Migrations() ([]Migration, error) { return MigrationsOf(MySQL) }

// MigrationsOf lists the embedded up-migrations of dialect d in version
// order.
func MigrationsOf(d Dialect) ([]Migration, error) {
	dir := "."
	if d == Postgres {
		dir = migrations.PostgresDir
	}
	entries, err := fs.ReadDir(migrations.FS, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		v, _ := strconv.Atoi(m[1])
		body, err := fs.ReadFile(migrations.FS, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		out = append(out, Migration{Version: v, Name: m[2], SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("read migrations: version %d twice", out[i].Version)
		}
	}
	return out, nil
}

// Statements are the statements of the migration, in order, without
// their terminating semicolons.
func (m Migration) Statements() []string { return statements(m.SQL) }

// statements splits a migration on semicolons that end a line and drops
// comment-only chunks.
func statements(sql string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(sql, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") || trimmed == "" {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// MigrateResult says what Migrate did.
type MigrateResult struct {
	Database        string
	CreatedDatabase bool
	Applied         []Migration
	Current         int
}

// Migrate creates the database named in dsn when it is missing and applies
// the embedded migrations not yet recorded in schema_migrations, for the
// built-in entity. Several instances may call it at once: they serialise
// on the migration lock (lockMigrations), and every statement is
// idempotent. A postgres:// or key=value DSN migrates PostgreSQL.
func Migrate(ctx context.Context, dsn string) (*MigrateResult, error) {
	return MigrateWith(ctx, dsn, nil, []*entity.Entity{entity.Memberships()})
}

// MigrateWith is Migrate with options, of which it uses TLS, for the
// entities ents: the migrations' statements on the built-in entity's
// table run only when one of ents has that table or the database has it
// already (numberedSteps).
func MigrateWith(ctx context.Context, dsn string, opt *Options, ents []*entity.Entity) (*MigrateResult, error) {
	var s *Store
	var res *MigrateResult
	var err error
	if DialectOf(dsn) == Postgres {
		s, res, err = createPostgres(ctx, dsn, opt)
	} else {
		s, res, err = createMySQL(ctx, dsn, opt)
	}
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ms, err := MigrationsOf(s.d)
	if err != nil {
		return nil, err
	}
	err = s.db.WithContext(ctx).Connection(func(conn *gorm.DB) error {
		release, err := lockMigrations(ctx, s.d, conn.Statement.ConnPool, res.Database)
		if err != nil {
			return err
		}
		defer release()

		if err := conn.Exec(schemaMigrationsSQL(s.d)).Error; err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		keyColl, err := keyCollationOf(ctx, s.d, conn.Statement.ConnPool)
		if err != nil {
			return err
		}
		var done []int
		if err := conn.Raw("SELECT version FROM schema_migrations").Scan(&done).Error; err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		applied := map[int]bool{}
		for _, v := range done {
			applied[v] = true
			if v > res.Current {
				res.Current = v
			}
		}
		_, tables, err := entityTables(ents, keyColl)
		if err != nil {
			return err
		}
		exists, err := hasTable(ctx, s.d, conn.Statement.ConnPool, MembershipsTable)
		if err != nil {
			return err
		}
		for _, m := range numberedSteps(ms, applied, wantsBuiltin(tables), exists) {
			if err := applyMigration(conn, s.d, m, keyColl, !applied[m.Version]); err != nil {
				return err
			}
			if applied[m.Version] {
				continue
			}
			res.Applied = append(res.Applied, m)
			res.Current = m.Version
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// createMySQL creates the MySQL database of dsn when it is missing, and
// opens it.
func createMySQL(ctx context.Context, dsn string, opt *Options) (*Store, *MigrateResult, error) {
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return nil, nil, err
	}
	o := Options{MaxOpenConns: 2, PingTimeout: cfg.Timeout}
	if opt != nil {
		o.TLS = opt.TLS
	}
	res := &MigrateResult{Database: cfg.DBName}

	// Create the database through a connection that names none.
	admin := cfg.Clone()
	admin.DBName = ""
	as, err := open(ctx, admin, o)
	if err != nil {
		return nil, nil, err
	}
	var n int64
	if err := as.db.WithContext(ctx).Raw("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", cfg.DBName).Scan(&n).Error; err != nil {
		as.Close()
		return nil, nil, fmt.Errorf("look up database: %w", err)
	}
	if n == 0 {
		err := as.db.WithContext(ctx).Exec(CreateDatabaseSQL(cfg.DBName)).Error
		if err != nil {
			as.Close()
			return nil, nil, createRefused(cfg.DBName, err, err.Error())
		}
		res.CreatedDatabase = true
	}
	as.Close()

	s, err := open(ctx, cfg, o)
	if err != nil {
		return nil, nil, err
	}
	return s, res, nil
}

// createRefused is migrate's error when it could not create the database
// name: err, written as msg (its password masked); a refusal for
// privileges says what to do instead.
func createRefused(name string, err error, msg string) error {
	if dberr.Denied(err) || dberr.LoginRefused(err) {
		return fmt.Errorf("create database %s: %s: this user may not create databases: create it as a user who may (migrate --plan prints the statement) and grant this one its privileges, or run migrate as that user (--migrate-dsn)", name, msg)
	}
	return fmt.Errorf("create database %s: %s", name, msg)
}

// createPostgres opens the PostgreSQL database of dsn, and creates it
// first when the server has none of that name (3D000), through a
// connection to the server's "postgres" database: a database that exists
// is migrated without one. Two migrates that create it at once both go
// on: the one whose CREATE DATABASE lost finds it there.
func createPostgres(ctx context.Context, dsn string, opt *Options) (*Store, *MigrateResult, error) {
	cfg, err := ParsePostgresDSN(dsn)
	if err != nil {
		return nil, nil, err
	}
	o := Options{MaxOpenConns: 2, PingTimeout: cfg.ConnectTimeout}
	if opt != nil {
		o.TLS = opt.TLS
	}
	res := &MigrateResult{Database: cfg.Database}
	s, err := openPostgres(ctx, cfg, o)
	if !errors.Is(err, ErrNoDatabase) {
		return s, res, err
	}
	admin := cfg.Copy()
	admin.Database = "postgres"
	as, err := openPostgres(ctx, admin, o)
	if err != nil {
		return nil, nil, err
	}
	_, cerr := as.sql.ExecContext(ctx, CreateDatabaseSQLFor(Postgres, cfg.Database))
	if cerr == nil {
		res.CreatedDatabase = true
	} else {
		var n int64
		if err := as.sql.QueryRowContext(ctx, "SELECT COUNT(*) FROM pg_database WHERE datname = $1", cfg.Database).Scan(&n); err != nil {
			as.Close()
			return nil, nil, fmt.Errorf("look up database: %w", err)
		}
		if n == 0 {
			as.Close()
			return nil, nil, createRefused(cfg.Database, cerr, as.conn.redact(cerr))
		}
	}
	as.Close()
	s, err = openPostgres(ctx, cfg, o)
	if err != nil {
		return nil, nil, err
	}
	return s, res, nil
}

// schemaMigrationsSQL creates the bookkeeping table of the numbered
// migrations.
func schemaMigrationsSQL(d Dialect) string {
	if d == Postgres {
		return `CREATE TABLE IF NOT EXISTS schema_migrations (
  version    integer NOT NULL PRIMARY KEY,
  name       varchar(255) NOT NULL,
  applied_at timestamptz(3) NOT NULL
)`
	}
	return `CREATE TABLE IF NOT EXISTS schema_migrations (
  version    INT NOT NULL PRIMARY KEY,
  name       VARCHAR(255) NOT NULL,
  applied_at DATETIME(3) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`
}

// applyMigration runs the statements of m on conn and, when record says
// so, its row in schema_migrations. On MySQL each statement commits on its
// own, and one whose change is in place already (alreadyApplied) is
// passed; on PostgreSQL, whose DDL is transactional, the statements and
// the row commit together or not at all, and every statement of its
// migrations is idempotent (IF NOT EXISTS).
func applyMigration(conn *gorm.DB, d Dialect, m Migration, keyColl string, record bool) error {
	run := func(tx *gorm.DB) error {
		// A new statement each Exec: the connection Migrate holds is one
		// gorm chain, which would carry a passed error on to the next
		// statement and fail it.
		tx = tx.Session(&gorm.Session{})
		for _, stmt := range statements(dialectSQL(m.SQL, keyColl)) {
			if err := tx.Exec(stmt).Error; err != nil && (d == Postgres || !alreadyApplied(err)) {
				return fmt.Errorf("apply migration %03d_%s: %w", m.Version, m.Name, err)
			}
		}
		if !record {
			return nil
		}
		insert := "INSERT IGNORE INTO schema_migrations (version, name, applied_at) VALUES (?, ?, UTC_TIMESTAMP(3))"
		if d == Postgres {
			insert = "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, CURRENT_TIMESTAMP(3)) ON CONFLICT (version) DO NOTHING"
		}
		if err := tx.Exec(insert, m.Version, m.Name).Error; err != nil {
			return fmt.Errorf("record migration %03d_%s: %w", m.Version, m.Name, err)
		}
		return nil
	}
	if d == Postgres {
		return conn.Transaction(run)
	}
	return run(conn)
}

// lockMigrations takes the migration lock of database db on the
// connection q, held until release or until the connection ends: a MySQL
// named lock (GET_LOCK), or a PostgreSQL session advisory lock. Migrate
// and ApplyEntities take it, so that several instances migrating at once
// take turns. Either waits 60s at most.
func lockMigrations(ctx context.Context, d Dialect, q querier, db string) (release func(), err error) {
	name := "erpsync_migrate:" + db
	if d == Postgres {
		return lockMigrationsPostgres(ctx, q, name)
	}
	var got sql.NullInt64
	if err := q.QueryRowContext(ctx, "SELECT GET_LOCK(?, 60)", name).Scan(&got); err != nil {
		return nil, fmt.Errorf("take migration lock: %w", err)
	}
	if !got.Valid || got.Int64 != 1 {
		return nil, errMigrationLockTimeout
	}
	return func() { _, _ = q.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", name) }, nil
}

var errMigrationLockTimeout = errors.New("take migration lock: timed out after 60s (another migrate is running?)")

// lockMigrationsPostgres takes the session advisory lock of name (its
// 64-bit hash; advisory locks are per database), trying again until 60s
// have passed: pg_advisory_lock would wait without a bound.
func lockMigrationsPostgres(ctx context.Context, q querier, name string) (release func(), err error) {
	deadline := time.Now().Add(60 * time.Second)
	wait := 10 * time.Millisecond
	for {
		var got bool
		if err := q.QueryRowContext(ctx, "SELECT pg_try_advisory_lock(hashtextextended($1, 0))", name).Scan(&got); err != nil {
			return nil, fmt.Errorf("take migration lock: %w", err)
		}
		if got {
			return func() {
				_, _ = q.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(hashtextextended($1, 0))", name)
			}, nil
		}
		if time.Now().After(deadline) {
			return nil, errMigrationLockTimeout
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("take migration lock: %w", ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 250*time.Millisecond)
	}
}

// alreadyApplied reports whether err says that a statement's change is in
// place already: a column or index added before (1060 ER_DUP_FIELDNAME,
// 1061 ER_DUP_KEYNAME). ALTER TABLE has no IF NOT EXISTS that both MySQL 8
// and MariaDB accept, and a crash between a statement and the bookkeeping
// row must not wedge the schema.
func alreadyApplied(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1060 || me.Number == 1061)
}

// CheckSchema returns ErrNotMigrated unless every embedded migration has
// been applied.
func (s *Store) CheckSchema(ctx context.Context) error {
	ms, err := MigrationsOf(s.d)
	if err != nil {
		return err
	}
	var current *int
	err = s.db.WithContext(ctx).Raw("SELECT MAX(version) FROM schema_migrations").Scan(&current).Error
	if err != nil {
		if dberr.PgCode(err) == pgUndefinedTable || strings.Contains(err.Error(), "1146") || strings.Contains(err.Error(), "doesn't exist") {
			return ErrNotMigrated
		}
		return fmt.Errorf("read schema version: %w", err)
	}
	want := ms[len(ms)-1].Version
	if current == nil || *current < want {
		have := 0
		if current != nil {
			have = *current
		}
		return fmt.Errorf("%w: database at version %d, binary needs %d", ErrNotMigrated, have, want)
	}
	return nil
}
