package discover

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/erpsync/erpsync/internal/entity"
)

// Options configures Config.
type Options struct {
	// URL is the service root, written as erp.url. Its user name,
	// password and query are left out (they may hold a secret). Defaults
	// to empty, which Config refuses.
	URL string
}

// Errors of Config.
var (
	// ErrNoDocument is returned for a document that is not CSDL XML.
	ErrNoDocument = errors.New("discover: not a CSDL document (edmx:Edmx with edmx:DataServices/Schema)")
	// ErrNoEntitySets is returned for a document without an entity set.
	ErrNoEntitySets = errors.New("discover: the document declares no entity set")
	// ErrNothingToSync is returned when no entity set of the document can
	// be synced (none has a change timestamp, say); the error names them
	// with their reasons.
	ErrNothingToSync = errors.New("discover: no entity set can be synced")
)

// Config reads metadata, a CSDL XML document (an OData v4 service's
// $metadata), and returns a config file with an entity per entity set, in
// the document's order. The file is valid as it is; every guess carries a
// comment, and an entity set erpsync cannot sync is written commented out
// with the reason. When none can be synced, the error wraps
// ErrNothingToSync and names them with their reasons.
func Config(metadata []byte, opts Options) ([]byte, error) {
	root, note, err := serviceRoot(opts.URL)
	if err != nil {
		return nil, err
	}
	doc, m, err := parse(metadata)
	if err != nil {
		return nil, err
	}
	var specs []*spec
	tables := newNames(entity.OwnTables)
	for _, sc := range doc.Schemas {
		for _, c := range sc.Containers {
			for _, set := range c.Sets {
				s := m.entitySet(sc.Namespace+"."+c.Name, set.Name, set.EntityType, set.Annotations)
				if !s.disabled() {
					s.name, s.renamed = tables.take(s.name, "table")
				}
				for _, c := range s.children {
					c.table = suffixed(s.name, "_"+c.name)
					if !s.disabled() {
						c.table, _ = tables.take(c.table, "table")
					}
				}
				specs = append(specs, s)
			}
		}
	}
	if len(specs) == 0 {
		return nil, ErrNoEntitySets
	}
	if !slices.ContainsFunc(specs, func(s *spec) bool { return !s.disabled() }) {
		var why []string
		for i, s := range specs {
			if i == 3 {
				why = append(why, fmt.Sprintf("and %d more", len(specs)-i))
				break
			}
			why = append(why, sanitize(s.set)+": "+s.reason)
		}
		return nil, fmt.Errorf("%w: %s", ErrNothingToSync, strings.Join(why, "; "))
	}
	var b bytes.Buffer
	writeFile(&b, root, note, specs)
	return b.Bytes(), nil
}

// parse reads metadata, a V4 or V2 CSDL document, and returns it with
// its model.
func parse(metadata []byte) (*document, *model, error) {
	var doc document
	if err := xml.Unmarshal(metadata, &doc); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrNoDocument, err)
	}
	if len(doc.Schemas) == 0 {
		return nil, nil, ErrNoDocument
	}
	fromV2(metadata, &doc)
	return &doc, newModel(&doc), nil
}

// spec is the entity discover writes for one entity set.
type spec struct {
	set     string
	name    string // the entity's name and table
	renamed string // why name is not the set's snake case
	key     []string
	// updatedAt and version are the guessed source properties, with what
	// a person should check.
	updatedAt, updatedNote string
	version, versionNote   string
	columns                []col
	navs                   []string // comments on the navigation properties left out
	children               []*child
	reason                 string // not empty: why the entity is written commented out
}

func (s *spec) disabled() bool { return s.reason != "" }

// child is one child discover writes: a composition's lines.
type child struct {
	name, renamed string
	table         string
	from          string // the navigation property
	key           []string
	columns       []col
}

// col is one column, or (typ empty) a property left out with the reason.
type col struct {
	name, from, typ string
	nullable        bool
	comment         string
}

// prop is one property of an entity type, with a complex type's
// properties flattened into dotted paths.
type prop struct {
	path     []string
	edm      string // the primitive Edm type, or "" when m says why not
	facets   facets
	m        mapped // for a type that is not primitive (enumeration, collection)
	nullable bool
	computed bool
	etag     bool   // named by the set's Core.OptimisticConcurrency
	label    string // sap:label (V2)
	noFilter bool   // sap:filterable="false" (V2): no cursor
}

