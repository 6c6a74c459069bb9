package store

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/outbox"
)

// eventJSON is an entity's change events compiled once: the members of an
// event's key and data in the order encoding/json writes a map's (sorted
// by name), each name written as JSON already, so that an event is
// encoded straight from a row's values, without a map or reflection, into
// the bytes the map would have been encoded to.
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
// digits), as jsonValue's value encodes: ok is false for a json column
// whose text does not encode (the caller falls back to encoding/json,
// which reports it).
func appendValue(b []byte, k entity.Kind, digits int, v entity.Value) ([]byte, bool) {
	switch {
	case v.Null:
		return append(b, "null"...), true
	case k == entity.Int32:
		return strconv.AppendInt(b, v.I, 10), true
	case k == entity.Int64:
		return append(strconv.AppendInt(append(b, '"'), v.I, 10), '"'), true
	case k == entity.Bool:
		return strconv.AppendBool(b, v.I != 0), true
	case k == entity.DateTime:
		return append(appendEventTime(append(b, '"'), v.T, digits), '"'), true
	case k == entity.JSON:
		raw, err := json.Marshal(json.RawMessage(v.S)) // compacted and escaped as encoding/json does
		return append(b, raw...), err == nil
	}
	return outbox.AppendString(b, v.S), true
}

// appendEventTime appends t as outbox.FormatTime writes it, RFC 3339 in
// UTC with milliseconds (or digits fraction digits, when more than 3),
// digit by digit: time.AppendFormat parses its layout at every call,
// which was a tenth of the CPU of an event. A year outside [0, 9999],
// which no DATETIME holds, goes to AppendFormat.
func appendEventTime(b []byte, t time.Time, digits int) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		if digits > entity.DefaultDigits {
			return t.AppendFormat(b, "2006-01-02T15:04:05."+"000000"[:digits]+"Z07:00")
		}
		return append(b, outbox.FormatTime(t)...)
	}
	hour, min, sec := t.Clock()
	b = append(appendDigits(b, year, 4), '-')
	b = append(appendDigits(b, int(month), 2), '-')
	b = append(appendDigits(b, day, 2), 'T')
	b = append(appendDigits(b, hour, 2), ':')
	b = append(appendDigits(b, min, 2), ':')
	b = append(appendDigits(b, sec, 2), '.')
	if digits > entity.DefaultDigits {
		return append(appendDigits(b, t.Nanosecond()/pow10[9-digits], digits), 'Z')
	}
	return append(appendDigits(b, t.Nanosecond()/1e6, 3), 'Z')
}

// pow10 are the powers of ten up to 10^9.
var pow10 = [10]int{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

// eventTime is t as an event writes a datetime of digits fraction digits
// (eventDigits).
func eventTime(t time.Time, digits int) string { return string(appendEventTime(nil, t, digits)) }

// appendObject appends the object of ms over vals, of kinds.
func appendObject(b []byte, ms []member, vals []entity.Value, kinds []entity.Kind) ([]byte, bool) {
	b = append(b, '{')
	ok := true
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m.name...)
		var good bool
		b, good = appendValue(b, kinds[m.col], m.digits, vals[m.col])
		ok = ok && good
	}
	return append(b, '}'), ok
}

// encode sets ev's KeyJSON and DataJSON from r; false when a value does
// not encode (ev is then left to encoding/json).
func (e *eventJSON) encode(t *Table, r *Row, ev *outbox.Event) bool {
	key, ok := appendObject(make([]byte, 0, 64), e.key, r.Vals, t.kinds)
	if !ok {
		return false
	}
	b := make([]byte, 0, 256)
	b = append(b, '{')
	for i, m := range e.data {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m.name...)
		if m.child < 0 {
			var good bool
			if b, good = appendValue(b, t.kinds[m.col], m.digits, r.Vals[m.col]); !good {
				return false
			}
			continue
		}
		var lines entity.Lines
		if m.child < len(r.Children) {
			lines = r.Children[m.child]
		}
		b = append(b, '[')
		for n, line := range lines {
			if n > 0 {
				b = append(b, ',')
			}
			var good bool
			if b, good = appendObject(b, e.lines[m.child], line, t.lines[m.child].kinds); !good {
				return false
			}
		}
		b = append(b, ']')
	}
	ev.KeyJSON, ev.DataJSON = key, append(b, '}')
	return true
}
