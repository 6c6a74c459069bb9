package store

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
)

// Row is one row of an entity's table as erpsync writes it: the record's
// values in the order of the entity's columns, and erpsync's own columns.
type Row struct {
	// Key is the record's key text (entity.KeyText): what locks, logs and
	// Versions name it by.
	Key       string
	Vals      []entity.Value
	Version   int64
	UpdatedAt time.Time // the ERP's updated_at
	Fence     int64     // fencing token of the lock the write is made under
	// RunID is the run that writes the row: its change event's run_id.
	RunID string
	// Children are the row's lines, one entity.Lines per child of the
	// entity, in order (nil for an entity without children): a write of
	// the row that lands makes the child tables hold exactly these lines
	// for its key, in the same transaction.
	Children []entity.Lines
}

// Table is an entity's table compiled once: the statements of every write
// and read the sync makes, with the kinds of their values, so that the hot
// path writes a row without a lookup by name.
type Table struct {
	d     Dialect // the SQL its statements are written in
	ent   *entity.Entity
	name  string
	kinds []entity.Kind // of each column, in order
	keys  []int         // indexes of the key columns, in key order
	// keyList is the key columns, comma-separated.
	keyList string
	// rowCols is the columns a row's insert writes, quoted: the entity's,
	// then erp_version, erp_updated_at, fence_token, created_at and
	// updated_at.
	rowCols string
	// insertCols is " INTO t (cols...) VALUES ": an INSERT without its verb.
	insertCols string
	// unnest is the head of PostgreSQL's INSERT ... SELECT FROM unnest
	// (unnestInsert).
	unnest string
	// copy is PostgreSQL's COPY of absent rows (copyIn).
	copy     string
	upsert   string // the ON DUPLICATE KEY UPDATE tail
	versions string // SELECT key..., guards FROM t WHERE
	// lateral is PostgreSQL's read of a composite key's guards after its
	// VALUES list (keysLateral), "" for another key or dialect.
	lateral string
	isKey   []bool // of each column
	// lines are the tables of the entity's children, in order.
	lines []*lineTable
	// evJSON encodes the table's change events.
	evJSON *eventJSON
	// twins are the table compiled for each dialect, this one among them.
	twins *[2]*Table
}

// Compile compiles the statements of e's table, for every dialect: a
// Store writes it in its own (Store.For).
func Compile(e *entity.Entity) (*Table, error) {
	twins := new([2]*Table)
	for _, d := range []Dialect{MySQL, Postgres} {
		t, err := compile(e, d)
		if err != nil {
			return nil, err
		}
		t.twins = twins
		twins[d] = t
	}
	return twins[MySQL], nil
}

// in is the table compiled for dialect d.
func (t *Table) in(d Dialect) *Table { return t.twins[d] }

// compile compiles the statements of e's table in dialect d.
func compile(e *entity.Entity, d Dialect) (*Table, error) {
	t := &Table{d: d, ent: e, name: e.TableName()}
	for _, c := range e.Columns {
		t.kinds = append(t.kinds, c.Type.Kind)
	}
	t.keys = e.KeyIndexes()
	for i, k := range t.keys {
		if k < 0 {
			return nil, fmt.Errorf("compile table %s: key column %s is not declared", t.name, e.Key[i])
		}
	}
	q := d.ident
	var cols, keyCols []string
	for _, c := range e.Columns {
		cols = append(cols, q(c.Name))
	}
	for _, k := range e.Key {
		keyCols = append(keyCols, q(k))
	}
	t.keyList = strings.Join(keyCols, ", ")
	t.rowCols = strings.Join(cols, ", ") + ", erp_version, erp_updated_at, fence_token, created_at, updated_at"
	t.insertCols = " INTO " + q(t.name) + " (" + t.rowCols + ") VALUES "

	isKey := make([]bool, len(e.Columns))
	for _, k := range t.keys {
		isKey[k] = true
	}
	t.isKey = isKey
	if d == Postgres {
		t.unnest = t.compileUnnest()
		t.copy = t.compileCopy()
	}
	t.upsert = t.upsertOn(ruleLands)
	t.versions = "SELECT " + t.keyList + ", erp_version, fence_token, deleted_at IS NOT NULL, erp_updated_at, COALESCE(quarantined_version, 0), quarantined_updated_at, COALESCE(restore_count, 0) FROM " + q(t.name) + " WHERE "
	if d == Postgres && len(t.keys) > 1 {
		t.lateral = t.compileLateral()
	}
	if err := t.compileLines(); err != nil {
		return nil, err
	}
	t.compileEventJSON()
	return t, nil
}

