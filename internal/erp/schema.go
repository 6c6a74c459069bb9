package erp

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/erpsync/erpsync/internal/entity"
)

// Schema is the typed decoder of one source of an entity, compiled once by
// Compile: which members of an item it reads (a list of names per object
// level, matched by length and bytes), and how each column's value is
// checked and stored. A page is decoded with a Schema (or a *Mapping, the
// membership decoder) by the same hand-written reader; nothing is looked
// up by name per field and record, and no number passes through a float64.
// A Schema is safe for concurrent use.
type Schema struct {
	e    *entity.Entity
	src  entity.Source
	cols []column
	keys []int // indexes in cols of the key columns, in key order
	root level
	// nslots is how many leaves an item is read into: one per distinct
	// path of a column, updated_at and version.
	nslots  int
	updated int // slot of updated_at
	version int // slot of version; -1: updated_at in microseconds
	// updLabel and verLabel name updated_at and version in reasons.
	updLabel, verLabel string
	props              []string // the top-level properties read
	exact              bool     // a decimal or int64 column
	// integerVersion refuses a version written as a string (IntegerVersion).
	integerVersion bool
	// children are the compiled children, in the entity's order.
	children []childSchema
}

// childSchema is a compiled child: the leaf of the record that holds its
// collection, and how each line is read (a level and columns of its own).
type childSchema struct {
	name   string
	label  string   // the name, with its property when that has another name
	from   []string // the collection's path
	slot   int      // the record's leaf holding the collection
	cols   []column
	keys   []int // indexes in cols of the key columns, in key order
	root   level
	nslots int
	props  []string // the top-level properties of a line
	exact  bool
}

// IntegerVersion returns a copy of s that reads the version only from a
// JSON integer, as the erpsync REST API writes it (and the membership
// decoder reads it); s itself also takes an integer string, as OData
// writes an Edm.Int64 under IEEE754Compatible=true.
func (s *Schema) IntegerVersion() *Schema {
	c := *s
	c.integerVersion = true
	return &c
}

// column is a compiled column.
type column struct {
	name     string
	typ      entity.Type
	nullable bool
	key      bool
	slot     int          // the leaf it reads; -1: a constant of the source
	konst    entity.Value // the constant, when slot < 0
	// check is the leaf of a constant's own property, which a record
	// need not carry but, when it does, must hold the constant; -1: none.
	check int
	// values maps a source value (a string, or a number or boolean as
	// written) to its stored value; nil: stored as it comes.
	values map[string]entity.Value
	listed string // the source values of values, for reasons
	// pattern is the regular expression a string or text value must
	// match; nil: any.
	pattern *regexp.Regexp
	// notBefore is the index of the column this one's date or date-time
	// may not be before; -1: none.
	notBefore int
}

// level is one object level of the paths an item is read at.
type level struct {
	members []member
	slots   []int // every slot under the level, reset when its member repeats
}

// member is a member name of a level: a leaf, a nested level, or both.
type member struct {
	name  string
	slot  int    // the leaf that ends here; -1: none
	child *level // the level below; nil: none
	path  string // the dotted path to here, for reasons
}

// find returns the member named key, or nil: the names of a level are
// compared by length, then bytes. It tries the member at *next first and
// sets *next past the one it finds: the items of a feed list their
// members in one order, so a level read in that order costs one
// comparison a member, not a scan of the level.
func (lv *level) find(key []byte, next *int) *member {
	if i := *next; i < len(lv.members) {
		if m := &lv.members[i]; len(m.name) == len(key) && m.name == string(key) {
			*next = i + 1
			return m
		}
	}
	for i := range lv.members {
		m := &lv.members[i]
		if len(m.name) == len(key) && m.name == string(key) {
			*next = i + 1
			return m
		}
	}
	return nil
}

// add returns the slot of path below lv, adding the levels and the leaf it
// needs; next is the slot a new leaf takes.
func (lv *level) add(path []string, prefix string, next *int) int {
	name := path[0]
	var m *member
	for i := range lv.members {
		if lv.members[i].name == name {
			m = &lv.members[i]
		}
	}
	if m == nil {
		lv.members = append(lv.members, member{name: name, slot: -1, path: prefix + name})
		m = &lv.members[len(lv.members)-1]
	}
	if len(path) == 1 {
		if m.slot < 0 {
			m.slot = *next
			*next++
		}
		return m.slot
	}
	if m.child == nil {
		m.child = &level{}
	}
	return m.child.add(path[1:], m.path+".", next)
}

// at returns the member at path below lv, which add made.
func (lv *level) at(path []string) *member {
	for i := range lv.members {
		if m := &lv.members[i]; m.name == path[0] {
			if len(path) == 1 {
				return m
			}
			return m.child.at(path[1:])
		}
	}
	return nil
}

// reads reports whether m is or leads to a leaf below slot leaves: one of
// the record's own, not a child's collection.
func (m *member) reads(leaves int) bool {
	if m.slot >= 0 && m.slot < leaves {
		return true
	}
	return m.child != nil && slices.ContainsFunc(m.child.slots, func(k int) bool { return k < leaves })
}

// collect fills the slots lists of lv and the levels below it.
func (lv *level) collect() []int {
	lv.slots = lv.slots[:0]
	for i := range lv.members {
		m := &lv.members[i]
		if m.slot >= 0 {
			lv.slots = append(lv.slots, m.slot)
		}
		if m.child != nil {
			lv.slots = append(lv.slots, m.child.collect()...)
		}
	}
	return lv.slots
}

