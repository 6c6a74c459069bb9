package store

import (
	"fmt"
	"slices"
	"strings"

	"github.com/erpsync/erpsync/internal/entity"
)

// ownColumns are erpsync's own columns of every entity's table, after the
// declared ones, as memberships has them (migrations 001, 003, 004, 008
// and 011).
var ownColumns = []entity.Column{
	{Name: "erp_version", Type: entity.Type{Kind: entity.Int64}},
	{Name: "erp_updated_at", Type: entity.Type{Kind: entity.DateTime}},
	{Name: "fence_token", Type: entity.Type{Kind: entity.Int64}},
	{Name: "created_at", Type: entity.Type{Kind: entity.DateTime}},
	{Name: "updated_at", Type: entity.Type{Kind: entity.DateTime}},
	{Name: "deleted_at", Type: entity.Type{Kind: entity.DateTime}, Nullable: true},
	{Name: "quarantined_at", Type: entity.Type{Kind: entity.DateTime}, Nullable: true},
	{Name: "quarantined_version", Type: entity.Type{Kind: entity.Int64}, Nullable: true},
	// restore_count is how many times the row came back after a soft
	// delete (NULL: never): the life of its key that a change event's
	// identity tells apart (migration 008).
	{Name: "restore_count", Type: entity.Type{Kind: entity.Int64}, Nullable: true},
	// quarantined_updated_at is the updated_at of the invalid copy that
	// set the mark (migration 011).
	{Name: "quarantined_updated_at", Type: entity.Type{Kind: entity.DateTime}, Nullable: true},
}

// tableColumn is one column of an entity's table: declared, or one of
// erpsync's own.
type tableColumn struct {
	entity.Column
	key bool // a key column: part of the UNIQUE index
	own bool // one of erpsync's own columns
	// late: one of erpsync's own columns that tables made before it lack:
	// migrate adds it (nullable) to a table that has the others.
	late bool
	// collation is a key string's: the server's that compares byte for
	// byte (keyCollationOf).
	collation string
}

// lateOwn are the own columns added after entity tables existed
// (restore_count, with migration 008; quarantined_updated_at, with 011).
var lateOwn = map[string]bool{"restore_count": true, "quarantined_updated_at": true}

// lineColumns are erpsync's own columns of every child table, after the
// declared ones: the version of the parent its lines came with.
var lineColumns = []entity.Column{
	{Name: "erp_version", Type: entity.Type{Kind: entity.Int64}},
}

// tableDef is a table erpsync makes and checks: an entity's own, or one of
// its children's.
type tableDef struct {
	name string
	cols []tableColumn // in table order
	key  []string      // the columns of the UNIQUE index, in order
	// marks says the table is an entity's, with the index on
	// quarantined_at that the count of marked rows reads.
	marks bool
}

// tableDefs are the tables of e: its own, then one per child, in order,
// their key strings of collation keyColl.
func tableDefs(e *entity.Entity, keyColl string) ([]tableDef, error) {
	cols, err := tableColumns(e)
	if err != nil {
		return nil, err
	}
	defs := []tableDef{{name: e.TableName(), cols: cols, key: e.Key, marks: true}}
	for _, c := range e.Children {
		d, err := childDef(e, c)
		if err != nil {
			return nil, err
		}
		defs = append(defs, d)
	}
	for _, d := range defs {
		for i := range d.cols {
			if c := &d.cols[i]; c.key && c.Type.Kind == entity.String {
				c.collation = keyColl
			}
		}
	}
	return defs, nil
}

// tableColumns are the columns of e's table in table order: the declared
// ones, then erpsync's own. It refuses a key column that is not declared
// or that no index can hold.
func tableColumns(e *entity.Entity) ([]tableColumn, error) {
	if len(e.Key) == 0 {
		return nil, fmt.Errorf("entity %s: no key column", e.Name)
	}
	if err := checkKey("entity "+e.Name, e.Key, e.Column); err != nil {
		return nil, err
	}
	out := make([]tableColumn, 0, len(e.Columns)+len(ownColumns))
	for _, c := range e.Columns {
		out = append(out, tableColumn{Column: c, key: slices.Contains(e.Key, c.Name)})
	}
	for _, c := range ownColumns {
		out = append(out, tableColumn{Column: c, own: true, late: lateOwn[c.Name]})
	}
	return out, nil
}