func (p prop) from() string { return strings.Join(p.path, ".") }

// identifier is an OData SimpleIdentifier; a name that is not one is not
// written (it cannot be a source property erpsync could read back).
var identifier = regexp.MustCompile(`^[\p{L}\p{Nl}_][\p{L}\p{Nl}\p{Nd}\p{Mn}\p{Mc}\p{Pc}]{0,127}$`)

// entitySet returns the spec of the entity set name of type typeName in
// the container qualified by containerName.
func (m *model) entitySet(containerName, name, typeName string, inline []annotation) *spec {
	s := &spec{set: name, name: snake(name)}
	if !identifier.MatchString(name) {
		s.set = sanitize(name)
		s.reason = "the name is not an OData identifier"
		return s
	}
	t, ok := m.entities[typeName]
	if !ok {
		s.reason = fmt.Sprintf("its entity type %s is not declared in $metadata", sanitize(typeName))
		return s
	}
	setAnn := append(slices.Clone(inline), m.annotations[containerName+"/"+name]...)
	etags := m.paths(setAnn, "OptimisticConcurrency")
	chain := hierarchy(m.entities, t)
	var keyRefs []string
	var navs []navigation
	for _, ct := range chain {
		if len(ct.Key) > 0 {
			keyRefs = keyRefs[:0]
			for _, k := range ct.Key {
				keyRefs = append(keyRefs, k.Name)
			}
		}
		navs = append(navs, ct.Navs...)
	}
	acc := &flat{seen: map[string]bool{}}
	for _, ct := range chain {
		m.flatten(ct, nil, false, 0, acc)
	}
	props, skipped := acc.props, acc.skipped
	for i := range props {
		props[i].etag = slices.Contains(etags, strings.Join(props[i].path, "/"))
	}
	if len(keyRefs) == 0 {
		s.reason = "its entity type declares no key"
		return s
	}
	keyProps := map[string]bool{}
	for _, k := range keyRefs {
		keyProps[strings.ReplaceAll(k, "/", ".")] = true
	}
	s.updatedAt, s.updatedNote = guessUpdatedAt(cursors(props), keyProps)
	if s.updatedAt == "" {
		s.updatedNote += unfilterable(props, keyProps)
	}
	s.version, s.versionNote = guessVersion(props, keyProps)
	if s.updatedAt != "" && s.version == "" {
		s.updatedNote = join(s.updatedNote, coarseCursor(props, s.updatedAt))
	}
	var byFrom map[string]string
	s.columns, byFrom, s.reason = columnsOf(props, skipped, keyProps, newNames(entity.Reserved), func(from string) bool {
		return from == s.updatedAt || from == s.version
	})
	for _, k := range keyRefs {
		from := strings.ReplaceAll(k, "/", ".")
		name, ok := byFrom[from]
		if !ok && s.reason == "" {
			s.reason = fmt.Sprintf("its key property %s is not a property of the type", sanitize(k))
		}
		s.key = append(s.key, name)
	}
	if s.updatedAt == "" && s.reason == "" {
		s.reason = "no change timestamp (" + s.updatedNote + ")"
	}
	var parentKey []col
	for _, k := range s.key {
		if i := slices.IndexFunc(s.columns, func(c col) bool { return c.name == k && c.typ != "" }); i >= 0 {
			parentKey = append(parentKey, s.columns[i])
		}
	}
	children := newNames(nil)
	for _, n := range navs {
		what := fmt.Sprintf("%s: a navigation property (to %s), not synced", sanitize(n.Name), sanitize(n.Type))
		if !m.composition(n) {
			s.navs = append(s.navs, what+": not a composition (ContainsTarget, or a collection deleted with its record or without an entity set of its own)")
			continue
		}
		c, why := m.child(n, parentKey)
		if c == nil {
			s.navs = append(s.navs, what+": a composition, but "+why)
			continue
		}
		c.name, c.renamed = children.take(c.name, "child")
		s.children = append(s.children, c)
	}
	return s
}

