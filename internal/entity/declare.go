package entity

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"go.yaml.in/yaml/v3"
)

// claim records that what (an entity or a child) writes table: two may
// not share one, nor take one of erpsync's own.
func (d *decoder) claim(n *yaml.Node, table, what string) {
	if !d.ok() {
		return
	}
	if slices.Contains(OwnTables, table) {
		d.fail(n, "table %q is one of erpsync's own (%s): name the table otherwise", table, strings.Join(OwnTables, ", "))
		return
	}
	if first, dup := d.tables[table]; dup {
		d.fail(n, "table %q is written by %s already: give %s a table of its own", table, first, what)
		return
	}
	d.tables[table] = fmt.Sprintf("%s (line %d)", what, n.Line)
}

// entities reads the entities list.
func (d *decoder) entities(n *yaml.Node, f *File) []*Entity {
	items := d.list(n, "entities")
	if d.ok() && len(items) == 0 {
		d.fail(n, "entities: empty: want at least one entity")
	}
	for _, it := range items {
		e := d.entity(it, f)
		if !d.ok() {
			return nil
		}
		f.Entities = append(f.Entities, e)
	}
	return f.Entities
}

// entity reads one entity.
func (d *decoder) entity(n *yaml.Node, f *File) *Entity {
	m := d.fields(n, "an entity", "name", "table", "source", "sources", "key", "updated_at", "version",
		"columns", "every", "cron", "events", "rest", "children")
	if !d.ok() {
		return nil
	}
	e := &Entity{Line: n.Line}
	v, ok := m["name"]
	if !ok {
		d.fail(n, "an entity without a name: want name:, like name: customers")
		return nil
	}
	e.Name = d.name(v.value, "name")
	if first := f.Entity(e.Name); first != nil && d.ok() {
		d.fail(v.value, "entity %q declared twice (first on line %d): give each a name of its own", e.Name, first.Line)
	}
	what := "entity " + e.Name
	e.Table = e.Name
	if t, ok := m["table"]; ok {
		e.Table, v = d.name(t.value, "table"), t
	}
	d.claim(v.value, e.Table, what)
	if v, ok := m["columns"]; ok {
		e.Columns = d.columns(v.value, nil)
	} else {
		d.fail(n, "%s: no columns: want columns:, the key columns among them", what)
	}
	if v, ok := m["key"]; ok {
		e.Key = d.key(v.value, e.Columns, nil)
	} else {
		d.fail(n, "%s: no key: want key: [column, ...], the columns of the table's UNIQUE index", what)
	}
	src, one := m["source"]
	srcs, many := m["sources"]
	switch {
	case one && many:
		d.fail(srcs.key, "%s: source and sources: want one", what)
	case one:
		e.Sources = []Source{{Name: d.source(src.value, "source"), Line: src.value.Line}}
	case many:
		e.Sources = d.sources(srcs.value, e)
	default:
		d.fail(n, "%s: no source: want source: (the OData entity set, or the REST records) or sources:", what)
	}
	if v, ok := m["updated_at"]; ok {
		e.UpdatedAt = d.dotted(v.value, "updated_at")
	} else {
		d.fail(n, "%s: no updated_at: want the source property of the change cursor, like updated_at: LastChangeDateTime", what)
	}
	if v, ok := m["version"]; ok {
		e.Version = d.dotted(v.value, "version")
	}
	d.schedule(m, e)
	if v, ok := m["events"]; ok {
		e.Events = d.boolean(v.value, "events")
		if d.ok() && e.Events && f.Events == nil {
			d.fail(v.key, "%s: events: true without the file's events: block: add events: {sink: ..., url: ...}", what)
		}
		if k, ok := m["key"]; ok && d.ok() && e.Events {
			if n := EventKeyBytes(e); n > MaxEventKeyBytes {
				d.fail(k.value, "%s: key: its change events' key text takes up to %d bytes (the key's JSON, a string(N) at up to 6 bytes a character, <, > and & escaped as \\u003c), more than the %d the outbox holds: shorten the key's strings", what, n, MaxEventKeyBytes)
			}
		}
	}
	if v, ok := m["rest"]; ok {
		if f.ERP.Kind == KindOData {
			d.fail(v.key, "%s: rest: only for erp.kind rest", what)
		}
		e.REST = d.rest(v.value)
	}
	if v, ok := m["children"]; ok {
		e.Children = d.children(v.value, e)
	}
	d.checkSources(e, f)
	return e
}