// childDef is the table of e's child c: the parent's key columns (their
// names and types; a string compares exactly, as in the parent), the
// child's columns, then erp_version; its UNIQUE index is over the parent
// key and the child key. Its tableColumns check e's key.
func childDef(e *entity.Entity, c *entity.Child) (tableDef, error) {
	what := "child " + e.Name + "." + c.Name
	if len(c.Key) == 0 {
		return tableDef{}, fmt.Errorf("%s: no key column", what)
	}
	if err := checkKey(what, c.Key, func(name string) *entity.Column { return childColumn(c, name) }); err != nil {
		return tableDef{}, err
	}
	d := tableDef{name: childTable(c), key: append(slices.Clone(e.Key), c.Key...)}
	d.cols = make([]tableColumn, 0, len(e.Key)+len(c.Columns)+len(lineColumns))
	for _, k := range e.Key {
		pc := *e.Column(k)
		pc.Nullable = false
		d.cols = append(d.cols, tableColumn{Column: pc, key: true})
	}
	for _, col := range c.Columns {
		d.cols = append(d.cols, tableColumn{Column: col, key: slices.Contains(c.Key, col.Name)})
	}
	for _, col := range lineColumns {
		d.cols = append(d.cols, tableColumn{Column: col, own: true})
	}
	return d, nil
}

// childTable is the table of c: Table, or Name when Table is empty.
func childTable(c *entity.Child) string {
	if c.Table != "" {
		return c.Table
	}
	return c.Name
}

// childColumn returns c's declared column name, or nil.
func childColumn(c *entity.Child, name string) *entity.Column {
	for i := range c.Columns {
		if c.Columns[i].Name == name {
			return &c.Columns[i]
		}
	}
	return nil
}

// checkKey refuses a key column of what that column (a lookup by name)
// does not find, or that no index can hold.
func checkKey(what string, key []string, column func(string) *entity.Column) error {
	for _, k := range key {
		c := column(k)
		switch {
		case c == nil:
			return fmt.Errorf("%s: key column %s is not declared", what, k)
		case c.Type.Kind == entity.Text || c.Type.Kind == entity.JSON:
			return fmt.Errorf("%s: key column %s is %s: a key is string(N), an integer, a decimal, a bool, a date or a datetime", what, k, c.Type)
		}
	}
	return nil
}

// liveTable is a table as the database has it.
type liveTable struct {
	name    string
	columns []liveColumn
	// indexes maps an index name to its columns in index order.
	indexes map[string][]string
	unique  map[string]bool
}

// liveColumn is a column as the database has it.
type liveColumn struct {
	name     string
	ordinal  int
	typ      entity.Type // Kind 0: a type no entity declares
	raw      string      // the type as the database writes it
	nullable bool
	// collation is a text column's collation, lower case; "" for others.
	collation string
}

func (t *liveTable) addIndexColumn(index, column string, seq int, unique bool) {
	if t.indexes == nil {
		t.indexes, t.unique = map[string][]string{}, map[string]bool{}
	}
	cols := t.indexes[index]
	for len(cols) < seq {
		cols = append(cols, "")
	}
	cols[seq-1] = column
	t.indexes[index], t.unique[index] = cols, unique
}

func (t *liveTable) sort() {
	slices.SortFunc(t.columns, func(a, b liveColumn) int { return a.ordinal - b.ordinal })
}

func (t *liveTable) column(name string) *liveColumn {
	for i := range t.columns {
		if t.columns[i].name == name {
			return &t.columns[i]
		}
	}
	return nil
}

// keys are the column lists of the table's UNIQUE indexes, sorted.
func (t *liveTable) keys() [][]string {
	var out [][]string
	for name, cols := range t.indexes {
		if t.unique[name] {
			out = append(out, cols)
		}
	}
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(strings.Join(a, ","), strings.Join(b, ",")) })
	return out
}