// Compile compiles the typed decoder of the entity e read from src, one of
// e.Sources (or any source of e's records): the columns src.Set fills are
// constants, the others are read from each item at their From paths. It
// refuses a declaration it cannot decode: no key or updated_at, a key
// column that is nullable or of type text or json, a Set or values entry
// that does not fit its column, a Set naming no column.
func Compile(e *entity.Entity, src entity.Source) (*Schema, error) {
	if e == nil {
		return nil, errors.New("erp: compile: no entity")
	}
	fail := func(format string, args ...any) (*Schema, error) {
		return nil, fmt.Errorf("erp: compile entity %s: %s", e.Name, fmt.Sprintf(format, args...))
	}
	switch {
	case len(e.Columns) == 0:
		return fail("no columns")
	case len(e.Key) == 0:
		return fail("no key")
	case len(e.UpdatedAt) == 0 || slices.Contains(e.UpdatedAt, ""):
		return fail("no updated_at property")
	case slices.Contains(e.Version, ""):
		return fail("version %q: an empty name in the path", strings.Join(e.Version, "."))
	}
	s := &Schema{e: e, src: src, version: -1}
	for name := range src.Set {
		if e.Column(name) == nil {
			return fail("source %s sets %s, which is not a column", src.Name, name)
		}
	}
	var err error
	if s.cols, s.exact, err = compileColumns(e.Columns, e.Key, src, &s.root, &s.nslots); err != nil {
		return fail("%v", err)
	}
	for _, k := range e.KeyIndexes() {
		if k < 0 {
			return fail("a key column is not declared")
		}
		s.keys = append(s.keys, k)
	}
	s.updated = s.root.add(e.UpdatedAt, "", &s.nslots)
	s.updLabel = label("updated_at", e.UpdatedAt)
	if e.Version != nil {
		s.version = s.root.add(e.Version, "", &s.nslots)
		s.verLabel = label("version", e.Version)
	} else {
		s.verLabel = "version (from updated_at)"
	}
	leaves := s.nslots
	for _, ec := range e.Children {
		ch, err := compileChild(ec, &s.root, &s.nslots, leaves)
		if err != nil {
			return fail("child %s: %v", ec.Name, err)
		}
		s.exact = s.exact || ch.exact
		s.children = append(s.children, ch)
	}
	for _, ch := range s.children {
		if root := s.root.at(ch.from); root.child != nil {
			return fail("child %s: from %s: a property inside the collection is read as a column, updated_at, version or another child's", ch.name, root.path)
		}
	}
	s.addChecks()
	s.root.collect()
	for _, m := range s.root.members {
		if m.reads(leaves) {
			s.props = append(s.props, m.name)
		}
	}
	return s, nil
}

// compileColumns compiles the declared columns decl of a table whose key
// is key: the columns src.Set fills are constants, the others leaves of
// root at their From paths (next is the slot a new leaf takes). exact
// reports a decimal or int64 column read from the source.
func compileColumns(decl []entity.Column, key []string, src entity.Source, root *level, next *int) (cols []column, exact bool, err error) {
	fail := func(format string, args ...any) ([]column, bool, error) {
		return nil, false, fmt.Errorf(format, args...)
	}
	cols = make([]column, len(decl))
	for i, ec := range decl {
		c := column{name: ec.Name, typ: ec.Type, nullable: ec.Nullable, slot: -1, check: -1, key: slices.Contains(key, ec.Name), notBefore: -1}
		if ec.Pattern != "" {
			re, err := regexp.Compile(ec.Pattern)
			if err != nil {
				return fail("column %s: pattern %q: %v", c.name, ec.Pattern, err)
			}
			c.pattern = re
		}
		if ec.NotBefore != "" {
			c.notBefore = slices.IndexFunc(decl, func(o entity.Column) bool { return o.Name == ec.NotBefore })
			if c.notBefore < 0 || decl[c.notBefore].Type.Kind != ec.Type.Kind {
				return fail("column %s: not_before %s: want another column of type %s", c.name, ec.NotBefore, ec.Type)
			}
		}
		if c.typ.Kind < entity.String || c.typ.Kind > entity.JSON {
			return fail("column %s: unknown type %s", c.name, c.typ)
		}
		if c.key && (c.nullable || c.typ.Kind == entity.Text || c.typ.Kind == entity.JSON) {
			return fail("key column %s: a key column is neither nullable nor of type text or json", c.name)
		}
		path := ec.From
		if len(path) == 0 {
			path = []string{ec.Name}
		}
		if slices.Contains(path, "") {
			return fail("column %s: from %q has an empty name", c.name, strings.Join(path, "."))
		}
		v, set := src.Set[ec.Name]
		if set {
			konst, err := c.constant(v)
			if err != nil {
				return fail("source %s sets %s to %q: %v", src.Name, c.name, v, err)
			}
			c.konst = konst
		} else {
			c.slot = root.add(path, "", next)
		}
		if ec.Values != nil {
			c.values = make(map[string]entity.Value, len(ec.Values))
			var listed []string
			for from, to := range ec.Values {
				v, err := c.constant(to)
				if err != nil {
					return fail("column %s: values maps %q to %q: %v", c.name, from, to, err)
				}
				c.values[from] = v
				listed = append(listed, from)
			}
			slices.Sort(listed)
			c.listed = strings.Join(listed, ", ")
			if len(c.listed) > 200 {
				c.listed = c.listed[:200] + "..."
			}
		}
		exact = exact || !set && (c.typ.Kind == entity.Decimal || c.typ.Kind == entity.Int64)
		cols[i] = c
	}
	return cols, exact, nil
}