// schedule reads an entity's every or cron.
func (d *decoder) schedule(m map[string]field, e *Entity) {
	every, hasEvery := m["every"]
	expr, hasCron := m["cron"]
	switch {
	case hasEvery && hasCron:
		d.fail(expr.key, "entity %s: every and cron: want one", e.Name)
	case hasEvery:
		e.Every = d.duration(every.value, "every", time.Second)
	case hasCron:
		e.Cron = d.str(expr.value, "cron")
		if !d.ok() {
			return
		}
		// robfig/cron panics on some time zone prefixes ("TZ=0"), and
		// erpsync's cron runs in UTC anyway.
		if strings.HasPrefix(e.Cron, "TZ=") || strings.HasPrefix(e.Cron, "CRON_TZ=") {
			d.fail(expr.value, "cron %q: no time zone prefix: the schedule runs in UTC", e.Cron)
			return
		}
		if _, err := cron.ParseStandard(e.Cron); err != nil {
			d.fail(expr.value, "cron %q: %v (want 5 fields, like */5 * * * *, or @hourly)", e.Cron, err)
		}
	}
}

// source returns the source name n: an OData entity set, or a REST
// entity's records.
func (d *decoder) source(n *yaml.Node, key string) string {
	s := d.str(n, key)
	if d.ok() && (s == "" || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f })) {
		d.fail(n, "%s %q: want the name of the source, without spaces", key, s)
	}
	return s
}

// sources reads an entity's sources: each {source: ..., set: {column:
// value}}, the set columns constants of their source and key columns.
func (d *decoder) sources(n *yaml.Node, e *Entity) []Source {
	items := d.list(n, "sources")
	if d.ok() && len(items) == 0 {
		d.fail(n, "sources: empty: want at least one {source: ...}")
	}
	var out []Source
	for _, it := range items {
		m := d.fields(it, "a source", "source", "set", "params")
		if !d.ok() {
			return nil
		}
		v, ok := m["source"]
		if !ok {
			d.fail(it, "sources: an item without source:")
			return nil
		}
		s := Source{Name: d.source(v.value, "source"), Line: it.Line}
		if v, ok := m["set"]; ok {
			s.Set = d.set(v.value, e)
		}
		if v, ok := m["params"]; ok {
			s.Params = d.sourceParams(v.value)
		}
		out = append(out, s)
	}
	if !d.ok() || len(out) < 2 {
		return out
	}
	seen := map[string]int{}
	var firstCols []string
	for i, s := range out {
		if len(s.Set) == 0 {
			d.fail(items[i], "sources: source %s without set: with several sources, each sets the key columns that tell its records apart", s.Name)
			return nil
		}
		var cols, vals []string
		for _, k := range e.Key {
			if v, ok := s.Set[k]; ok {
				cols, vals = append(cols, k), append(vals, k+"="+v)
			}
		}
		if i == 0 {
			firstCols = cols
		}
		if first := out[0]; !slices.Equal(cols, firstCols) {
			d.fail(items[i], "sources: source %s sets other columns than the first source (line %d): want the same columns in each", s.Name, first.Line)
			return nil
		}
		if line, dup := seen[KeyText(vals)]; dup {
			d.fail(items[i], "sources: source %s sets %s like the source on line %d: their rows would collide", s.Name, strings.Join(vals, ", "), line)
			return nil
		}
		seen[KeyText(vals)] = s.Line
	}
	return out
}

// sourceParams reads a source's params: REST query parameter names and
// their values.
func (d *decoder) sourceParams(n *yaml.Node) map[string]string {
	pairs := d.pairs(n, "params")
	if d.ok() && len(pairs) == 0 {
		d.fail(n, "params: empty: want {name: value}, or leave params out")
	}
	out := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v := p[0], p[1]
		if k.Value == "" || strings.ContainsFunc(k.Value, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			d.fail(k, "params: %q: want a query parameter name, without spaces", k.Value)
		}
		out[k.Value] = v.Value
	}
	return out
}

// set reads a source's set: declared key columns and values that fit them.
func (d *decoder) set(n *yaml.Node, e *Entity) map[string]string {
	pairs := d.pairs(n, "set")
	if d.ok() && len(pairs) == 0 {
		d.fail(n, "set: empty: want {column: value}, or leave set out")
	}
	out := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v := p[0], p[1]
		c := e.Column(k.Value)
		switch {
		case c == nil:
			d.fail(k, "set: column %q is not declared%s: declare it under columns: and in key:", k.Value, didYouMean(k.Value, e.Columns))
		case !slices.Contains(e.Key, k.Value):
			d.fail(k, "set: column %q is not in the key: a column that set fills is a constant of its source, so it belongs to key:", k.Value)
		default:
			if err := Fits(c.Type, v.Value); err != nil {
				d.fail(v, "set: %s %q: %v", k.Value, v.Value, err)
			}
		}
		out[k.Value] = v.Value
	}
	return out
}

