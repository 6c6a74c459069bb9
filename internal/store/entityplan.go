package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/erpsync/erpsync/internal/dberr"
	"github.com/erpsync/erpsync/internal/entity"
)

// LossyChangeError is PlanEntities' refusal of a change to an entity's
// table that could lose data: a column dropped from the config file while
// the table has it, a narrower string or decimal, a changed type or key, a
// nullable column made NOT NULL, a new NOT NULL column on a table with
// rows. Nothing was changed.
type LossyChangeError struct {
	Table string
	// Subject is what would change: "column credit_limit", "the key".
	Subject string
	// File and Database are what the config file declares and what the
	// database has: "string(40)", "string(80)"; "absent" for a column one
	// of them lacks.
	File, Database string
	// Loss says what the change would lose, Fix how to proceed.
	Loss, Fix string
}

func (e *LossyChangeError) Error() string {
	return fmt.Sprintf("table %s: %s is %s in the config file, %s in the database: %s; %s",
		e.Table, e.Subject, e.File, e.Database, e.Loss, e.Fix)
}

// SchemaMismatchError is CheckEntities' refusal: an entity's table does not
// match the config file. It matches ErrNotMigrated (errors.Is).
type SchemaMismatchError struct {
	Table string
	// Subject is what differs ("column credit_limit", "the key", "the
	// index on quarantined_at"); empty when the table does not exist.
	Subject string
	// File and Database are what the config file declares and what the
	// database has ("absent" for a column one of them lacks).
	File, Database string
}

func (e *SchemaMismatchError) Error() string {
	if e.Subject == "" {
		return fmt.Sprintf("table %s does not exist; run erpsync migrate", e.Table)
	}
	return fmt.Sprintf("table %s: %s is %s in the config file, %s in the database; run erpsync migrate",
		e.Table, e.Subject, e.File, e.Database)
}

// Is reports whether target is ErrNotMigrated.
func (e *SchemaMismatchError) Is(target error) bool { return target == ErrNotMigrated }

// EntityPlan is what migrate would do to the entities' tables: the
// statements PlanEntities found, against the database as it was then.
type EntityPlan struct {
	// Entities are the entities planned for.
	Entities []*entity.Entity
	// Pending are the numbered migrations (migrations/) the database still
	// lacks, as Migrate runs them for these entities (numberedSteps): it
	// applies them before the entities' statements, and the plan assumes
	// the tables they make.
	Pending []Migration
	// Statements are the DDL to run, in order; none when every table
	// matches its entity.
	Statements []string

	// record are the definitions to record in erpsync_entities: those
	// that differ from the recorded ones.
	record []recordedEntity
}

// Empty reports whether the plan changes nothing: no pending migration and
// no statement.
func (p *EntityPlan) Empty() bool { return len(p.Pending) == 0 && len(p.Statements) == 0 }

// recordedEntity is a row of erpsync_entities.
type recordedEntity struct {
	name, table, definition string
}

