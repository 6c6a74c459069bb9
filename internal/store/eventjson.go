package store

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/outbox"
)

// eventJSON is an entity's change events compiled once: the members of an
// event's key and data in the order the outbox's encoder writes a map's
// (sorted by name), each name written as JSON already, so that an event
// is encoded straight from a row's values, without a map or reflection,
// with the outbox's functions (outbox.AppendString, AppendTime,
// AppendJSONText), into the bytes the map would have been encoded to.
type eventJSON struct {
	key  []member // the key columns
	data []member // the columns and the children
	// lines are, per child, the members of a line object.
	lines [][]member
}

// member is one member of an event object: its name as `"name":`, and
// which value it holds: column col of the row (or the line), or, when
// child >= 0, the lines of that child. digits are the fraction digits a
// datetime column's value is written with (eventDigits).
type member struct {
	name   string
	col    int
	child  int
	digits int
}

// eventDigits are the fraction digits of a second an event writes a value
// of type t with: milliseconds, or the P digits of a datetime(P) with P
// above 3.
func eventDigits(t entity.Type) int { return max(t.Digits(), entity.DefaultDigits) }

func sortedMembers(ms []member, names []string) []member {
	idx := make([]int, len(ms))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(names[a], names[b]) })
	out := make([]member, len(ms))
	for i, j := range idx {
		out[i] = ms[j]
		out[i].name = string(outbox.AppendString(nil, names[j])) + ":"
	}
	return out
}

// compileEventJSON compiles t's event encoder.
func (t *Table) compileEventJSON() {
	var key, data []member
	var keyNames, dataNames []string
	for i, c := range t.ent.Columns {
		data, dataNames = append(data, member{col: i, child: -1, digits: eventDigits(c.Type)}), append(dataNames, c.Name)
	}
	for _, k := range t.keys {
		key, keyNames = append(key, member{col: k, child: -1}), append(keyNames, t.ent.Columns[k].Name)
	}
	e := &eventJSON{}
	for c, lt := range t.lines {
		data, dataNames = append(data, member{child: c}), append(dataNames, lt.child.Name)
		var ms []member
		var names []string
		for j, col := range lt.child.Columns {
			ms, names = append(ms, member{col: j, child: -1, digits: eventDigits(col.Type)}), append(names, col.Name)
		}
		e.lines = append(e.lines, sortedMembers(ms, names))
	}
	e.key, e.data = sortedMembers(key, keyNames), sortedMembers(data, dataNames)
	t.evJSON = e
}

// appendValue appends v, of kind k (a datetime with digits fraction
// digits), as an event carries it: decimal and int64 as JSON strings, a
// date YYYY-MM-DD, a datetime RFC 3339 in UTC with milliseconds (a
// datetime(P) with P above 3: P digits), a json column as its JSON (an
// error when its text is not JSON).
func appendValue(b []byte, k entity.Kind, digits int, v entity.Value) ([]byte, error) {
	switch {
	case v.Null:
		return append(b, "null"...), nil
	case k == entity.Int32:
		return strconv.AppendInt(b, v.I, 10), nil
	case k == entity.Int64:
		return append(strconv.AppendInt(append(b, '"'), v.I, 10), '"'), nil
	case k == entity.Bool:
		return strconv.AppendBool(b, v.I != 0), nil
	case k == entity.DateTime:
		return append(outbox.AppendTimeDigits(append(b, '"'), v.T, digits), '"'), nil
	case k == entity.JSON:
		return outbox.AppendJSONText(b, v.S)
	}
	return outbox.AppendString(b, v.S), nil // string, text, decimal, date
}

// appendObject appends the object of ms over vals, of kinds; cols names
// the columns in errors.
func appendObject(b []byte, ms []member, vals []entity.Value, kinds []entity.Kind, cols []entity.Column) ([]byte, error) {
	b = append(b, '{')
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m.name...)
		var err error
		if b, err = appendValue(b, kinds[m.col], m.digits, vals[m.col]); err != nil {
			return b, fmt.Errorf("%s: %w", cols[m.col].Name, err)
		}
	}
	return append(b, '}'), nil
}

// encode sets ev's KeyJSON and DataJSON from r.
func (e *eventJSON) encode(t *Table, r *Row, ev *outbox.Event) error {
	key, err := appendObject(make([]byte, 0, 64), e.key, r.Vals, t.kinds, t.ent.Columns)
	if err != nil {
		return err
	}
	b := make([]byte, 0, 256)
	b = append(b, '{')
	for i, m := range e.data {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m.name...)
		if m.child < 0 {
			if b, err = appendValue(b, t.kinds[m.col], m.digits, r.Vals[m.col]); err != nil {
				return fmt.Errorf("%s: %w", t.ent.Columns[m.col].Name, err)
			}
			continue
		}
		var lines entity.Lines
		if m.child < len(r.Children) {
			lines = r.Children[m.child]
		}
		lt := t.lines[m.child]
		b = append(b, '[')
		for n, line := range lines {
			if n > 0 {
				b = append(b, ',')
			}
			if b, err = appendObject(b, e.lines[m.child], line, lt.kinds, lt.child.Columns); err != nil {
				return fmt.Errorf("%s line %d: %w", lt.child.Name, n+1, err)
			}
		}
		b = append(b, ']')
	}
	ev.KeyJSON, ev.DataJSON = key, append(b, '}')
	return nil
}