// mustCompile is Compile for a built-in entity, whose declaration is known
// good.
func mustCompile(e *entity.Entity) *Table {
	t, err := Compile(e)
	if err != nil {
		panic(err) // a built-in declaration is wrong: a bug, caught by every test
	}
	return t
}

// Name returns the table's name.
func (t *Table) Name() string { return t.name }

// Entity returns the entity the table was compiled from.
func (t *Table) Entity() *entity.Entity { return t.ent }

// value writes v, a value of kind k, as a literal.
func (l *literal) value(k entity.Kind, v entity.Value) error {
	switch {
	case v.Null:
		l.sql("NULL")
	case k == entity.Bool:
		l.bool(v.I != 0)
	case k == entity.Int32 || k == entity.Int64:
		l.int(v.I)
	case k == entity.DateTime:
		return l.exactTime(v.T)
	default:
		l.str(v.S)
	}
	return nil
}

// keyPart writes the text of one key part, of kind k, as a literal that
// compares equal to the column's value.
func (l *literal) keyPart(k entity.Kind, text string) {
	switch {
	case k == entity.Bool:
		l.bool(text == "true")
	case (k == entity.Int32 || k == entity.Int64 || k == entity.Decimal) && isNumber(text):
		// Unquoted: a row constructor ((a, b) IN (('x', '9007199254740993'),
		// ...)) compares a string with a number as doubles, which past
		// 2^53 matched another row or none.
		l.sql(text)
	default:
		l.str(text) // MySQL converts a quoted date to the column's type
	}
}

// isNumber reports whether s is an integer or decimal literal: an optional
// minus, digits, and at most one point between digits.
func isNumber(s string) bool {
	s = strings.TrimPrefix(s, "-")
	whole, frac, point := strings.Cut(s, ".")
	digits := func(d string) bool {
		for i := 0; i < len(d); i++ {
			if d[i] < '0' || d[i] > '9' {
				return false
			}
		}
		return d != ""
	}
	return digits(whole) && (!point || digits(frac))
}

// keyMatch writes the WHERE test of the rows with the given keys.
func (t *Table) keyMatch(l *literal, keys []string) {
	if len(t.keys) == 1 {
		l.sql(t.d.ident(t.ent.Key[0]) + " IN (")
		k := t.kinds[t.keys[0]]
		for i, key := range keys {
			if i > 0 {
				l.sql(",")
			}
			l.keyPart(k, key)
		}
		l.sql(")")
		return
	}
	l.sql("(" + t.keyList + ") IN (")
	t.keyRows(l, keys, false)
	l.sql(")")
}

// keyRows writes the keys of a composite key as rows, "(a, b), (a, b)";
// with cast, the first row's parts cast to their columns' types (which
// types a VALUES list's columns on PostgreSQL).
func (t *Table) keyRows(l *literal, keys []string, cast bool) {
	for i, key := range keys {
		if i > 0 {
			l.sql(",")
		}
		l.sql("(")
		for j, part := range entity.SplitKey(key, len(t.keys)) {
			if j > 0 {
				l.sql(",")
			}
			k := t.kinds[t.keys[j]]
			l.keyPart(k, part)
			if cast && i == 0 {
				l.sql("::" + strings.TrimSuffix(arrayType(k), "[]"))
			}
		}
		l.sql(")")
	}
}