// addChecks reads, beside the record's own leaves, the property of each
// column the source sets (its from, or its name): a record that carries
// it must hold the constant there (checkSet). A property inside a child's
// collection is not read.
func (s *Schema) addChecks() {
	for i := range s.cols {
		c := &s.cols[i]
		if c.slot >= 0 {
			continue
		}
		path := s.e.Columns[i].From
		if len(path) == 0 {
			path = []string{c.name}
		}
		if slices.ContainsFunc(s.children, func(ch childSchema) bool { return ch.from[0] == path[0] }) {
			continue
		}
		c.check = s.root.add(path, "", &s.nslots)
	}
}

// checkSet says what is wrong when the record carries the property of c,
// a column its source sets, with another value than the constant: a
// record of another company than its source's, which the API served
// though the source's params or filter should have left it out. Missing
// and null are no value. "" when nothing is wrong.
func (c *column) checkSet(f []slot) string {
	if c.check < 0 {
		return ""
	}
	v := &f[c.check]
	if v.kind == kMissing || v.kind == kNull {
		return ""
	}
	var buf [64]byte
	got, out, spanned, msg := c.decode(v, buf[:0])
	text := got.Text(c.typ.Kind)
	if spanned {
		text = string(out)
	}
	want := c.konst.Text(c.typ.Kind)
	if msg == "" && text == want {
		return ""
	}
	held := describeSlot(*v)
	switch v.kind {
	case kString:
		held = quote(v.val)
	case kInt, kNumber, kTrue, kFalse:
		held = string(v.raw)
	}
	return "the record holds " + held + ", its source sets " + strconv.Quote(want) + ": a record that is not the source's own (its params or filter did not select its records)"
}

// compileChild compiles the child ec of an entity whose leaves are read
// at root: its collection is a leaf of root (next is the slot a new leaf
// takes; the slots below leaves are the record's own), its lines are read
// at the child's own level.
func compileChild(ec *entity.Child, root *level, next *int, leaves int) (childSchema, error) {
	from := ec.From
	if len(from) == 0 {
		from = []string{ec.Name}
	}
	ch := childSchema{name: ec.Name, label: label(ec.Name, from), from: from}
	switch {
	case len(ec.Columns) == 0:
		return ch, errors.New("no columns")
	case len(ec.Key) == 0:
		return ch, errors.New("no key")
	case slices.Contains(from, ""):
		return ch, fmt.Errorf("from %q has an empty name", strings.Join(from, "."))
	}
	var err error
	if ch.cols, ch.exact, err = compileColumns(ec.Columns, ec.Key, entity.Source{}, &ch.root, &ch.nslots); err != nil {
		return ch, err
	}
	if ch.keys = ec.KeyIndexes(); slices.Contains(ch.keys, -1) {
		return ch, errors.New("a key column is not declared")
	}
	before := *next
	switch ch.slot = root.add(from, "", next); {
	case ch.slot < leaves:
		return ch, fmt.Errorf("from %s: a column, updated_at or version reads that property", strings.Join(from, "."))
	case ch.slot < before:
		return ch, fmt.Errorf("from %s: another child reads that collection", strings.Join(from, "."))
	}
	ch.root.collect()
	for _, m := range ch.root.members {
		ch.props = append(ch.props, m.name)
	}
	return ch, nil
}

// label names updated_at or version in reasons, with its property when
// that has another name.
func label(name string, path []string) string {
	if p := strings.Join(path, "."); p != name {
		return name + " (" + p + ")"
	}
	return name
}

// constant reads a value of c as the config file writes it (Set, values):
// the column's stored text.
func (c *column) constant(text string) (entity.Value, error) {
	v := slot{field: field{kind: kString, val: []byte(text)}, raw: []byte(strconv.Quote(text))}
	switch c.typ.Kind {
	case entity.Bool:
		switch text {
		case "true":
			v.kind = kTrue
		case "false":
			v.kind = kFalse
		}
	case entity.JSON:
		v.kind, v.raw = kOther, []byte(text)
		if !jsonValid(v.raw) {
			return entity.Value{}, errors.New("not a JSON value")
		}
	}
	cc := *c
	cc.values, cc.key = nil, false
	val, buf, spanned, msg := cc.decode(&v, nil)
	if msg != "" {
		return entity.Value{}, errors.New(msg)
	}
	if spanned {
		val.S = string(buf)
	}
	return val, nil
}

// jsonValid reports whether b is one JSON value, by the page reader's
// rules.
func jsonValid(b []byte) bool {
	d := decoder{b: b}
	return d.skip() == nil && d.atEnd()
}

// Entity returns the entity s decodes.
func (s *Schema) Entity() *entity.Entity { return s.e }

// Source returns the source s decodes.
func (s *Schema) Source() entity.Source { return s.src }

// Properties returns the top-level properties an item is read at: those of
// the columns the source does not set, of the key, of updated_at and of
// version, in declaration order; not those that only hold a child's
// collection. It is what an OData $select asks.
func (s *Schema) Properties() []string { return slices.Clone(s.props) }

// Exact reports whether the entity or one of its children has a decimal or
// int64 column: values that a float64 would round, which an OData server
// sends as strings when asked with IEEE754Compatible=true.
func (s *Schema) Exact() bool { return s.exact }

// Child is one child collection of the entity as a source is asked for it.
type Child struct {
	// Name names the child in the entity and in reasons.
	Name string
	// From is the path of the property that holds the collection.
	From []string
	// Properties are the top-level properties a line is read at, in
	// declaration order: what an OData $expand's $select asks.
	Properties []string
}

// Children returns the entity's children, in declaration order; none for
// an entity without.
func (s *Schema) Children() []Child {
	out := make([]Child, len(s.children))
	for i, ch := range s.children {
		out[i] = Child{Name: ch.name, From: slices.Clone(ch.from), Properties: slices.Clone(ch.props)}
	}
	return out
}