// didYouMean is ` (did you mean "x"?)` for the column of cols nearest
// name, "" when none is close.
func didYouMean(name string, cols []Column) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	if near := nearest(name, names); near != "" {
		return fmt.Sprintf(" (did you mean %q?)", near)
	}
	return ""
}

// columns reads a columns list. taken are the names the table has
// already (a child table's parent key columns).
func (d *decoder) columns(n *yaml.Node, taken []Column) []Column {
	items := d.list(n, "columns")
	if d.ok() && len(items) == 0 {
		d.fail(n, "columns: empty: want at least the key columns")
	}
	out := make([]Column, 0, len(items))
	lines := map[string]int{}
	for _, it := range items {
		c := d.column(it)
		switch {
		case !d.ok():
			return nil
		case slices.Contains(Reserved, c.Name):
			d.fail(it, "column %q is one of erpsync's own (%s): name it otherwise", c.Name, strings.Join(Reserved, ", "))
		case lines[c.Name] != 0:
			d.fail(it, "column %q declared twice (first on line %d)", c.Name, lines[c.Name])
		case slices.ContainsFunc(taken, func(t Column) bool { return t.Name == c.Name }):
			d.fail(it, "column %q: the child table has the parent's key column %s already: name it otherwise", c.Name, c.Name)
		}
		lines[c.Name] = c.Line
		out = append(out, c)
	}
	for _, c := range out {
		if c.NotBefore == "" || !d.ok() {
			continue
		}
		i := slices.IndexFunc(out, func(o Column) bool { return o.Name == c.NotBefore })
		switch {
		case i < 0:
			d.fail(&yaml.Node{Line: c.Line}, "column %s: not_before %s: no such column", c.Name, c.NotBefore)
		case out[i].Type.Kind != c.Type.Kind || c.NotBefore == c.Name:
			d.fail(&yaml.Node{Line: c.Line}, "column %s: not_before %s: want another column of type %s", c.Name, c.NotBefore, c.Type)
		}
	}
	return out
}

// column reads one column.
func (d *decoder) column(n *yaml.Node) Column {
	m := d.fields(n, "a column", "name", "from", "type", "nullable", "values", "pattern", "not_before")
	c := Column{Line: n.Line}
	v, ok := m["name"]
	if !d.ok() || !ok {
		d.fail(n, "a column without a name: want name:, like name: customer")
		return c
	}
	c.Name = d.name(v.value, "name")
	c.From = []string{c.Name}
	if v, ok := m["from"]; ok {
		c.From = d.dotted(v.value, "from")
	}
	v, ok = m["type"]
	if !ok {
		d.fail(n, "column %s: no type: want type:, like string(40), int64 or \"decimal(15,2)\"", c.Name)
		return c
	}
	s := d.str(v.value, "type")
	if !d.ok() {
		return c
	}
	t, err := ParseType(s)
	if strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r > '~' }) {
		err = fmt.Errorf("type %q: want printable ASCII, like string(40)", s)
	}
	if err != nil {
		d.fail(v.value, "%v", err)
		return c
	}
	c.Type = t
	if v, ok := m["nullable"]; ok {
		c.Nullable = d.boolean(v.value, "nullable")
	}
	if v, ok := m["pattern"]; ok {
		c.Pattern = d.str(v.value, "pattern")
		_, err := regexp.Compile(c.Pattern)
		switch {
		case !d.ok():
		case t.Kind != String && t.Kind != Text:
			d.fail(v.value, "column %s: pattern is for string and text columns, not %s", c.Name, t)
		case c.Pattern == "":
			d.fail(v.value, "column %s: pattern: empty: want a regular expression, or leave pattern out", c.Name)
		case err != nil:
			d.fail(v.value, "column %s: pattern %q: %v", c.Name, c.Pattern, err)
		}
	}
	if v, ok := m["not_before"]; ok {
		c.NotBefore = d.name(v.value, "not_before")
		if d.ok() && t.Kind != Date && t.Kind != DateTime {
			d.fail(v.value, "column %s: not_before is for date and datetime columns, not %s", c.Name, t)
		}
	}
	if v, ok := m["values"]; ok {
		pairs := d.pairs(v.value, "values")
		if d.ok() && len(pairs) == 0 {
			d.fail(v.value, "values: empty: want {source value: stored value}, or leave values out")
		}
		c.Values = make(map[string]string, len(pairs))
		for _, p := range pairs {
			if err := Fits(t, p[1].Value); err != nil && d.ok() {
				d.fail(p[1], "values: %q stores %q, which does not fit %s: %v", p[0].Value, p[1].Value, t, err)
			}
			c.Values[p[0].Value] = p[1].Value
		}
	}
	return c
}