// columnsOf returns the columns of props (cols hands out their names;
// keyProps are the key's paths; skip leaves a property out), then the
// properties of skipped and those that have no column type with the
// reason; the column names by their property paths; and why the entity
// cannot be synced, when a key property has no column type or a type no
// key may have.
func columnsOf(props []prop, skipped []col, keyProps map[string]bool, cols *names, skip func(from string) bool) (columns []col, byFrom map[string]string, reason string) {
	byFrom = map[string]string{}
	for _, p := range props {
		from := p.from()
		if skip(from) {
			continue
		}
		key := keyProps[from]
		c := col{from: from}
		mp := p.m
		if p.edm != "" {
			mp = column(p.edm, p.facets, key)
		}
		c.comment = mp.comment
		if !mp.ok {
			if key {
				reason = fmt.Sprintf("its key property %s has no column type: %s", from, mp.comment)
			}
			skipped = append(skipped, col{from: from, comment: mp.comment})
			continue
		}
		if key && !keyKinds[mp.typ.Kind] && reason == "" {
			reason = fmt.Sprintf("its key property %s would be a %s column, which cannot be a key (string(N), int32, int64, decimal(P,S), bool or date)", from, mp.typ)
		}
		c.typ = mp.typ.String()
		c.nullable = p.nullable && !key
		var why string
		c.name, why = cols.take(snake(strings.Join(p.path, "_")), "column")
		if p.computed {
			c.comment = join(c.comment, "computed by the server (Core.Computed)")
		}
		if p.label != "" {
			c.comment = join(p.label, c.comment)
		}
		c.comment = join(why, c.comment)
		byFrom[from] = c.name
		columns = append(columns, c)
	}
	return append(columns, skipped...), byFrom, reason
}

// composition reports whether n leads to the lines of its record: it
// contains its target (ContainsTarget), or is a collection whose target
// is deleted with the record (OnDelete Cascade, as SAP CAP writes a
// composition) or has no entity set of its own.
func (m *model) composition(n navigation) bool {
	target, many := strings.CutPrefix(n.Type, "Collection(")
	t := m.entities[strings.TrimSuffix(target, ")")]
	return n.ContainsTarget || many && (n.OnDelete.Action == "Cascade" || t != nil && !m.exposed[t])
}

// child returns the child of the composition n of a record whose key
// columns are parentKey, or nil and why none can be written: its lines'
// properties but those that hold the parent's key (the referential
// constraints of n's partner), and its key the target's without them.
func (m *model) child(n navigation, parentKey []col) (*child, string) {
	target, many := strings.CutPrefix(n.Type, "Collection(")
	t, ok := m.entities[strings.TrimSuffix(target, ")")]
	switch {
	case !many:
		return nil, "a single entity, not a collection of lines"
	case !identifier.MatchString(n.Name):
		return nil, "the name is not an OData identifier"
	case !ok:
		return nil, "its type is not declared in $metadata"
	}
	c := &child{name: snake(n.Name), from: n.Name}
	chain := hierarchy(m.entities, t)
	var keyRefs []string
	up := map[string]bool{} // the line's copies of its parent's key
	for _, ct := range chain {
		if len(ct.Key) > 0 {
			keyRefs = keyRefs[:0]
			for _, k := range ct.Key {
				keyRefs = append(keyRefs, strings.ReplaceAll(k.Name, "/", "."))
			}
		}
		for _, k := range n.up {
			up[k] = true
		}
		for _, back := range ct.Navs {
			if back.Name == n.Partner {
				for _, rc := range back.Constraints {
					up[strings.ReplaceAll(rc.Property, "/", ".")] = true
				}
			}
		}
	}
	acc := &flat{seen: map[string]bool{}}
	for _, ct := range chain {
		m.flatten(ct, nil, false, 0, acc)
	}
	keyProps := map[string]bool{}
	for _, k := range keyRefs {
		keyProps[k] = !up[k]
	}
	cols := newNames(entity.Reserved)
	bytes := 0
	for _, k := range parentKey {
		cols.taken[k.name] = true // the child table has the parent's key columns
		t, _ := entity.ParseType(k.typ)
		bytes += entity.IndexBytes(t)
	}
	var byFrom map[string]string
	var reason string
	c.columns, byFrom, reason = columnsOf(acc.props, acc.skipped, keyProps, cols, func(from string) bool { return up[from] })
	if reason != "" {
		return nil, strings.TrimPrefix(reason, "its ")
	}
	for _, k := range keyRefs {
		if up[k] {
			continue
		}
		name, ok := byFrom[k]
		if !ok {
			return nil, fmt.Sprintf("key property %s is not a property of the type", sanitize(k))
		}
		c.key = append(c.key, name)
		t, _ := entity.ParseType(c.columns[slices.IndexFunc(c.columns, func(c col) bool { return c.name == name })].typ)
		bytes += entity.IndexBytes(t)
	}
	switch {
	case len(c.key) == 0:
		return nil, "its lines have no key of their own (their key is the parent's)"
	case bytes > entity.MaxIndexBytes:
		return nil, fmt.Sprintf("the parent key and the line key take %d bytes of index, more than MySQL's %d", bytes, entity.MaxIndexBytes)
	}
	return c, ""
}