// Key is one key column as a source is asked for it: its column, its type
// and its source path.
type Key struct {
	Column string
	Type   entity.Type
	// From is the path of the source property. Nil when the source sets
	// the column to a constant (Set).
	From []string
	// Mapped says the column has values: its stored values are not the
	// ones the source holds.
	Mapped bool
}

// Keys returns the key columns, in key order.
func (s *Schema) Keys() []Key {
	out := make([]Key, len(s.keys))
	for i, k := range s.keys {
		c, ec := &s.cols[k], &s.e.Columns[k]
		out[i] = Key{Column: c.name, Type: c.typ, Mapped: c.values != nil}
		if c.slot >= 0 {
			out[i].From = ec.From
			if len(ec.From) == 0 {
				out[i].From = []string{ec.Name}
			}
		}
	}
	return out
}

// UpdatedAt returns the path of the updated_at property.
func (s *Schema) UpdatedAt() []string { return slices.Clone(s.e.UpdatedAt) }

// Kinds of a typed slot's value, beyond those of a membership field.
const (
	kTrue      = kOther + 1 + iota // true
	kFalse                         // false
	kBadParent                     // an object on the path is another value
)

// slot is one leaf read from an item.
type slot struct {
	field
	raw []byte // the value as written
}

// typedItem reads the item ahead and adds it to p as a record of d.s or
// an invalid item.
func (d *decoder) typedItem(p *Page) error {
	s := d.s
	d.ws()
	start := d.i
	if cap(d.slots) < s.nslots {
		d.slots = make([]slot, s.nslots)
	}
	f := d.slots[:s.nslots]
	clear(f)
	d.twice = d.twice[:0]
	notObject := false
	if d.next() == '{' {
		if err := d.typedObject(&s.root, f); err != nil {
			return err
		}
	} else {
		if err := d.skip(); err != nil {
			return err
		}
		notObject = true
	}
	r, inv, ok := d.typedRecord(f, notObject, d.b[start:d.i])
	if ok {
		p.Records = append(p.Records, r)
	} else {
		p.Invalid = append(p.Invalid, inv)
	}
	return nil
}

// typedObject reads an object whose '{' is next into the slots f of lv's
// members, skipping the members lv does not name. A member lv names that
// the object gives more than once is added to d.twice (its path): the last
// one is read, nested leaves included, as encoding/json does, and the item
// is invalid for it.
func (d *decoder) typedObject(lv *level, f []slot) error {
	next := 0
	var seen uint64 // the members of lv met, the first 64 of them
	return d.object(func(key []byte) (err error) {
		m := lv.find(key, &next)
		if m != nil {
			// find left next past m.
			if i := next - 1; i < 64 && seen&(1<<i) != 0 || i >= 64 && m.slot >= 0 && f[m.slot].kind != kMissing {
				d.twice = append(d.twice, m.path)
			} else if i < 64 {
				seen |= 1 << i
			}
		}
		switch {
		case m == nil:
			err = d.skip()
		case m.child == nil:
			f[m.slot], err = d.value()
		default:
			err = d.parent(m, f)
		}
		return err
	})
}

// parent reads the value of a member that leads to nested leaves (and may
// be a leaf itself).
func (d *decoder) parent(m *member, f []slot) error {
	for _, k := range m.child.slots {
		f[k] = slot{}
	}
	c := d.next()
	if m.slot < 0 && c == '{' {
		return d.typedObject(m.child, f)
	}
	v, err := d.value()
	if err != nil {
		return err
	}
	if m.slot >= 0 {
		f[m.slot] = v
	}
	switch c {
	case '{':
		sub := decoder{b: v.raw, depth: d.depth}
		err := sub.typedObject(m.child, f)
		d.twice = append(d.twice, sub.twice...)
		return err
	case 'n':
		return nil // a null object: its leaves are missing
	}
	for _, k := range m.child.slots {
		f[k] = slot{field: field{kind: kBadParent, val: []byte(m.path)}}
	}
	return nil
}

// value reads any JSON value at d.i into a slot.
func (d *decoder) value() (slot, error) {
	start := d.i
	var v slot
	var err error
	switch c := d.next(); {
	case c == '"':
		v.kind = kString
		v.val, err = d.str()
	case c == 'n':
		v.kind = kNull
		err = d.literal("null")
	case c == 't':
		v.kind = kTrue
		err = d.literal("true")
	case c == 'f':
		v.kind = kFalse
		err = d.literal("false")
	case c == '-' || c >= '0' && c <= '9':
		var isInt bool
		v.val, isInt, err = d.number()
		v.kind = kNumber
		if isInt {
			v.kind = kInt
		}
	default:
		v.kind = kOther
		err = d.skip()
	}
	v.raw = d.b[start:d.i]
	return v, err
}