// definition is the canonical JSON of what an entity declares of its
// table and its cursor: the row erpsync_entities keeps of it.
func definition(e *entity.Entity) (string, error) {
	type column struct {
		Name     string            `json:"name"`
		From     []string          `json:"from,omitempty"`
		Type     string            `json:"type"`
		Nullable bool              `json:"nullable,omitempty"`
		Values   map[string]string `json:"values,omitempty"`
	}
	type child struct {
		Name    string   `json:"name"`
		Table   string   `json:"table"`
		From    []string `json:"from,omitempty"`
		Key     []string `json:"key"`
		Columns []column `json:"columns"`
	}
	d := struct {
		Name      string   `json:"name"`
		Table     string   `json:"table"`
		Key       []string `json:"key"`
		UpdatedAt []string `json:"updated_at"`
		Version   []string `json:"version,omitempty"`
		Columns   []column `json:"columns"`
		// Children is absent for an entity without: its definition is
		// the one recorded before there were children.
		Children []child `json:"children,omitempty"`
	}{Name: e.Name, Table: e.TableName(), Key: e.Key, UpdatedAt: e.UpdatedAt, Version: e.Version}
	columns := func(cs []entity.Column) []column {
		out := make([]column, 0, len(cs))
		for _, c := range cs {
			out = append(out, column{Name: c.Name, From: c.From, Type: c.Type.String(), Nullable: c.Nullable, Values: c.Values})
		}
		return out
	}
	d.Columns = columns(e.Columns)
	for _, c := range e.Children {
		d.Children = append(d.Children, child{Name: c.Name, Table: childTable(c), From: c.From, Key: c.Key, Columns: columns(c.Columns)})
	}
	// encoding/json writes struct fields in order and map keys sorted.
	b, err := json.Marshal(d)
	if err != nil {
		return "", fmt.Errorf("entity %s: encode definition: %w", e.Name, err)
	}
	return string(b), nil
}

// PlanEntities compares each entity with its live table and with the
// definition the last migrate recorded, and returns what ApplyEntities
// would run: CREATE TABLE for a new entity; ADD COLUMN for a new column;
// MODIFY (on PostgreSQL, ALTER COLUMN ... TYPE or DROP NOT NULL) for a
// longer string, a wider decimal or a NOT NULL column made nullable;
// nothing where the table matches. A change that could lose
// data is refused with a *LossyChangeError, and nothing is planned.
func (s *Store) PlanEntities(ctx context.Context, ents []*entity.Entity) (*EntityPlan, error) {
	// Under the migrations' lock: information_schema is not
	// transactional, and a table another instance is creating at that
	// moment may show only some of its columns.
	var p *EntityPlan
	err := s.underMigrationLock(ctx, func(conn *sql.Conn) (err error) {
		p, err = plan(ctx, s.d, conn, ents)
		return err
	})
	return p, err
}

// underMigrationLock runs fn on one connection that holds the lock of the
// database's migrations.
func (s *Store) underMigrationLock(ctx context.Context, fn func(conn *sql.Conn) error) error {
	conn, err := s.sql.Conn(ctx)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrUnavailable, s.conn.redact(err))
	}
	defer conn.Close()
	release, err := lockMigrations(ctx, s.d, conn, s.conn.db)
	if err != nil {
		return err
	}
	defer release()
	return fn(conn)
}

func plan(ctx context.Context, dl Dialect, q querier, ents []*entity.Entity) (*EntityPlan, error) {
	p := &EntityPlan{Entities: ents}
	keyColl, err := keyCollationOf(ctx, dl, q)
	if err != nil {
		return nil, err
	}
	defs, tables, err := entityTables(ents, keyColl)
	if err != nil {
		return nil, err
	}
	pending, err := pendingMigrations(ctx, dl, q, wantsBuiltin(tables))
	if err != nil {
		return nil, err
	}
	for i := range pending {
		pending[i].SQL = dialectSQL(pending[i].SQL, keyColl)
	}
	p.Pending = pending
	live, err := readTables(ctx, dl, q, tables)
	if err != nil {
		return nil, err
	}
	recorded, err := readRecorded(ctx, q)
	if err != nil {
		return nil, err
	}
	for i, e := range ents {
		for _, d := range defs[i] {
			t := live[d.name]
			if len(pending) > 0 && d.name == MembershipsTable {
				// The pending migrations bring memberships to the table the
				// built-in entity declares.
				builtin, err := tableDefs(entity.Memberships(), keyColl)
				if err != nil {
					return nil, err
				}
				t = shippedTable(builtin[0])
			}
			stmts, err := planTable(ctx, dl, q, d, t, live[d.name] != nil)
			if err != nil {
				return nil, err
			}
			p.Statements = append(p.Statements, stmts...)
		}
		def, err := definition(e)
		if err != nil {
			return nil, err
		}
		if r, ok := recorded[e.Name]; !ok || r != (recordedEntity{e.Name, e.TableName(), def}) {
			p.record = append(p.record, recordedEntity{e.Name, e.TableName(), def})
		}
	}
	return p, nil
}