// PostgreSQL plans a composite key's row IN list ((a, b) IN ((...),
// ...)) as one index scan a key under a BitmapOr: 7 to 10 ms to plan for
// 500 keys, the most of a re-run's read. Joined with a VALUES list of the
// keys, it may hash the whole table instead, as it did on a table without
// statistics yet (just loaded). So the guards of a composite key are read
// through LATERAL, one LIMIT 1 subquery a key of the VALUES list, which
// is always an index lookup (about 1 ms to plan and 2 ms to run, 500
// keys).

// compileLateral is the tail of keysLateral's statement: the VALUES
// list's name and columns, and the lookup of a key, without its locking
// and end.
func (t *Table) compileLateral() string {
	var cols, match []string
	for j, k := range t.ent.Key {
		c := "c" + strconv.Itoa(j+1)
		cols = append(cols, c)
		match = append(match, t.d.ident(k)+" = k."+c)
	}
	return ") AS k(" + strings.Join(cols, ", ") + "), LATERAL (" + t.versions + strings.Join(match, " AND ") + " LIMIT 1"
}

// keysLateral writes the read of the guards of the rows with the given
// keys of a composite key on PostgreSQL; with lock, each row found is
// locked (FOR UPDATE).
func (t *Table) keysLateral(l *literal, keys []string, lock bool) {
	l.sql("SELECT v.* FROM (VALUES ")
	t.keyRows(l, keys, true)
	l.sql(t.lateral)
	if lock {
		l.sql(" FOR UPDATE")
	}
	l.sql(") AS v")
}

// oneKey writes the WHERE test of one row's key, without WHERE.
func (t *Table) oneKey(l *literal, key string) {
	for j, part := range entity.SplitKey(key, len(t.keys)) {
		if j > 0 {
			l.sql(" AND ")
		}
		l.sql(t.d.ident(t.ent.Key[j]) + " = ")
		l.keyPart(t.kinds[t.keys[j]], part)
	}
}

// readVersions reads the guards of the rows with the given keys.
func (t *Table) readVersions(ctx context.Context, db querier, keys []string) (map[string]Current, error) {
	return t.readVersionsLocking(ctx, db, keys, false)
}

// readVersionsLocking is readVersions; with lock, in a transaction, it
// also locks the rows (and the gaps of the absent ones) until it ends.
func (t *Table) readVersionsLocking(ctx context.Context, db querier, keys []string, lock bool) (map[string]Current, error) {
	out := make(map[string]Current, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	l := t.lit()
	if t.lateral != "" {
		t.keysLateral(l, keys, lock)
	} else {
		l.sql(t.versions)
		t.keyMatch(l, keys)
		if lock {
			l.sql(" FOR UPDATE")
		}
	}
	rows, err := db.QueryContext(ctx, l.text())
	l.free()
	if err != nil {
		return nil, fmt.Errorf("read versions: %w", err)
	}
	defer rows.Close()
	cs := t.keyCells()
	dest := make([]any, 0, len(cs)+7)
	for i := range cs {
		dest = append(dest, cs[i].dest())
	}
	var c Current
	var markAt sql.NullTime
	dest = append(dest, &c.Version, &c.Fence, &c.Deleted, &c.UpdatedAt, &c.Mark, &markAt, &c.RestoreCount)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("read versions: %w", err)
		}
		c.MarkAt = markAt.Time
		out[keyOf(cs)] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read versions: %w", err)
	}
	return out, nil
}

// values writes rows as the VALUES list of an INSERT.
func (t *Table) values(l *literal, rows []Row) error {
	for i := range rows {
		r := &rows[i]
		if len(r.Vals) != len(t.kinds) {
			return fmt.Errorf("key %q: %d values for %d columns", r.Key, len(r.Vals), len(t.kinds))
		}
		if i > 0 {
			l.sql(",")
		}
		l.sql("(")
		for j, v := range r.Vals {
			if err := l.value(t.kinds[j], v); err != nil {
				return fmt.Errorf("key %q: %s: %w", r.Key, t.ent.Columns[j].Name, err)
			}
			l.sql(",")
		}
		l.int(r.Version)
		l.sql(",")
		if err := l.time(r.UpdatedAt); err != nil {
			return fmt.Errorf("key %q: updated_at: %w", r.Key, err)
		}
		l.sql(",")
		l.int(r.Fence)
		l.sql(",")
		l.now()
		l.sql(",")
		l.now()
		l.sql(")")
	}
	return nil
}

