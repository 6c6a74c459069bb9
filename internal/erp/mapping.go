package erp

import (
	"bytes"
	"fmt"
	"strings"
)

// Mapping names the properties a source serves a membership's fields
// under, and translates its status values. The zero of a field's property
// is the field's own name (erp_id, member_id, ...). A nil *Mapping is the
// REST API's own names with no translation.
type Mapping struct {
	props     [nFields]string   // property of each field
	index     map[string]int    // property to field
	labels    [nFields]string   // field names for reasons: "erp_id (No)"
	status    map[string]string // source value to one of ours
	noVersion bool              // version is updated_at in microseconds
}

// Fields are the names of a membership's fields, in the order of the
// schema, as --erp-map spells them.
func Fields() []string { return append([]string(nil), fieldNames[:]...) }

// statuses are the status values of the contract.
var statuses = []string{"ACTIVE", "SUSPENDED", "CANCELLED", "EXPIRED"}

// ParseMapping parses a field map ("erp_id=No,member_id=CustomerNo,...",
// from --erp-map; an empty "version=" means the source has no version, so
// that a record's version is its updated_at in microseconds since the
// epoch) and a status map ("active=ACTIVE,...", from --erp-status-map; a
// value not listed is used as it is). Fields not listed keep their own
// names. Both empty give nil: the REST API's own names. Errors name what
// is wrong in the spec, not the flag, which the caller adds.
func ParseMapping(fieldSpec, statusSpec string) (*Mapping, error) {
	if strings.TrimSpace(fieldSpec) == "" && strings.TrimSpace(statusSpec) == "" {
		return nil, nil
	}
	return parseMapping(fieldSpec, statusSpec)
}

// IdentityMapping returns the mapping of a source that serves the fields
// under their own names, with the rules of a mapped source (Edm.Date
// values for starts_at and ends_at).
func IdentityMapping() *Mapping {
	m, _ := parseMapping("", "")
	return m
}

func parseMapping(fieldSpec, statusSpec string) (*Mapping, error) {
	m := &Mapping{props: fieldNames, index: make(map[string]int, nFields)}
	fieldPairs, err := pairs(fieldSpec)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, p := range fieldPairs {
		k := fieldIndex([]byte(p[0]))
		switch {
		case k < 0:
			return nil, fmt.Errorf("unknown field %q (want one of %s)", p[0], strings.Join(fieldNames[:], ", "))
		case set[p[0]]:
			return nil, fmt.Errorf("field %s mapped twice", p[0])
		case p[1] == "" && k != fVersion:
			return nil, fmt.Errorf("field %s mapped to an empty property (only version= may be empty: no version)", p[0])
		}
		set[p[0]] = true
		m.props[k] = p[1]
		m.noVersion = m.noVersion || k == fVersion && p[1] == ""
	}
	for k, prop := range m.props {
		if k == fVersion && m.noVersion {
			continue
		}
		if other, dup := m.index[prop]; dup {
			return nil, fmt.Errorf("property %q read as both %s and %s", prop, fieldNames[other], fieldNames[k])
		}
		m.index[prop] = k
		m.labels[k] = fieldNames[k]
		if prop != fieldNames[k] {
			m.labels[k] += " (" + prop + ")"
		}
	}
	m.labels[fVersion] = fieldNames[fVersion]
	if m.noVersion {
		m.labels[fVersion] += " (from updated_at)"
	}

	statusPairs, err := pairs(statusSpec)
	if err != nil {
		return nil, err
	}
	for _, p := range statusPairs {
		switch {
		case p[0] == "":
			return nil, fmt.Errorf("status map: empty source value in %q", p[0]+"="+p[1])
		case statusOf([]byte(p[1])) == "":
			return nil, fmt.Errorf("status map: %q maps to %q, not one of %s", p[0], p[1], strings.Join(statuses, ", "))
		}
		if m.status == nil {
			m.status = map[string]string{}
		}
		if _, dup := m.status[p[0]]; dup {
			return nil, fmt.Errorf("status map: %q mapped twice", p[0])
		}
		m.status[p[0]] = p[1]
	}
	return m, nil
}

// pairs splits "a=b,c=d" into its pairs, spaces around names trimmed.
func pairs(spec string) ([][2]string, error) {
	var out [][2]string
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not name=value", item)
		}
		out = append(out, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
	}
	return out, nil
}

// Property returns the source's property of a field ("erp_id", ...), and
// whether the source has one: false only for a version derived from
// updated_at. A nil Mapping returns the field's own name.
func (m *Mapping) Property(field string) (string, bool) {
	k := fieldIndex([]byte(field))
	switch {
	case k < 0:
		return "", false
	case m == nil:
		return field, true
	case k == fVersion && m.noVersion:
		return "", false
	}
	return m.props[k], true
}

// Properties returns the source's properties of every field it serves, in
// the order of Fields: what an OData $select asks for.
func (m *Mapping) Properties() []string {
	var out []string
	for _, f := range fieldNames {
		if p, ok := m.Property(f); ok {
			out = append(out, p)
		}
	}
	return out
}

// DecodeItem decodes one item of a source's page, a JSON value that should
// be an object with the mapped properties, and validates it with the rules
// of the REST feed. It returns the record, or, when the item breaks a rule,
// its quarantine entry (ok false). An error means raw is not one JSON
// value.
func (m *Mapping) DecodeItem(raw []byte) (rec Record, inv Invalid, ok bool, err error) {
	d := decoder{b: raw, m: m}
	d.ws()
	var f fields
	if d.next() == '{' {
		err = d.item(&f)
	} else {
		err = d.skip()
		f.notObject = true
	}
	if err == nil && !d.atEnd() {
		err = d.fail("data after the item")
	}
	if err != nil {
		return Record{}, Invalid{}, false, fmt.Errorf("decode item: %w", err)
	}
	r, problems := d.record(&f)
	if problems != "" {
		return Record{}, d.invalid(&f, problems, bytes.TrimSpace(raw)), false, nil
	}
	return r, Invalid{}, true, nil
}

// field returns the index of the field a source's property holds, or -1.
func (m *Mapping) field(prop []byte) int {
	if k, ok := m.index[string(prop)]; ok {
		return k
	}
	return -1
}