// keyKinds are the kinds a key column may have.
var keyKinds = []Kind{String, Int32, Int64, Date, Bool, Decimal}

// key reads a key: a column name or a list of them, each declared in cols,
// not nullable and of a key kind, their index (with the parent's key
// columns of a child) within MySQL's limit.
func (d *decoder) key(n *yaml.Node, cols, parent []Column) []string {
	items := []*yaml.Node{n}
	if n.Kind == yaml.MappingNode {
		d.fail(n, "key: want a column or a list of columns, not a map")
		return nil
	}
	if n.Kind == yaml.SequenceNode {
		items = n.Content
		if len(items) == 0 {
			d.fail(n, "key: empty: want one or more columns")
		}
	}
	var out []string
	bytes := 0
	for _, p := range parent {
		bytes += IndexBytes(p.Type)
	}
	for _, it := range items {
		k := d.str(it, "key")
		if !d.ok() {
			return nil
		}
		i := slices.IndexFunc(cols, func(c Column) bool { return c.Name == k })
		switch {
		case i < 0:
			d.fail(it, "key column %q is not declared%s: declare it under columns:", k, didYouMean(k, cols))
		case slices.Contains(out, k):
			d.fail(it, "key column %q given twice", k)
		case cols[i].Nullable:
			d.fail(it, "key column %q is nullable: a key column cannot be (drop nullable: true)", k)
		case !slices.Contains(keyKinds, cols[i].Type.Kind):
			d.fail(it, "key column %q is %s: a key column is string(N), int32, int64, date, bool or decimal(P,S)", k, cols[i].Type)
		default:
			bytes += IndexBytes(cols[i].Type)
		}
		out = append(out, k)
	}
	if d.ok() && bytes > MaxIndexBytes {
		what := "the key takes"
		if len(parent) > 0 {
			what = "the parent key and the child key take"
		}
		d.fail(n, "%s %d bytes of index, more than MySQL's %d (utf8mb4: 4 bytes a character): shorten the key's strings", what, bytes, MaxIndexBytes)
	}
	return out
}

// children reads an entity's children.
func (d *decoder) children(n *yaml.Node, e *Entity) []*Child {
	items := d.list(n, "children")
	if d.ok() && len(items) == 0 {
		d.fail(n, "children: empty: want at least one child, or leave children out")
	}
	var parentKey []Column
	for _, i := range e.KeyIndexes() {
		if i >= 0 {
			parentKey = append(parentKey, e.Columns[i])
		}
	}
	names := map[string]int{}
	var out []*Child
	for _, it := range items {
		m := d.fields(it, "a child", "name", "table", "from", "key", "columns")
		if !d.ok() {
			return nil
		}
		c := &Child{Line: it.Line}
		v, ok := m["name"]
		if !ok {
			d.fail(it, "a child without a name: want name:, like name: items")
			return nil
		}
		c.Name = d.name(v.value, "name")
		if first, dup := names[c.Name]; dup && d.ok() {
			d.fail(v.value, "child %q declared twice in entity %s (first on line %d)", c.Name, e.Name, first)
		}
		if col := e.Column(c.Name); col != nil && d.ok() {
			d.fail(v.value, "child %q is named like column %s of entity %s (line %d): a change event carries both under their names in data; rename the child", c.Name, col.Name, e.Name, col.Line)
		}
		names[c.Name] = c.Line
		c.Table, c.From = c.Name, []string{c.Name}
		if t, ok := m["table"]; ok {
			c.Table, v = d.name(t.value, "table"), t
		}
		d.claim(v.value, c.Table, "child "+e.Name+"."+c.Name)
		if v, ok := m["from"]; ok {
			c.From = d.dotted(v.value, "from")
		}
		if v, ok := m["columns"]; ok {
			c.Columns = d.columns(v.value, parentKey)
		} else {
			d.fail(it, "child %s: no columns: want columns:, the child's key columns among them", c.Name)
		}
		if v, ok := m["key"]; ok {
			c.Key = d.key(v.value, c.Columns, parentKey)
		} else {
			d.fail(it, "child %s: no key: want key: [column, ...], a line's key within its parent", c.Name)
		}
		out = append(out, c)
	}
	return out
}