// entityTables are the tables of each of ents (tableDefs, their key
// strings of collation keyColl) and all their names.
func entityTables(ents []*entity.Entity, keyColl string) (defs [][]tableDef, names []string, err error) {
	defs = make([][]tableDef, len(ents))
	for i, e := range ents {
		if defs[i], err = tableDefs(e, keyColl); err != nil {
			return nil, nil, err
		}
		for _, d := range defs[i] {
			names = append(names, d.name)
		}
	}
	return defs, names, nil
}

// planTable is the statements of dialect dl that bring the live table t
// (nil: none) to d. exists says whether the table is there to read rows
// from.
func planTable(ctx context.Context, dl Dialect, q querier, d tableDef, t *liveTable, exists bool) ([]string, error) {
	table := d.name
	// after are PostgreSQL's statements that follow the ALTER TABLE: an
	// index, a json column's comment.
	var clauses, notNull, after []string
	for _, ch := range compare(d, t) {
		switch ch.kind {
		case createTable:
			if dl == Postgres {
				return pgCreateTable(d), nil
			}
			return []string{createTableSQL(d)}, nil
		case refuse:
			return nil, ch.lossy(table)
		case addColumn:
			if !ch.column.Nullable {
				rows, err := hasRows(ctx, dl, q, table, exists)
				if err != nil {
					return nil, err
				}
				if rows {
					ch.loss = "the rows the table has would have no value there"
					ch.fix = "declare it nullable: true, or add it by hand with a value for every row and run erpsync migrate again"
					return nil, ch.lossy(table)
				}
				// Added NULL, then made NOT NULL: a row written in
				// between stops the second statement (strict mode)
				// rather than getting '' or 0. PostgreSQL refuses a NOT
				// NULL column on a table with rows itself.
				if dl == MySQL {
					notNull = append(notNull, modifyColumnClause(ch.column))
					ch.column.Nullable = true
				}
			}
			if dl == Postgres {
				clauses = append(clauses, pgAddColumnClause(ch.column))
				if ch.column.Type.Kind == entity.JSON {
					after = append(after, pgJSONCommentSQL(table, ch.column.Name))
				}
				continue
			}
			clauses = append(clauses, addColumnClause(ch.column))
		case modifyColumn:
			if c := ch.column; c.key && c.Type.Kind == entity.Decimal && ch.live.Scale != c.Type.Scale {
				// A key's text is its stored digits: "1.50" would be
				// "1.500", another lock key and event key of one
				// record, also between the processes of a rolling
				// deploy. Only a table without rows may change it.
				rows, err := hasRows(ctx, dl, q, table, exists)
				if err != nil {
					return nil, err
				}
				if rows {
					ch.loss = fmt.Sprintf("the key's text would change (a key %s of %s is written with %d decimal places, its lock and event keys with it)", c.Name, ch.live, c.Type.Scale)
					ch.fix = fmt.Sprintf("keep the scale of %s (a wider precision is fine), or sync the new key into a table of another name (table:)", ch.live)
					return nil, ch.lossy(table)
				}
			}
			if dl == Postgres {
				clauses = append(clauses, pgModifyColumnClauses(ch.column, t.column(ch.column.Name))...)
				continue
			}
			clauses = append(clauses, modifyColumnClause(ch.column))
		case addIndex:
			if dl == Postgres {
				after = append(after, pgQuarantineIndex(table))
				continue
			}
			clauses = append(clauses, addIndexClause(table))
		}
	}
	var out []string
	if len(clauses) > 0 {
		out = append(out, alterTableSQL(dl, table, clauses))
	}
	if len(notNull) > 0 {
		out = append(out, alterTableSQL(dl, table, notNull))
	}
	return append(out, after...), nil
}