// typedRecord validates the slots f of an item against the schema: the
// record, or the item's quarantine entry.
func (d *decoder) typedRecord(f []slot, notObject bool, raw []byte) (Record, Invalid, bool) {
	s := d.s
	if notObject {
		return Record{}, Invalid{Reason: "item is not a JSON object", Raw: bytes.Clone(raw)}, false
	}
	n := len(s.cols)
	if len(d.vals)+n > cap(d.vals) {
		d.vals = make([]entity.Value, 0, n*64)
	}
	vals := d.vals[len(d.vals) : len(d.vals)+n : len(d.vals)+n]
	if cap(d.spans) < 2*n {
		d.spans = make([]int, 2*n)
	}
	spans := d.spans[:2*n]
	var pb [16]string
	buf, problems, keyOK := decodeColumns(s.cols, f, vals, spans, d.scratch[:0], pb[:0])
	d.scratch = buf
	problems = appendTwice(problems, d.twice)

	updatedAt, updOK := s.updatedAt(f)
	if !updOK {
		problems = append(problems, s.updLabel+": "+timeProblem(&f[s.updated], false, true, "an RFC 3339 date-time"))
	}
	version, verMsg := s.versionOf(f, updatedAt, updOK)
	if verMsg != "" {
		problems = append(problems, s.verLabel+": "+verMsg)
	}

	// One allocation for the record's strings, its key text included.
	keyAt := -1
	if keyOK && (len(s.keys) > 1 || spans[2*s.keys[0]] < 0) {
		keyAt = len(buf)
		buf = s.appendKey(buf, vals, spans)
		d.scratch = buf
	}
	all := string(buf)
	for i := range vals {
		if a := spans[2*i]; a >= 0 {
			vals[i].S = all[a:spans[2*i+1]]
		}
	}
	problems = checkOrder(s.cols, vals, spans, problems)
	var children []entity.Lines
	if len(s.children) > 0 {
		children = make([]entity.Lines, len(s.children))
		for i := range s.children {
			children[i], problems = d.lines(&s.children[i], &f[s.children[i].slot], problems)
		}
	}
	var erpID string
	switch {
	case keyAt >= 0:
		erpID = all[keyAt:]
	case keyOK:
		erpID = vals[s.keys[0]].S
	}
	if len(problems) > 0 {
		inv := Invalid{ErpID: erpID, Reason: strings.Join(problems, "; "), Raw: bytes.Clone(raw), UpdatedAt: updatedAt}
		if verMsg == "" {
			inv.Version = version
		}
		return Record{}, inv, false
	}
	d.vals = d.vals[:len(d.vals)+n]
	return Record{ErpID: erpID, Version: version, UpdatedAt: updatedAt, Vals: vals, Children: children}, Invalid{}, true
}

// appendTwice appends a problem for each member path of twice, which an
// object gave more than once.
func appendTwice(problems, twice []string) []string {
	for _, p := range twice {
		problems = append(problems, p+": "+givenTwice)
	}
	return problems
}

// decodeColumns decodes the leaves f of the columns cols into vals (the
// constants of a source as they are), appending the stored texts of the
// values that have one to buf: spans[2*i] and spans[2*i+1] bound column
// i's; spans[2*i] is -1 for a value that holds its own, -2 for one that
// failed. It returns buf, problems with a "column: what" entry appended
// for each value that failed, and whether every key column was read.
func decodeColumns(cols []column, f []slot, vals []entity.Value, spans []int, buf []byte, problems []string) ([]byte, []string, bool) {
	keyOK := true
	for i := range cols {
		c := &cols[i]
		spans[2*i] = -1
		if c.slot < 0 {
			vals[i] = c.konst
			if msg := c.checkSet(f); msg != "" {
				// Another source's record: the row of this source's
				// key is not the record's to mark, so it has no key.
				problems = append(problems, c.name+": "+msg)
				keyOK = false
			}
			continue
		}
		before := len(buf)
		v, out, spanned, msg := c.decode(&f[c.slot], buf)
		buf = out
		if msg != "" {
			problems = append(problems, c.name+": "+msg)
			keyOK = keyOK && !c.key
			buf = buf[:before]
			vals[i] = entity.Value{}
			spans[2*i] = -2 // failed: no rule across columns reads it
			continue
		}
		vals[i] = v
		if spanned {
			spans[2*i], spans[2*i+1] = before, len(buf)
		}
	}
	return buf, problems, keyOK
}

// checkOrder appends a problem for each not_before rule of cols that the
// values vals (their strings set; spans as decodeColumns left them) break.
func checkOrder(cols []column, vals []entity.Value, spans []int, problems []string) []string {
	for i := range cols {
		c := &cols[i]
		if c.notBefore < 0 || spans[2*i] == -2 || spans[2*c.notBefore] == -2 || vals[i].Null || vals[c.notBefore].Null {
			continue // a value that failed has its own reason
		}
		if b := &vals[c.notBefore]; vals[i].T.Before(b.T) || c.typ.Kind == entity.Date && vals[i].S < b.S {
			problems = append(problems, c.name+": before "+cols[c.notBefore].name)
		}
	}
	return problems
}

// appendKey appends the key text of a record's values (entity.KeyText of
// their Value.Text) to buf, which holds the values' texts at spans.
func (s *Schema) appendKey(buf []byte, vals []entity.Value, spans []int) []byte {
	for j, k := range s.keys {
		if j > 0 {
			buf = append(buf, entity.KeySeparator...)
		}
		switch v := &vals[k]; {
		case spans[2*k] >= 0:
			buf = append(buf, buf[spans[2*k]:spans[2*k+1]]...)
		case s.cols[k].typ.Kind == entity.Int32 || s.cols[k].typ.Kind == entity.Int64:
			buf = strconv.AppendInt(buf, v.I, 10)
		default:
			buf = append(buf, v.Text(s.cols[k].typ.Kind)...)
		}
	}
	return buf
}

// updatedAt reads the updated_at leaf: an RFC 3339 date-time with a zone.
func (s *Schema) updatedAt(f []slot) (time.Time, bool) {
	if v := &f[s.updated]; v.kind == kString {
		return parseTime(v.val)
	}
	return time.Time{}, false
}

// timeProblem says what is wrong with a date or date-time leaf v, parsed
// or not, in the years a table can store or not; "" when nothing is.
func timeProblem(v *slot, parsed, inRange bool, want string) string {
	switch {
	case v.kind != kString:
		return describeSlot(*v) + ", want " + want
	case !parsed:
		return quote(v.val) + " is not " + want
	case !inRange:
		return quote(v.val) + " is outside the years 1000-9999 that the table can store"
	}
	return ""
}