// insert runs verb (INSERT or INSERT IGNORE) of rows, followed by tail.
func (t *Table) insert(ctx context.Context, db querier, verb string, rows []Row, tail string) error {
	l := t.lit()
	defer l.free()
	if t.d == Postgres {
		// verb is INSERT there: INSERT IGNORE is a tail, ON CONFLICT DO
		// NOTHING.
		if err := t.unnestInsert(l, rows); err != nil {
			return err
		}
	} else {
		l.sql(verb)
		l.sql(t.insertCols)
		if err := t.values(l, rows); err != nil {
			return err
		}
	}
	l.sql(tail)
	_, err := db.ExecContext(ctx, l.text())
	return err
}

// updateRow writes the guarded UPDATE of one row (Store.UpdateRow): it
// changes the row when the incoming copy is newer, a higher version, or, on
// a soft-deleted row, a copy that restores it (Current.Restores). The WHERE
// reads the row once, before any SET, so a restore at a lower version (a
// re-created record) passes; the quarantine mark and restore_count are
// written before deleted_at, which their tests read.
func (t *Table) updateRow(l *literal, r Row) error {
	if err := t.updateData(l, r); err != nil {
		return err
	}
	l.sql(", updated_at = ")
	l.now()
	l.sql(", fence_token = ")
	l.int(r.Fence)
	ops := rowOperands(incoming{Version: r.Version, Fence: r.Fence, UpdatedAt: r.UpdatedAt})
	for _, col := range markColumns {
		l.sql(", " + col + " = CASE WHEN ")
		if err := or(isNotNull(colDeleted), ruleUnmarks).render(l, ops); err != nil {
			return fmt.Errorf("key %q: %w", r.Key, err)
		}
		l.sql(" THEN NULL ELSE " + col + " END")
	}
	l.sql(", restore_count = CASE WHEN deleted_at IS NULL THEN restore_count ELSE COALESCE(restore_count, 0) + 1 END")
	l.sql(", deleted_at = NULL, erp_version = ")
	l.int(r.Version)
	l.sql(" WHERE ")
	t.oneKey(l, r.Key)
	l.sql(" AND ")
	if err := ruleReplaces.render(l, ops); err != nil {
		return fmt.Errorf("key %q: updated_at: %w", r.Key, err)
	}
	return nil
}

// updateData writes the start of an UPDATE of r's row: "UPDATE t SET"
// each column outside the key and erp_updated_at from r.
func (t *Table) updateData(l *literal, r Row) error {
	if len(r.Vals) != len(t.kinds) {
		return fmt.Errorf("key %q: %d values for %d columns", r.Key, len(r.Vals), len(t.kinds))
	}
	l.sql("UPDATE " + t.d.ident(t.name) + " SET ")
	for j, v := range r.Vals {
		if t.isKey[j] {
			continue
		}
		l.sql(t.d.ident(t.ent.Columns[j].Name) + " = ")
		if err := l.value(t.kinds[j], v); err != nil {
			return fmt.Errorf("key %q: %s: %w", r.Key, t.ent.Columns[j].Name, err)
		}
		l.sql(", ")
	}
	l.sql("erp_updated_at = ")
	if err := l.time(r.UpdatedAt); err != nil {
		return fmt.Errorf("key %q: updated_at: %w", r.Key, err)
	}
	return nil
}

// liveKey writes the WHERE of a guarded UPDATE of one row: key's row,
// live, with a fencing token no newer than fence.
func (t *Table) liveKey(l *literal, key string, fence int64) {
	l.sql(" WHERE ")
	t.oneKey(l, key)
	l.sql(" AND deleted_at IS NULL AND fence_token <= ")
	l.int(fence)
}

// markColumns are the quarantine mark's columns, which a write that
// unmarks the row sets NULL.
var markColumns = []string{"quarantined_at", "quarantined_version", "quarantined_updated_at"}