func (ch change) lossy(table string) *LossyChangeError {
	return &LossyChangeError{Table: table, Subject: ch.subject, File: ch.file, Database: ch.db, Loss: ch.loss, Fix: ch.fix}
}

func hasRows(ctx context.Context, dl Dialect, q querier, table string, exists bool) (bool, error) {
	if !exists {
		return false, nil
	}
	var rows bool
	if err := q.QueryRowContext(ctx, hasRowsSQL(dl, table)).Scan(&rows); err != nil {
		return false, fmt.Errorf("count rows of %s: %w", table, err)
	}
	return rows, nil
}

// pendingMigrations are the steps of the embedded migrations that Migrate
// would run (numberedSteps), for entities that have the built-in table
// (wantBuiltin) or not: those schema_migrations does not list (all of them
// when it does not exist).
func pendingMigrations(ctx context.Context, dl Dialect, q querier, wantBuiltin bool) ([]Migration, error) {
	ms, err := MigrationsOf(dl)
	if err != nil {
		return nil, err
	}
	exists, err := hasTable(ctx, dl, q, MembershipsTable)
	if err != nil {
		return nil, err
	}
	done := map[int]bool{}
	rows, err := q.QueryContext(ctx, "SELECT version FROM schema_migrations")
	if isNoTable(err) {
		return numberedSteps(ms, done, wantBuiltin, exists), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("read schema_migrations: %w", err)
		}
		done[v] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	return numberedSteps(ms, done, wantBuiltin, exists), nil
}

// readRecorded reads erpsync_entities by entity name (empty when the table
// does not exist yet).
func readRecorded(ctx context.Context, q querier) (map[string]recordedEntity, error) {
	out := map[string]recordedEntity{}
	rows, err := q.QueryContext(ctx, "SELECT name, table_name, definition FROM erpsync_entities")
	if isNoTable(err) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read erpsync_entities: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r recordedEntity
		if err := rows.Scan(&r.name, &r.table, &r.definition); err != nil {
			return nil, fmt.Errorf("read erpsync_entities: %w", err)
		}
		out[r.name] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read erpsync_entities: %w", err)
	}
	return out, nil
}

// isNoTable reports whether err is MySQL's 1146 (ER_NO_SUCH_TABLE) or
// PostgreSQL's 42P01 (undefined_table).
func isNoTable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1146 || dberr.PgCode(err) == pgUndefinedTable
}