// versionOf returns the record's version, or what is wrong with it: the
// version leaf, a positive integer written as a JSON integer or an integer
// string, or updated_at in microseconds.
func (s *Schema) versionOf(f []slot, updatedAt time.Time, updOK bool) (int64, string) {
	if s.version < 0 {
		switch {
		case !updOK:
			return 0, "" // updated_at says what is wrong
		case updatedAt.UnixMicro() < 1:
			return 0, "updated_at is not after 1970-01-01T00:00:00Z"
		}
		return updatedAt.UnixMicro(), ""
	}
	v := &f[s.version]
	if s.integerVersion && v.kind == kString {
		return 0, quote(v.val) + " is a string, want an integer"
	}
	n, msg := integer(v, -1<<63, 1<<63-1)
	switch {
	case msg != "":
		return 0, msg
	case n < 1:
		return 0, cut(v.val) + " is below 1"
	}
	return n, ""
}

// decode checks the leaf v against c and returns its stored value. The
// stored text of a string, text, decimal, date or json value is appended
// to buf (spanned true), else held by the value.
func (c *column) decode(v *slot, buf []byte) (val entity.Value, out []byte, spanned bool, msg string) {
	switch v.kind {
	case kMissing, kNull:
		switch {
		case c.nullable:
			return entity.Value{Null: true}, buf, false, ""
		case v.kind == kMissing:
			return val, buf, false, "missing"
		}
		return val, buf, false, "null, and the column is not nullable"
	case kBadParent:
		return val, buf, false, string(v.val) + " is not an object"
	}
	if c.values != nil {
		switch v.kind {
		case kString, kInt, kNumber:
			if mv, ok := c.values[string(v.val)]; ok {
				return mv, buf, false, ""
			}
			return val, buf, false, quote(v.val) + " is not one of " + c.listed
		case kTrue, kFalse:
			if mv, ok := c.values[string(v.raw)]; ok {
				return mv, buf, false, ""
			}
			return val, buf, false, string(v.raw) + " is not one of " + c.listed
		}
		return val, buf, false, describeSlot(*v) + ", want one of " + c.listed
	}
	switch c.typ.Kind {
	case entity.String:
		msg = checkString(v, c.typ.Length)
		if msg == "" && c.key && len(v.val) == 0 {
			msg = "empty, in a key column"
		}
		if msg == "" && c.pattern != nil && !c.pattern.Match(v.val) {
			msg = quote(v.val) + " does not match " + c.pattern.String()
		}
		return val, append(buf, v.val...), msg == "", msg
	case entity.Text:
		switch {
		case v.kind != kString:
			msg = describeSlot(*v) + ", want a string"
		case !utf8.Valid(v.val):
			msg = badUTF8(v.val)
		case len(v.val) > maxText:
			msg = "longer than 65,535 bytes"
		case c.pattern != nil && !c.pattern.Match(v.val):
			msg = quote(v.val) + " does not match " + c.pattern.String()
		}
		return val, append(buf, v.val...), msg == "", msg
	case entity.Int32:
		val.I, msg = integer(v, -1<<31, 1<<31-1)
		return val, buf, false, msg
	case entity.Int64:
		val.I, msg = integer(v, -1<<63, 1<<63-1)
		return val, buf, false, msg
	case entity.Decimal:
		out, msg = decimal(v, c.typ, buf)
		return val, out, msg == "", msg
	case entity.Bool:
		switch v.kind {
		case kTrue:
			val.I = 1
		case kFalse:
		default:
			msg = describeSlot(*v) + ", want true or false"
		}
		return val, buf, false, msg
	case entity.Date:
		t, ok := parseDate(v.val)
		msg = timeProblem(v, ok, t.Year() >= 1000, "a date (YYYY-MM-DD)")
		return val, append(buf, v.val...), msg == "", msg
	case entity.DateTime:
		t, ok := parseTime(v.val)
		val.T = t
		msg = timeProblem(v, ok, storable(val.T), "an RFC 3339 date-time")
		if msg == "" && !entity.FractionKept(v.val, c.typ.Digits()) {
			// Never cut: a value the column cannot keep whole is refused.
			msg = quote(v.val) + fmt.Sprintf(" has more fraction digits of a second than %s keeps", c.typ)
		}
		return val, buf, false, msg
	}
	// entity.JSON
	return val, compact(buf, v.raw), true, ""
}

// maxText is the most bytes a TEXT column holds.
const maxText = 65535

// checkString checks a string(n) value: a valid UTF-8 string of at most n
// characters, without control characters.
func checkString(v *slot, n int) string {
	switch {
	case v.kind != kString:
		return describeSlot(*v) + ", want a string"
	case !utf8.Valid(v.val):
		return badUTF8(v.val)
	case len(v.val) > n && utf8.RuneCount(v.val) > n:
		return fmt.Sprintf("longer than %d characters", n)
	}
	if r, ok := controlChar(v.val); ok {
		return fmt.Sprintf("control character %U not allowed", r)
	}
	return ""
}

// describeSlot names what a leaf holds, for a reason.
func describeSlot(v slot) string {
	switch v.kind {
	case kTrue, kFalse:
		return "a boolean"
	case kOther:
		if len(v.raw) > 0 && v.raw[0] == '[' {
			return "an array"
		}
		return "an object"
	}
	return describe(v.field)
}