// indexedFirst reports whether an index of the table starts with column.
func (t *liveTable) indexedFirst(column string) bool {
	for _, cols := range t.indexes {
		if len(cols) > 0 && cols[0] == column {
			return true
		}
	}
	return false
}

// shippedTable is the table the built-in entity's columns make, as the
// migrations create memberships: what the planner assumes of memberships
// while some of those migrations are still to run.
func shippedTable(d tableDef) *liveTable {
	t := &liveTable{name: d.name}
	for i, c := range d.cols {
		t.columns = append(t.columns, liveColumn{name: c.Name, ordinal: i + 1, typ: c.Type, raw: c.Type.String(), nullable: c.Nullable, collation: c.collation})
	}
	for i, k := range d.key {
		t.addIndexColumn("uq", k, i+1, true)
	}
	t.addIndexColumn("ix", "quarantined_at", 1, false)
	return t
}

// changeKind is what one difference between an entity and its table asks.
type changeKind uint8

const (
	createTable  changeKind = iota + 1
	addColumn               // the table lacks the column; refused when NOT NULL and the table has rows
	modifyColumn            // a longer string, a wider decimal, NOT NULL to NULL
	addIndex                // the index on quarantined_at is missing
	refuse                  // the change could lose data
)

// change is one difference between an entity and its table.
type change struct {
	kind   changeKind
	column tableColumn // addColumn, modifyColumn: the column as the file wants it
	live   entity.Type // modifyColumn: the column's type in the database
	// subject, file and db say what differs and how, for messages:
	// "column credit_limit", "decimal(15,2)", "decimal(12,2)".
	subject, file, db string
	// loss and fix (refuse) say what the change would lose and how to
	// proceed.
	loss, fix string
}

// compare lists the differences between table d and the live table t
// (nil: it does not exist), in table order.
func compare(d tableDef, t *liveTable) []change {
	table, cols := d.name, d.cols
	if t == nil {
		return []change{{kind: createTable, subject: "table " + table, file: "declared", db: "absent"}}
	}
	var out []change
	for _, c := range cols {
		if ch, ok := compareColumn(table, c, t.column(c.Name)); ok {
			out = append(out, ch)
		}
	}
	for _, lc := range t.columns {
		if !slices.ContainsFunc(cols, func(c tableColumn) bool { return c.Name == lc.name }) {
			out = append(out, change{kind: refuse, subject: "column " + lc.name, file: "absent", db: describe(lc.typ, lc.raw, lc.nullable, true),
				loss: "dropping it would lose its values",
				fix:  fmt.Sprintf("declare it again (nullable: true), or drop it by hand (ALTER TABLE %s DROP COLUMN %s) and run erpsync migrate again", table, lc.name)})
		}
	}
	if keys := t.keys(); !slices.ContainsFunc(keys, func(k []string) bool { return slices.Equal(k, d.key) }) {
		have := "none"
		if len(keys) > 0 {
			have = "(" + strings.Join(keys[0], ", ") + ")"
		}
		out = append(out, change{kind: refuse, subject: "the key", file: "(" + strings.Join(d.key, ", ") + ")", db: have,
			loss: "rows that are one record under one key may be several, or collide, under the other",
			fix:  "keep the key the table has, or sync the new key into a table of another name (table:)"})
	}
	if d.marks && !t.indexedFirst("quarantined_at") {
		out = append(out, change{kind: addIndex, subject: "the index on quarantined_at", file: "declared", db: "absent"})
	}
	return out
}