// flat collects the properties of an entity type.
type flat struct {
	props   []prop
	skipped []col // the properties that cannot be read
	seen    map[string]bool
}

// flatten adds the properties of t to acc, those of a complex type as
// dotted paths below prefix (nullable when the complex value is).
func (m *model) flatten(t *structured, prefix []string, nullable bool, depth int, acc *flat) {
	typeName := m.qualifiedName(t)
	for _, p := range t.Props {
		path := append(slices.Clone(prefix), p.Name)
		if len(acc.props)+len(acc.skipped) >= maxProps {
			return
		}
		if !identifier.MatchString(p.Name) {
			acc.skipped = append(acc.skipped, col{from: sanitize(strings.Join(path, ".")), comment: "the name is not an OData identifier"})
			continue
		}
		if acc.seen[strings.Join(path, ".")] {
			continue // redeclared by a derived type
		}
		acc.seen[strings.Join(path, ".")] = true
		ann := append(slices.Clone(p.Annotations), m.annotations[typeName+"/"+p.Name]...)
		q := prop{path: path, nullable: nullable || p.Nullable != "false", computed: m.hasTrue(ann, "Computed"),
			label: sanitize(p.Label), noFilter: p.Filterable == "false"}
		q.edm, q.facets = p.Type, facets{p.MaxLength, p.Precision, p.Scale}
		if def, ok := m.typeDefs[p.Type]; ok {
			q.edm = def.UnderlyingType
			q.facets = facets{cmpOr(p.MaxLength, def.MaxLength), cmpOr(p.Precision, def.Precision), cmpOr(p.Scale, def.Scale)}
		}
		switch {
		case strings.HasPrefix(p.Type, "Collection("):
			q.edm, q.m = "", mapped{entity.Type{Kind: entity.JSON}, true, "a collection (" + sanitize(p.Type) + "): stored as its JSON array"}
		case m.enums[p.Type] != nil:
			q.edm, q.m = "", enum(m.enums[p.Type])
		case m.complex[p.Type] != nil:
			c := m.complex[p.Type]
			if depth >= 4 {
				acc.skipped = append(acc.skipped, col{from: q.from(), comment: "a structured value nested too deep: not flattened"})
				continue
			}
			for _, ct := range hierarchy(m.complex, c) {
				m.flatten(ct, path, q.nullable, depth+1, acc)
			}
			continue
		}
		acc.props = append(acc.props, q)
	}
}

// keyKinds are the kinds a key column may have.
var keyKinds = map[entity.Kind]bool{entity.String: true, entity.Int32: true, entity.Int64: true, entity.Decimal: true, entity.Bool: true, entity.Date: true}

// maxProps bounds the properties of one entity set, structured values
// flattened: InnoDB holds at most 1,017 columns, and a document whose
// complex types nest into each other cannot make Config run for ever.
const maxProps = 1000

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// updatedAtNames are the names of change timestamps in the services
// erpsync knows (lower case, without underscores), the likeliest first:
// SAP CAP's managed aspect, Business Central, S/4HANA, Dataverse.
var updatedAtNames = []string{
	"modifiedat", "lastmodifieddatetime", "systemmodifiedat", "lastchangedatetime",
	"lastchangedat", "changedat", "changedon", "lastmodifiedat", "lastmodifiedon",
	"modifiedon", "updatedat", "lastupdatedat", "lastupdateddatetime", "modifieddatetime",
	"changeddatetime", "lastchangedon", "lastmodified", "updatedon",
}

