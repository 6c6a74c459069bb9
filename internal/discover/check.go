package discover

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/erpsync/erpsync/internal/entity"
)

// Finding is one mistake Check finds in an entity of a config file: the
// line of the file that declares what is wrong, and what is. A warning
// names something that works but that a person should know.
type Finding struct {
	Line    int
	Warning bool
	Msg     string
}

// Check reads metadata, an OData V4 or V2 service's $metadata, and
// checks entity e, read from the entity set set, against it: that the
// set exists; that each column's source property (a dotted path into
// complex types too), updated_at's and version's are properties of the
// set's entity type; that each column's type holds every value of its
// property (a string(N) the property's MaxLength, a decimal(P,S) its
// digits before and after the point, an int32 no Edm.Int64), a datetime
// with fewer fraction digits than the property's Precision being a
// warning (a value with a non-zero digit past the column's is
// quarantined, not cut); and that the service can filter on updated_at
// (V2's sap:filterable="false" says it cannot). The findings come in the
// order of the entity's declaration. The error is for a document that is
// not CSDL.
func Check(metadata []byte, set string, e *entity.Entity) ([]Finding, error) {
	doc, m, err := parse(metadata)
	if err != nil {
		return nil, err
	}
	typeName, found := "", false
	for _, sc := range doc.Schemas {
		for _, c := range sc.Containers {
			for _, s := range c.Sets {
				if s.Name == set && !found {
					typeName, found = s.EntityType, true
				}
			}
		}
	}
	if !found {
		return []Finding{{Line: e.Line, Msg: fmt.Sprintf("entity %s: entity set %s: the service has no such entity set", e.Name, sanitize(set))}}, nil
	}
	t, ok := m.entities[typeName]
	if !ok {
		return []Finding{{Line: e.Line, Msg: fmt.Sprintf("entity %s: entity set %s: its entity type %s is not declared in $metadata", e.Name, set, sanitize(typeName))}}, nil
	}
	acc := &flat{seen: map[string]bool{}}
	for _, ct := range hierarchy(m.entities, t) {
		m.flatten(ct, nil, false, 0, acc)
	}
	props := map[string]prop{}
	for _, p := range acc.props {
		props[p.from()] = p
	}
	typ := sanitize(typeName)
	var out []Finding
	lookup := func(line int, what string, path []string) (prop, bool) {
		from := strings.Join(path, ".")
		p, ok := props[from]
		if !ok {
			out = append(out, Finding{Line: line, Msg: fmt.Sprintf("entity %s: %s: from %s: the entity type %s has no property %s", e.Name, what, from, typ, from)})
		}
		return p, ok
	}
	if len(e.UpdatedAt) > 0 {
		if p, ok := lookup(e.Line, "updated_at", e.UpdatedAt); ok && p.noFilter {
			out = append(out, Finding{Line: e.Line, Msg: fmt.Sprintf("entity %s: updated_at: %s is not filterable (sap:filterable=\"false\"): the service cannot page the changes by it", e.Name, p.from())})
		}
	}
	if len(e.Version) > 0 {
		lookup(e.Line, "version", e.Version)
	}
	for _, c := range e.Columns {
		if len(c.From) == 0 {
			continue
		}
		p, ok := lookup(c.Line, "column "+c.Name, c.From)
		if !ok {
			continue
		}
		need := p.m
		if p.edm != "" {
			need = column(p.edm, p.facets, false)
		}
		if !need.ok {
			continue
		}
		if msg, warn := holds(c.Type, need.typ, p); msg != "" {
			out = append(out, Finding{Line: c.Line, Warning: warn, Msg: fmt.Sprintf("entity %s: column %s %s: from %s, %s", e.Name, c.Name, c.Type, p.from(), msg)})
		}
	}
	return out, nil
}

// holds says why a column of type col cannot hold the values of property
// p, which discover maps to need ("" when it can); warn says the column
// holds them but quarantines some.
func holds(col, need entity.Type, p prop) (msg string, warn bool) {
	what := p.edm
	if p.facets.MaxLength != "" {
		what += " MaxLength " + p.facets.MaxLength
	}
	if p.facets.Precision != "" {
		what += " Precision " + p.facets.Precision
	}
	if p.facets.Scale != "" {
		what += " Scale " + p.facets.Scale
	}
	if what == "" {
		what = need.String()
	}
	cannot := func(why string) (string, bool) { return "an " + what + ": " + why, false }
	switch {
	case col.Kind == entity.JSON:
		return "", false
	case col.Kind == entity.Text && (need.Kind == entity.String || need.Kind == entity.Text):
		return "", false
	case col.Kind == entity.Int64 && need.Kind == entity.Int32:
		return "", false
	case col.Kind != need.Kind:
		return cannot(fmt.Sprintf("%s cannot hold its values (want %s)", col, need))
	}
	switch col.Kind {
	case entity.String:
		if col.Length < need.Length {
			return cannot(fmt.Sprintf("a value may be %d characters, longer than the column's %d (want %s)", need.Length, col.Length, need))
		}
	case entity.Decimal:
		if col.Scale < need.Scale || col.Precision-col.Scale < need.Precision-need.Scale {
			return cannot(fmt.Sprintf("a value may have %d digits before the point and %d after, the column holds %d and %d (want %s)",
				need.Precision-need.Scale, need.Scale, col.Precision-col.Scale, col.Scale, need))
		}
	case entity.DateTime:
		digits := need.Digits()
		if n, err := strconv.Atoi(p.facets.Precision); err == nil && n > digits {
			digits = n
		}
		if col.Digits() < digits {
			return fmt.Sprintf("an %s: a value may have %d fraction digits, the column keeps %d: a record whose value has a non-zero digit past the %s is quarantined, not cut", what, digits, col.Digits(), ordinal(col.Digits())), true
		}
	}
	return "", false
}

// ordinal is n as an English ordinal: 1st, 2nd, 3rd, 4th...
func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return strconv.Itoa(n) + "th"
	case n%10 == 1:
		return strconv.Itoa(n) + "st"
	case n%10 == 2:
		return strconv.Itoa(n) + "nd"
	case n%10 == 3:
		return strconv.Itoa(n) + "rd"
	}
	return strconv.Itoa(n) + "th"
}