// ApplyEntities brings the entities' tables to plan's entities and records
// their definitions in erpsync_entities. It plans again under the
// migration lock that Migrate takes, so that several instances migrating
// at once change each table once, and runs that plan: the statements of
// plan are what was true when it was made. It returns the
// *LossyChangeError of the new plan, if any, and ErrNotMigrated while
// numbered migrations are pending (run Migrate first).
func (s *Store) ApplyEntities(ctx context.Context, p *EntityPlan) (applied *EntityPlan, err error) {
	err = s.underMigrationLock(ctx, func(conn *sql.Conn) error {
		applied, err = plan(ctx, s.d, conn, p.Entities)
		switch {
		case err != nil:
			return err
		case len(applied.Pending) > 0:
			return fmt.Errorf("%w: migration %03d_%s is pending", ErrNotMigrated, applied.Pending[0].Version, applied.Pending[0].Name)
		case s.d == Postgres:
			return applyPostgres(ctx, conn, applied)
		}
		if len(applied.Statements) > 0 {
			if err := execStrict(ctx, conn, applied.Statements); err != nil {
				return err
			}
		}
		for _, r := range applied.record {
			_, err := conn.ExecContext(ctx, `INSERT INTO erpsync_entities (name, table_name, definition, applied_at) VALUES (?, ?, ?, UTC_TIMESTAMP(3))
 ON DUPLICATE KEY UPDATE table_name = VALUES(table_name), definition = VALUES(definition), applied_at = VALUES(applied_at)`, r.name, r.table, r.definition)
			if err != nil {
				return fmt.Errorf("record entity %s: %w", r.name, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return applied, nil
}

// applyPostgres runs the statements of p and records its definitions in
// one transaction: PostgreSQL's DDL is transactional, and strict without
// a mode to set (execStrict has no counterpart).
func applyPostgres(ctx context.Context, conn *sql.Conn, p *EntityPlan) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	for _, stmt := range p.Statements {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("apply %s: %w", stmt, err)
		}
	}
	for _, r := range p.record {
		_, err := tx.ExecContext(ctx, `INSERT INTO erpsync_entities (name, table_name, definition, applied_at) VALUES ($1, $2, $3, CURRENT_TIMESTAMP(3))
 ON CONFLICT (name) DO UPDATE SET table_name = EXCLUDED.table_name, definition = EXCLUDED.definition, applied_at = EXCLUDED.applied_at`, r.name, r.table, r.definition)
		if err != nil {
			return fmt.Errorf("record entity %s: %w", r.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// execStrict runs stmts on conn in strict mode, and puts the session's
// sql_mode back after.
func execStrict(ctx context.Context, conn *sql.Conn, stmts []string) error {
	var mode string
	if err := conn.QueryRowContext(ctx, saveSessionSQL).Scan(&mode); err != nil {
		return fmt.Errorf("read sql_mode: %w", err)
	}
	if _, err := conn.ExecContext(ctx, strictSessionSQL); err != nil {
		return fmt.Errorf("set sql_mode: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), restoreSessionSQL, mode)
	for _, stmt := range stmts {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("apply %s: %w", stmt, err)
		}
	}
	return nil
}

// TableDeniedError is CheckEntities' refusal when the user may not read
// an entity's table: the database lists only the tables (MySQL) or
// columns (PostgreSQL) a user holds a privilege on, so to it the table
// seemed absent or to lack its columns.
type TableDeniedError struct {
	Table string
	Err   error // the database's refusal of a read
}

func (e *TableDeniedError) Error() string {
	return fmt.Sprintf("table %s: this user may not read it (%v): grant the user erpsync runs as SELECT, INSERT, UPDATE on it (and DELETE on a document's lines table), as migrate's tables are granted",
		e.Table, e.Err)
}

func (e *TableDeniedError) Unwrap() error { return e.Err }

// readable is CheckEntities' look at a table the schema read found
// different from its entity: a *TableDeniedError when a read of it is
// refused for privileges (what the schema read saw was only what this
// user may see), else nil.
func (s *Store) readable(ctx context.Context, table string) error {
	_, err := s.sql.ExecContext(ctx, "SELECT 1 FROM "+s.d.ident(table)+" WHERE 1 = 0")
	if dberr.Denied(err) {
		return &TableDeniedError{Table: table, Err: err}
	}
	return nil
}

// CheckEntities returns a *SchemaMismatchError unless every entity's
// table matches the config file: what every command that writes runs
// before it starts. It reads every table in one query.
func (s *Store) CheckEntities(ctx context.Context, ents []*entity.Entity) error {
	keyColl, err := keyCollationOf(ctx, s.d, s.sql)
	if err != nil {
		return err
	}
	defs, tables, err := entityTables(ents, keyColl)
	if err != nil {
		return err
	}
	live, err := readTables(ctx, s.d, s.sql, tables)
	if err != nil {
		return err
	}
	for _, ds := range defs {
		for _, d := range ds {
			for _, ch := range compare(d, live[d.name]) {
				if err := s.readable(ctx, d.name); err != nil {
					return err
				}
				if ch.kind == createTable {
					return &SchemaMismatchError{Table: d.name}
				}
				return &SchemaMismatchError{Table: d.name, Subject: ch.subject, File: ch.file, Database: ch.db}
			}
		}
	}
	return nil
}