// integer reads an integer in [lo, hi] written as a JSON integer or as a
// string holding one (-?(0|[1-9][0-9]*)), exactly.
func integer(v *slot, lo, hi int64) (int64, string) {
	switch v.kind {
	case kInt:
	case kString:
		if !isInteger(v.val) {
			return 0, quote(v.val) + " is not an integer"
		}
	case kNumber:
		return 0, cut(v.val) + " is not an integer"
	default:
		return 0, describeSlot(*v) + ", want an integer"
	}
	b := v.val
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	// Accumulate in uint64: the magnitude of lo is at most 1<<63.
	limit := uint64(hi)
	if neg {
		limit = uint64(-(lo + 1)) + 1
	}
	var n uint64
	for _, c := range b {
		d := uint64(c - '0')
		if n > (limit-d)/10 {
			return 0, cut(v.val) + " is past the range of " + rangeName(lo)
		}
		n = n*10 + d
	}
	if neg {
		return int64(-n), "" // -(1<<63) wraps to itself
	}
	return int64(n), ""
}

func rangeName(lo int64) string {
	if lo == -1<<31 {
		return "int32"
	}
	return "int64"
}

// isInteger reports whether b is written as a JSON integer.
func isInteger(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 || b[0] == '0' && len(b) > 1 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isNumber reports whether b is written as a JSON number.
func isNumber(b []byte) bool {
	if len(b) == 0 || b[0] != '-' && (b[0] < '0' || b[0] > '9') {
		return false
	}
	d := decoder{b: b}
	_, _, err := d.number()
	return err == nil && d.i == len(b)
}

// cut returns a value for a reason, cut to a readable length.
func cut(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// maxExponent bounds the exponent of a decimal: beyond any input's length,
// so saturating at it changes no verdict.
const maxExponent = 1 << 40

// decimal checks a decimal(P,S) value (a JSON number or a string holding
// one, exponent forms included) and appends its canonical text to buf:
// the digits padded to the scale, no sign on zero. The digits are moved by
// the exponent, never computed in floating point.
func decimal(v *slot, t entity.Type, buf []byte) ([]byte, string) {
	switch v.kind {
	case kInt, kNumber:
	case kString:
		if !isNumber(v.val) {
			return buf, quote(v.val) + " is not a number"
		}
	default:
		return buf, describeSlot(*v) + ", want a number"
	}
	b := v.val
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	i := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	intPart, frac := b[:i], []byte(nil)
	if i < len(b) && b[i] == '.' {
		j := i + 1
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		frac, i = b[i+1:j], j
	}
	var exp int64
	if i < len(b) { // e or E
		i++
		expNeg := b[i] == '-'
		if b[i] == '+' || b[i] == '-' {
			i++
		}
		for ; i < len(b); i++ {
			if exp < maxExponent {
				exp = exp*10 + int64(b[i]-'0')
			}
		}
		if expNeg {
			exp = -exp
		}
	}
	// The digits are intPart then frac; the point stands after the
	// point-th of them.
	digit := func(j int64) byte {
		if j < int64(len(intPart)) {
			return intPart[j]
		}
		return frac[j-int64(len(intPart))]
	}
	total := int64(len(intPart) + len(frac))
	point := int64(len(intPart)) + exp
	first, last := int64(0), total-1
	for first < total && digit(first) == '0' {
		first++
	}
	for last >= first && digit(last) == '0' {
		last--
	}
	scale := int64(t.Scale)
	if first == total { // zero
		buf = append(buf, '0')
		if scale > 0 {
			buf = append(buf, '.')
			for range scale {
				buf = append(buf, '0')
			}
		}
		return buf, ""
	}
	switch {
	case point-first > int64(t.Precision-t.Scale):
		return buf, cut(v.val) + " has more integer digits than " + t.String()
	case last+1-point > scale:
		return buf, cut(v.val) + " has more fraction digits than " + t.String()
	}
	if neg {
		buf = append(buf, '-')
	}
	if point <= first {
		buf = append(buf, '0')
	}
	at := func(j int64) byte {
		if j >= first && j <= last {
			return digit(j)
		}
		return '0'
	}
	for j := first; j < point; j++ {
		buf = append(buf, at(j))
	}
	if scale > 0 {
		buf = append(buf, '.')
		for j := point; j < point+scale; j++ {
			buf = append(buf, at(j))
		}
	}
	return buf, ""
}

// compact appends the JSON value raw without the white space outside its
// strings, as json.Compact writes it.
func compact(buf, raw []byte) []byte {
	in := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case in && c == '\\':
			buf = append(buf, c, raw[i+1])
			i++
			continue
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			continue
		}
		buf = append(buf, c)
	}
	return buf
}

// DecodeItem decodes one item of a source's page, a JSON value that should
// be an object with the entity's properties, and validates it against the
// schema. It returns the record, or, when the item breaks a rule, its
// quarantine entry (ok false). An error means raw is not one JSON value.
func (s *Schema) DecodeItem(raw []byte) (rec Record, inv Invalid, ok bool, err error) {
	d := decoder{b: raw, s: s}
	var p Page
	err = d.typedItem(&p)
	if err == nil && !d.atEnd() {
		err = d.fail("data after the item")
	}
	switch {
	case err != nil:
		return Record{}, Invalid{}, false, fmt.Errorf("decode item: %w", err)
	case len(p.Records) == 1:
		return p.Records[0], Invalid{}, true, nil
	}
	return Record{}, p.Invalid[0], false, nil
}

// maxLineReasons is how many lines of one collection a reason names; the
// lines past them that do not fit are counted.
const maxLineReasons = 3

// lineScratch holds the buffers lines reuses from one record to the next.
type lineScratch struct {
	slots []slot
	buf   []byte
	spans []int
	bad   []lineProblem
	good  []int
}

// lineProblem is one thing wrong with a line: a column's problem, or the
// line's own.
type lineProblem struct {
	line int
	msg  string
}