// upsertOn is the tail of the guarded upsert in t's dialect, under the
// rule lands: ruleLands, or a test's mutant of it (export_test.go).
func (t *Table) upsertOn(lands rule) string {
	if t.d == Postgres {
		return t.upsertPostgres(lands)
	}
	return t.upsertMySQL(lands)
}

// upsertMySQL is the tail of MySQL's guarded upsert: ON DUPLICATE KEY
// UPDATE, each assignment under lands (ruleLands). It assigns the data first, then
// the quarantine mark, then restore_count (a landed write on a
// soft-deleted row restores it), fence_token, deleted_at and erp_version
// last, in that order: MySQL evaluates the assignments left to right, a
// later one sees the columns earlier ones changed, and the guard reads
// fence_token and erp_version, the unmark the mark's columns (each set
// NULL only where the unmark holds, which a NULL mark keeps true: their
// order among them does not matter). A new
// fence_token keeps the guard's fence test true, and the guard does not
// read deleted_at: a higher version makes the row live.
func (t *Table) upsertMySQL(lands rule) string {
	q := t.d.ident
	ops := upsertOperands(MySQL, t.name)
	guard := lands.sqlText(MySQL, ops)
	unmark := and(lands, ruleUnmarks).sqlText(MySQL, ops)
	var b strings.Builder
	b.WriteString(" ON DUPLICATE KEY UPDATE ")
	for i, c := range t.ent.Columns {
		if t.isKey[i] {
			continue
		}
		fmt.Fprintf(&b, "%s = IF(%s, VALUES(%s), %s), ", q(c.Name), guard, q(c.Name), q(c.Name))
	}
	b.WriteString("erp_updated_at = IF(" + guard + ", VALUES(erp_updated_at), erp_updated_at), " +
		"updated_at = IF(" + guard + ", VALUES(updated_at), updated_at), ")
	for _, col := range markColumns {
		b.WriteString(col + " = IF(" + unmark + ", NULL, " + col + "), ")
	}
	b.WriteString("restore_count = IF(" + guard + " AND deleted_at IS NOT NULL, COALESCE(restore_count, 0) + 1, restore_count), " +
		"fence_token = IF(" + guard + ", VALUES(fence_token), fence_token), " +
		"deleted_at = IF(" + guard + ", NULL, deleted_at), " +
		"erp_version = IF(" + guard + ", VALUES(erp_version), erp_version)")
	return b.String()
}

// upsertPostgres is the tail of PostgreSQL's guarded upsert: ON CONFLICT
// on the key DO UPDATE ... WHERE lands (ruleLands). Every assignment reads the row
// as it was (PostgreSQL evaluates them all before any lands), and a row
// the WHERE refuses is left as it was.
func (t *Table) upsertPostgres(lands rule) string {
	q := t.d.ident
	ops := upsertOperands(Postgres, t.name)
	self := q(t.name) + "."
	var b strings.Builder
	b.WriteString(" ON CONFLICT (" + t.keyList + ") DO UPDATE SET ")
	for i, c := range t.ent.Columns {
		if t.isKey[i] {
			continue
		}
		b.WriteString(q(c.Name) + " = EXCLUDED." + q(c.Name) + ", ")
	}
	unmark := ruleUnmarks.sqlText(Postgres, ops)
	b.WriteString("erp_updated_at = EXCLUDED.erp_updated_at, updated_at = EXCLUDED.updated_at, ")
	for _, col := range markColumns {
		b.WriteString(col + " = CASE WHEN " + unmark + " THEN NULL ELSE " + self + col + " END, ")
	}
	b.WriteString("restore_count = CASE WHEN " + self + "deleted_at IS NOT NULL THEN COALESCE(" + self + "restore_count, 0) + 1 ELSE " + self + "restore_count END, " +
		"fence_token = EXCLUDED.fence_token, deleted_at = NULL, erp_version = EXCLUDED.erp_version" +
		" WHERE " + lands.sqlText(Postgres, ops))
	return b.String()
}