// compareColumn is the difference between the column c of the file and lc
// of the database (nil: the table lacks it), if any.
func compareColumn(table string, c tableColumn, lc *liveColumn) (change, bool) {
	subject := "column " + c.Name
	if lc == nil {
		ch := change{kind: addColumn, column: c, subject: subject, file: describe(c.Type, "", c.Nullable, true), db: "absent"}
		if c.own && !c.late {
			ch.kind, ch.loss, ch.fix = refuse, "erpsync keeps its bookkeeping there", ownFix(table)
		}
		return ch, true
	}
	// A key string must compare byte for byte; any other column's
	// collation is its own affair. Making a key's collation exact only
	// tells apart keys the old one held equal: it merges none, and the
	// UNIQUE index rebuilt under it cannot refuse a row.
	looseKey := c.key && c.Type.Kind == entity.String && lc.collation != c.collation && !slices.Contains(noPadCollations, lc.collation)
	sameType := lc.typ == c.Type
	if sameType && !looseKey && lc.nullable == c.Nullable {
		return change{}, false
	}
	showNull := lc.nullable != c.Nullable
	ch := change{kind: modifyColumn, column: c, live: lc.typ, subject: subject,
		file: describe(c.Type, "", c.Nullable, showNull), db: describe(lc.typ, lc.raw, lc.nullable, showNull)}
	if looseKey {
		ch.file += " (collation " + c.collation + ")"
		ch.db += " (collation " + lc.collation + ")"
	}
	switch {
	case c.own:
		ch.kind, ch.loss, ch.fix = refuse, "erpsync keeps its bookkeeping there", ownFix(table)
	case lc.nullable && !c.Nullable:
		ch.kind, ch.loss = refuse, "rows that hold NULL there would have no value"
		ch.fix = "keep it nullable: true, or fill the NULLs and change the column by hand, then run erpsync migrate again"
	case sameType, widens(lc.typ, c.Type):
		// NOT NULL to NULL, a longer string, a wider decimal: loses nothing.
	default:
		ch.kind, ch.loss = refuse, narrowLoss(lc.typ, c.Type)
		ch.fix = fmt.Sprintf("migrate only lengthens strings and widens decimals: declare %s again, or change the column by hand and run erpsync migrate again", describe(lc.typ, lc.raw, false, false))
	}
	return ch, true
}

func ownFix(table string) string {
	return fmt.Sprintf("table %s was not made by erpsync migrate: give the entity a table of another name (table:)", table)
}

// widens reports whether a column of type from may become type to without
// losing a value: a longer string, a decimal with no fewer integer digits
// and no smaller scale, or a datetime with no fewer fraction digits.
func widens(from, to entity.Type) bool {
	switch {
	case from.Kind == entity.DateTime && to.Kind == entity.DateTime:
		return to.Digits() >= from.Digits()
	case from.Kind == entity.String && to.Kind == entity.String:
		return to.Length >= from.Length
	case from.Kind == entity.Decimal && to.Kind == entity.Decimal:
		return to.Scale >= from.Scale && to.Precision-to.Scale >= from.Precision-from.Scale
	}
	return false
}

// narrowLoss says what a change from type from to type to would lose.
func narrowLoss(from, to entity.Type) string {
	switch {
	case from.Kind == entity.String && to.Kind == entity.String:
		return fmt.Sprintf("values longer than %d characters would be cut", to.Length)
	case from.Kind == entity.Decimal && to.Kind == entity.Decimal && to.Scale < from.Scale:
		return fmt.Sprintf("digits past %d decimal places would be rounded away", to.Scale)
	case from.Kind == entity.Decimal && to.Kind == entity.Decimal:
		return fmt.Sprintf("values of more than %d integer digits would not fit", to.Precision-to.Scale)
	case from.Kind == entity.DateTime && to.Kind == entity.DateTime:
		return fmt.Sprintf("fraction digits of a second past %d would be cut", to.Digits())
	}
	return "values would be converted, and those that do not convert lost"
}

// describe writes a type for a message: the file's form (string(40)), or
// the database's own (raw) for a type no entity declares; with nullable or
// not null when showNull.
func describe(t entity.Type, raw string, nullable, showNull bool) string {
	s := raw
	if t.Kind != 0 {
		s = t.String()
	}
	switch {
	case !showNull:
	case nullable:
		s += " nullable"
	default:
		s += " not null"
	}
	return s
}