// lines reads the collection v of the child ch into its lines. It returns
// them, or nil with problems appended: the collection is missing, null or
// not an array, a line is not an object or has a column that does not
// fit, or two lines have one key.
func (d *decoder) lines(ch *childSchema, v *slot, problems []string) (entity.Lines, []string) {
	switch {
	case v.kind == kMissing:
		return nil, append(problems, ch.label+": missing")
	case v.kind == kBadParent:
		return nil, append(problems, ch.label+": "+string(v.val)+" is not an object")
	case v.kind != kOther || v.raw[0] != '[':
		return nil, append(problems, ch.label+": "+describeSlot(*v)+", want an array of lines")
	}
	ls := &d.line
	if cap(ls.slots) < ch.nslots {
		ls.slots = make([]slot, ch.nslots)
	}
	f := ls.slots[:ch.nslots]
	nc := len(ch.cols)
	buf, spans, bad := ls.buf[:0], ls.spans[:0], ls.bad[:0]
	var vals []entity.Value
	// The array was read whole into v: it is valid JSON.
	sub := decoder{b: v.raw, i: 1, depth: d.depth}
	for n := 0; sub.next() != ']'; n++ {
		if n > 0 {
			sub.i++ // ','
		}
		vals = slices.Grow(vals, nc)[:(n+1)*nc]
		spans = slices.Grow(spans, 2*nc)[:2*(n+1)*nc]
		lv, lspans := vals[n*nc:], spans[2*n*nc:]
		if sub.next() != '{' {
			el, _ := sub.value()
			for i := range lspans {
				lspans[i] = -2
			}
			bad = append(bad, lineProblem{n, describeSlot(el) + ", want an object"})
			continue
		}
		clear(f)
		sub.twice = sub.twice[:0]
		if err := sub.typedObject(&ch.root, f); err != nil {
			return nil, append(problems, ch.label+": "+err.Error())
		}
		var lp [8]string
		var msgs []string
		buf, msgs, _ = decodeColumns(ch.cols, f, lv, lspans, buf, appendTwice(lp[:0], sub.twice))
		for _, m := range msgs {
			bad = append(bad, lineProblem{n, m})
		}
	}
	n := len(vals) / max(nc, 1)
	ls.buf, ls.spans = buf, spans
	all := string(buf)
	for i := range vals {
		if a := spans[2*i]; a >= 0 {
			vals[i].S = all[a:spans[2*i+1]]
		}
	}
	lines := make(entity.Lines, n)
	for j := range lines {
		lines[j] = vals[j*nc : (j+1)*nc : (j+1)*nc]
		for _, m := range checkOrder(ch.cols, lines[j], spans[2*j*nc:2*(j+1)*nc], nil) {
			bad = append(bad, lineProblem{j, m})
		}
	}
	slices.SortStableFunc(bad, func(a, b lineProblem) int { return a.line - b.line })
	// Two lines with one key: the rows of the child table could not hold
	// both. Lines that do not fit for another reason have their own.
	good := ls.good[:0]
	for j, k := 0, 0; j < n; j++ {
		for k < len(bad) && bad[k].line < j {
			k++
		}
		if k == len(bad) || bad[k].line != j {
			good = append(good, j)
		}
	}
	ls.good = good
	if len(good) > 1 {
		slices.SortStableFunc(good, func(a, b int) int { return ch.compareKeys(lines[a], lines[b]) })
		nbad := len(bad)
		for i, first := 1, 0; i < len(good); i++ {
			if ch.compareKeys(lines[good[i]], lines[good[first]]) != 0 {
				first = i
				continue
			}
			bad = append(bad, lineProblem{good[i], fmt.Sprintf("the same key as %s[%d]", ch.name, good[first])})
		}
		if len(bad) > nbad {
			slices.SortStableFunc(bad, func(a, b lineProblem) int { return a.line - b.line })
		}
	}
	ls.bad = bad[:0]
	if len(bad) == 0 {
		return lines, problems
	}
	reported, more, last, show, prefix := 0, 0, -1, false, ""
	for _, p := range bad {
		if p.line != last {
			last, show = p.line, reported < maxLineReasons
			if show {
				reported++
				prefix = ch.lineLabel(p.line, lines[p.line], spans[2*p.line*nc:])
			} else {
				more++
			}
		}
		if show {
			problems = append(problems, prefix+": "+p.msg)
		}
	}
	if more > 0 {
		problems = append(problems, fmt.Sprintf("%s: %d more lines do not fit", ch.label, more))
	}
	return nil, problems
}

// lineLabel names line j of ch in a reason: "items[3] (item_no 30)", the
// key left out when a key column could not be read.
func (ch *childSchema) lineLabel(j int, vals []entity.Value, spans []int) string {
	b := []byte(ch.name + "[" + strconv.Itoa(j) + "]")
	for i, k := range ch.keys {
		if spans[2*k] == -2 {
			return ch.name + "[" + strconv.Itoa(j) + "]"
		}
		if i == 0 {
			b = append(b, " ("...)
		} else {
			b = append(b, ", "...)
		}
		b = append(b, ch.cols[k].name...)
		b = append(b, ' ')
		if c := &ch.cols[k]; c.typ.Kind == entity.String {
			b = append(b, quote([]byte(vals[k].S))...)
		} else {
			b = append(b, vals[k].Text(c.typ.Kind)...)
		}
	}
	return string(append(b, ')'))
}

// compareKeys orders two lines of ch by their keys. Strings compare as
// the child table's key index does: byte for byte, a trailing space
// included (a NO PAD binary collation).
func (ch *childSchema) compareKeys(a, b []entity.Value) int {
	for _, k := range ch.keys {
		x, y := &a[k], &b[k]
		if c := cmp.Compare(x.I, y.I); c != 0 {
			return c
		}
		if c := x.T.Compare(y.T); c != 0 {
			return c
		}
		if c := strings.Compare(x.S, y.S); c != 0 {
			return c
		}
	}
	return 0
}