// guessUpdatedAt returns the likeliest change timestamp of props that is
// not a key, and the comment on the guess; or "" and why none fits.
func guessUpdatedAt(props []prop, key map[string]bool) (string, string) {
	var dates []string
	best, rank := likeliest(props, key, func(p prop, n string) int {
		changed := strings.Contains(n, "modif") || strings.Contains(n, "chang") || strings.Contains(n, "updat")
		if p.edm == "Edm.Date" && changed {
			dates = append(dates, p.path[0])
		}
		if p.edm != "Edm.DateTimeOffset" {
			return -1
		}
		switch r := slices.Index(updatedAtNames, n); {
		case r >= 0:
			return r
		case changed && !strings.Contains(n, "creat"):
			return len(updatedAtNames)
		case p.etag:
			return len(updatedAtNames) + 1
		}
		return -1
	})
	if best < 0 {
		why := "no Edm.DateTimeOffset property named like a change time (modifiedAt, LastChangeDateTime, lastModifiedDateTime, SystemModifiedAt, ChangedAt)"
		if len(dates) > 0 {
			why += "; " + strings.Join(dates, ", ") + " is an Edm.Date, a day, too coarse for a change cursor"
		}
		return "", why + "; to sync it, add updated_at: a date-time with zone that every change sets"
	}
	p := props[best]
	note := "guessed from the name: the change cursor; check that every change (and a change of a line) sets it, and that $filter and $orderby accept it"
	if rank == len(updatedAtNames)+1 {
		note = "guessed: the set's Core.OptimisticConcurrency timestamp; check that every change sets it"
	}
	if p.computed {
		note += "; the server sets it (Core.Computed)"
	}
	if p.nullable {
		note += "; nullable in $metadata: check that the server always sets it"
	}
	return p.from(), note
}

// coarseCursor warns of a change cursor from that counts less than
// milliseconds (Precision 0 to 2) in an entity without a version: the
// version is updated_at in microseconds, so two changes within one of its
// steps share a version, and the version guard drops the second.
func coarseCursor(props []prop, from string) string {
	i := slices.IndexFunc(props, func(p prop) bool { return p.from() == from })
	if i < 0 || props[i].facets.Precision == "" {
		return ""
	}
	p, err := strconv.Atoi(props[i].facets.Precision)
	if err != nil || p >= entity.DefaultDigits {
		return ""
	}
	step := map[int]string{0: "second", 1: "tenth of a second", 2: "hundredth of a second"}[p]
	return fmt.Sprintf("WARNING: Precision %d, a %s: with no version, two changes of a record within one %s share a version and the second is dropped by the version guard; add version: (an integer change counter) if the set has one", p, step, step)
}

// versionNames are the names of integer change counters (lower case,
// without underscores).
var versionNames = []string{"changecounter", "version", "versionnumber", "rowversion", "etag", "revision", "changecount", "changenumber", "updatecounter", "lockversion", "recordversion"}

// guessVersion returns the likeliest integer change counter of props
// that is not a key, and the comment on the guess; or "" and why none.
func guessVersion(props []prop, key map[string]bool) (string, string) {
	best, rank := likeliest(props, key, func(p prop, n string) int {
		if p.edm != "Edm.Int32" && p.edm != "Edm.Int64" {
			return -1
		}
		switch r := slices.Index(versionNames, n); {
		case r >= 0:
			return r
		case p.etag:
			return len(versionNames)
		case strings.Contains(n, "version") || strings.Contains(n, "counter") || strings.Contains(n, "etag"):
			return len(versionNames) + 1
		}
		return -1
	})
	if best < 0 {
		return "", "no integer change counter found: the version is updated_at in microseconds"
	}
	note := "guessed from the name: an integer change counter; check that it grows on every change of a record (the highest version wins)"
	if rank == len(versionNames) {
		note = "guessed: the set's Core.OptimisticConcurrency integer; check that it grows on every change of a record (the highest version wins)"
	}
	return props[best].from(), note
}

// likeliest returns the index in props of the top-level property that is
// not a key with the lowest rank (the first of equals), and the rank; -1
// when rank refuses every property. rank gets the property and its normal
// name, and returns -1 to refuse it.
func likeliest(props []prop, key map[string]bool, rank func(p prop, n string) int) (int, int) {
	best, low := -1, -1
	for i, p := range props {
		if len(p.path) != 1 || key[p.from()] {
			continue
		}
		if r := rank(p, normal(p.path[0])); r >= 0 && (best < 0 || r < low) {
			best, low = i, r
		}
	}
	return best, low
}

// normal is a name in lower case without underscores, for matching.
func normal(s string) string {
	return strings.ReplaceAll(strings.ToLower(s), "_", "")
}

func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
