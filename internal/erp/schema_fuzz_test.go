package erp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/erpsync/erpsync/internal/entity"
)

// genEntity generates an entity declaration from seed: up to 8 columns of
// any type, nullable or not, some with values, some read from nested
// objects, a key of one or two columns, maybe set by the source, and
// updated_at (maybe nested) with or without a version; a third of them
// with one or two children (genChild).
func genEntity(seed uint64) (*entity.Entity, entity.Source) {
	r := rand.New(rand.NewPCG(seed, seed>>32^0x9e3779b97f4a7c15))
	e := &entity.Entity{Name: "gen", UpdatedAt: []string{"u"}}
	if r.IntN(4) == 0 {
		e.UpdatedAt = []string{"meta", "u"}
	}
	if r.IntN(2) == 0 {
		e.Version = []string{"v"}
	}
	e.Columns, e.Key = genColumns(r, 1+r.IntN(8))
	src := entity.Source{Name: "gen"}
	if k := e.Column(e.Key[0]); len(e.Key) > 1 && k.Values == nil && r.IntN(4) == 0 {
		src.Set = map[string]string{k.Name: map[entity.Kind]string{entity.String: "S", entity.Int32: "7", entity.Int64: "7", entity.Decimal: "0",
			entity.Bool: "true", entity.Date: "2000-01-01", entity.DateTime: "2000-01-01T00:00:00Z"}[k.Type.Kind]}
	}
	if r.IntN(3) == 0 {
		for k := range 1 + r.IntN(2) {
			e.Children = append(e.Children, genChild(r, k))
		}
	}
	return e, src
}

// genChild generates child k: up to 5 columns as genColumns makes them,
// some date or datetime ones not before another, a collection read at
// the child's name or inside an object.
func genChild(r *rand.Rand, k int) *entity.Child {
	ch := &entity.Child{Name: fmt.Sprintf("ch%d", k)}
	ch.From = []string{ch.Name}
	if r.IntN(4) == 0 {
		ch.From = []string{"doc", ch.Name}
	}
	ch.Columns, ch.Key = genColumns(r, 1+r.IntN(5))
	for i := range ch.Columns {
		c := &ch.Columns[i]
		if c.Type.Kind != entity.Date && c.Type.Kind != entity.DateTime || r.IntN(2) == 0 {
			continue
		}
		for j := range i {
			if ch.Columns[j].Type.Kind == c.Type.Kind {
				c.NotBefore = ch.Columns[j].Name
			}
		}
	}
	return ch
}

// genColumns generates n columns of any type and a key of one or two of
// them (an "id" column added when none can be a key).
func genColumns(r *rand.Rand, n int) ([]entity.Column, []string) {
	types := []func() entity.Type{
		func() entity.Type { return entity.Type{Kind: entity.String, Length: 1 + r.IntN(10)} },
		func() entity.Type { return entity.Type{Kind: entity.Text} },
		func() entity.Type { return entity.Type{Kind: entity.Int32} },
		func() entity.Type { return entity.Type{Kind: entity.Int64} },
		func() entity.Type {
			p := 1 + r.IntN(24)
			return entity.Type{Kind: entity.Decimal, Precision: p, Scale: r.IntN(min(p, 8) + 1)}
		},
		func() entity.Type { return entity.Type{Kind: entity.Bool} },
		func() entity.Type { return entity.Type{Kind: entity.Date} },
		func() entity.Type { return entity.DateTimeOf([]int{0, 3, 3, 6}[r.IntN(4)]) },
		func() entity.Type { return entity.Type{Kind: entity.JSON} },
	}
	var cols []entity.Column
	for i := range n {
		c := entity.Column{Name: fmt.Sprintf("c%d", i), Type: types[r.IntN(len(types))](), Nullable: r.IntN(3) == 0}
		switch r.IntN(6) {
		case 0:
			c.From = []string{"n", c.Name}
		case 1:
			c.From = []string{"meta", "m", c.Name}
		}
		if r.IntN(6) == 0 {
			switch c.Type.Kind {
			case entity.String:
				c.Values = map[string]string{"A": "a", "1": "b", "true": "c", "1.0": "d"}
			case entity.Int32, entity.Int64:
				c.Values = map[string]string{"A": "1", "2": "-2", "false": "0"}
			}
		}
		cols = append(cols, c)
	}
	var key []string
	for i := range cols {
		c := &cols[i]
		if c.Type.Kind != entity.Text && c.Type.Kind != entity.JSON && (len(key) == 0 || len(key) == 1 && r.IntN(3) == 0) {
			key = append(key, c.Name)
			c.Nullable = false
		}
	}
	if len(key) == 0 {
		cols = append(cols, entity.Column{Name: "id", Type: entity.Type{Kind: entity.String, Length: 8}})
		key = []string{"id"}
	}
	return cols, key
}

// leaves returns the paths an item of e is read at: the columns (not
// those the source sets), updated_at and version, then the properties of
// the columns the source sets.
func leaves(e *entity.Entity, src entity.Source) [][]string {
	var out [][]string
	for _, c := range e.Columns {
		if _, set := src.Set[c.Name]; !set {
			out = append(out, pathOf(c))
		}
	}
	out = append(out, e.UpdatedAt)
	if e.Version != nil {
		out = append(out, e.Version)
	}
	// Last, the property of a column the source sets: a record may carry
	// it, with the constant or with another company's value.
	for _, c := range e.Columns {
		if _, set := src.Set[c.Name]; set {
			out = append(out, pathOf(c))
		}
	}
	return out
}

func pathOf(c entity.Column) []string {
	if len(c.From) == 0 {
		return []string{c.Name}
	}
	return c.From
}

// genItem builds an item of e from data: data itself when it starts with
// '{', else an object with one leaf per NUL-separated piece of data, in
// leaves order (a piece that is no JSON is a string; "-" leaves the member
// out; an empty or missing piece is a value near the edges of the leaf's
// type, drawn from data).
func genItem(e *entity.Entity, src entity.Source, data []byte) []byte {
	if len(data) > 0 && data[0] == '{' {
		return data
	}
	pieces := bytes.Split(data, []byte{0})
	var h uint64 = 14695981039346656037
	for _, c := range data {
		h = (h ^ uint64(c)) * 1099511628211
	}
	r := rand.New(rand.NewPCG(h, uint64(len(data))))
	cols := map[string]entity.Column{strings.Join(e.UpdatedAt, "."): {Type: entity.Type{Kind: entity.DateTime}}, "v": {Type: entity.Type{Kind: entity.Int64}}}
	for _, c := range e.Columns {
		cols[strings.Join(pathOf(c), ".")] = c
	}
	// Half the documents have a header that fits where data says nothing,
	// so that their lines decide.
	fits := len(e.Children) > 0 && r.IntN(2) == 0
	obj := map[string]any{}
	for i, path := range leaves(e, src) {
		var raw json.RawMessage
		switch p := strings.Join(path, "."); {
		case (i >= len(pieces) || len(pieces[i]) == 0) && fits && p == "v":
			raw = json.RawMessage(`"7"`)
		case (i >= len(pieces) || len(pieces[i]) == 0) && fits:
			raw = json.RawMessage(validValue(r, cols[p]))
		case i >= len(pieces) || len(pieces[i]) == 0:
			raw = json.RawMessage(genValue(r, cols[p].Type))
		case string(pieces[i]) == "-":
			continue
		case json.Valid(pieces[i]):
			raw = pieces[i]
		default:
			raw, _ = json.Marshal(string(pieces[i]))
		}
		setPath(obj, path, raw)
	}
	for _, ch := range e.Children {
		if coll := genCollection(r, ch); coll != nil {
			setPath(obj, ch.From, coll)
		}
	}
	b, _ := json.Marshal(obj)
	return b
}

// setPath sets the member at path below obj, adding the objects on the
// way (and replacing any other value there).
func setPath(obj map[string]any, path []string, v json.RawMessage) {
	for _, name := range path[:len(path)-1] {
		sub, ok := obj[name].(map[string]any)
		if !ok {
			sub = map[string]any{}
			obj[name] = sub
		}
		obj = sub
	}
	obj[path[len(path)-1]] = v
}

// genCollection returns the collection of a child: most often an array of
// up to 4 lines (half the time of valid values, often repeating an earlier
// line's key), sometimes empty, null, another value or missing (nil).
func genCollection(r *rand.Rand, ch *entity.Child) json.RawMessage {
	switch r.IntN(12) {
	case 0:
		return nil
	case 1:
		return json.RawMessage(`null`)
	case 2:
		return json.RawMessage([]string{`{}`, `"x"`, `1`, `true`}[r.IntN(4)])
	case 3:
		return json.RawMessage(`[]`)
	}
	valid := r.IntN(2) == 0
	var lines []map[string]any
	out := make([]json.RawMessage, 1+r.IntN(4))
	for j := range out {
		if r.IntN(12) == 0 {
			out[j] = json.RawMessage([]string{`null`, `1`, `[]`, `"l"`}[r.IntN(4)])
			continue
		}
		line := map[string]any{}
		for _, c := range ch.Columns {
			v := genValue(r, c.Type)
			switch {
			case valid || r.IntN(3) > 0:
				v = validValue(r, c)
			case r.IntN(8) == 0:
				continue // missing
			}
			setPath(line, pathOf(c), json.RawMessage(v))
		}
		if len(lines) > 0 && r.IntN(3) == 0 {
			from := lines[r.IntN(len(lines))]
			for _, k := range ch.Key {
				c := ch.Columns[slices.IndexFunc(ch.Columns, func(c entity.Column) bool { return c.Name == k })]
				if v, ok := lookupPath(from, pathOf(c)); ok {
					setPath(line, pathOf(c), v)
				}
			}
		}
		lines = append(lines, line)
		out[j], _ = json.Marshal(line)
	}
	b, _ := json.Marshal(out)
	return b
}

// lookupPath returns the value genCollection set at path below obj.
func lookupPath(obj map[string]any, path []string) (json.RawMessage, bool) {
	for _, name := range path[:len(path)-1] {
		sub, ok := obj[name].(map[string]any)
		if !ok {
			return nil, false
		}
		obj = sub
	}
	v, ok := obj[path[len(path)-1]].(json.RawMessage)
	return v, ok
}

// validValue returns a JSON value that fits column c, drawn from a few so
// that keys repeat and not_before rules break.
func validValue(r *rand.Rand, c entity.Column) string {
	if c.Nullable && r.IntN(6) == 0 {
		return `null`
	}
	if c.Values != nil {
		return `"A"`
	}
	switch c.Type.Kind {
	case entity.String:
		var b strings.Builder
		for range 1 + r.IntN(c.Type.Length) {
			b.WriteString([]string{"a", "A", " ", "é"}[r.IntN(4)])
		}
		return `"` + b.String() + `"`
	case entity.Text:
		return `"text"`
	case entity.Int32, entity.Int64:
		return fmt.Sprintf([]string{"%d", "-%d", `"%d"`}[r.IntN(3)], r.IntN(1000))
	case entity.Decimal:
		v := "0"
		if c.Type.Precision > c.Type.Scale {
			v = fmt.Sprint(r.IntN(10))
		}
		if c.Type.Scale > 0 {
			v += "." + fmt.Sprint(r.IntN(10))
		}
		return []string{v, `"` + v + `"`}[r.IntN(2)]
	case entity.Bool:
		return []string{"true", "false"}[r.IntN(2)]
	case entity.Date:
		return fmt.Sprintf(`"2024-01-%02d"`, 1+r.IntN(28))
	case entity.DateTime:
		return fmt.Sprintf(`"2024-01-01T00:00:%02d.%03d+00:00"`, r.IntN(60), r.IntN(1000))
	}
	return `{"a":[1]}`
}

// genValue returns a JSON value for a leaf of type t, most often valid,
// often just past a limit, sometimes of another JSON type.
func genValue(r *rand.Rand, t entity.Type) string {
	digits := func(n int) string {
		var b strings.Builder
		for i := range n {
			c := byte('0' + r.IntN(10))
			if i == 0 && n > 1 && c == '0' {
				c = '1'
			}
			b.WriteByte(c)
		}
		return b.String()
	}
	quoted := func(s string) string {
		if r.IntN(2) == 0 {
			return `"` + s + `"`
		}
		return s
	}
	near := func(n int) int { return max(0, n-1+r.IntN(3)) }
	switch r.IntN(12) {
	case 0:
		return []string{`null`, `true`, `false`, `[]`, `{}`, `"x"`, `0`, `-1.5`}[r.IntN(8)]
	}
	switch t.Kind {
	case entity.String, entity.Text:
		n := near(t.Length)
		if t.Kind == entity.Text {
			n = r.IntN(5)
		}
		return `"` + strings.Repeat([]string{"a", "é", "😀", "\u0085", "\n", " "}[r.IntN(6)], n) + `"`
	case entity.Int32, entity.Int64:
		edges := []string{"2147483647", "2147483648", "-2147483648", "-2147483649", "9223372036854775807", "9223372036854775808",
			"-9223372036854775808", "-9223372036854775809", "9007199254740993", "0", "-0", "1", "01", "1.0", "1e2"}
		return quoted(edges[r.IntN(len(edges))])
	case entity.Decimal:
		intPart := digits(near(t.Precision - t.Scale))
		if intPart == "" {
			intPart = "0"
		}
		v := intPart
		if f := near(t.Scale); f > 0 {
			v += "." + digits(f)
		}
		if r.IntN(3) == 0 {
			v += strings.Repeat("0", r.IntN(4))
		}
		if r.IntN(4) == 0 && !strings.Contains(v, ".") {
			v += ".0"
		}
		if r.IntN(4) == 0 {
			v += []string{"e", "E", "e+", "E-", "e-"}[r.IntN(5)] + fmt.Sprint(r.IntN(5))
		}
		if r.IntN(3) == 0 {
			v = "-" + v
		}
		return quoted(v)
	case entity.Bool:
		return []string{"true", "false", `"true"`, "1"}[r.IntN(4)]
	case entity.Date:
		return fmt.Sprintf(`"%04d-%02d-%02d"`, []int{999, 1000, 2024, 2023, 9999}[r.IntN(5)], r.IntN(14), r.IntN(32))
	case entity.DateTime:
		zones := []string{"Z", "+01:00", "-23:59", "+24:00", "", "z"}
		return fmt.Sprintf(`"%04d-%02d-%02dT%02d:%02d:%02d.%s%s"`, []int{999, 1000, 2024, 9999, 1970}[r.IntN(5)], 1+r.IntN(12), 1+r.IntN(29),
			r.IntN(25), r.IntN(60), r.IntN(61), digits(1+r.IntN(9)), zones[r.IntN(len(zones))])
	}
	return []string{`{"a":[1, 2.50,{"b":null}]}`, `"s"`, `[ ]`, `12e-3`}[r.IntN(4)]
}

// refRecord is what the reference decoder makes of an item.
type refRecord struct {
	ok      bool
	vals    []entity.Value
	erpID   string
	version int64
	updated time.Time
	labels  []string // the columns (and updated_at, version) that failed
	skip    bool     // the reference cannot tell (an exponent too large for math/big)
	lines   []entity.Lines
	// lineLabels are how the reason's parts about the children start, in
	// order (one ending with '.' is a whole part).
	lineLabels []string
}

var (
	integerRe = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
	numberRe  = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?([0-9]+))?$`)
	// RFC 3339's time-numoffset: hours 00-23 (time.Parse takes +24:00).
	dateTimeRe = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`)
)

// reference decodes raw the slow, obvious way: encoding/json (UseNumber)
// into maps, then each column's rules with math/big and time.Parse.
func reference(e *entity.Entity, src entity.Source, raw []byte) refRecord {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil || top == nil {
		return refRecord{labels: nil}
	}
	// lookup walks path: the leaf's raw JSON, nil when missing, or
	// whether an object on the way is another value.
	lookup := func(path []string) (json.RawMessage, bool) { return lookupRaw(top, path) }
	var rr refRecord
	keyOK, foreign := true, false
	for _, c := range e.Columns {
		var v entity.Value
		var ok bool
		if text, set := src.Set[c.Name]; set {
			v, ok = refConstant(c, text)
			// A record that carries the constant's own property holds
			// the constant there, or it is another source's record.
			path := pathOf(c)
			if slices.ContainsFunc(e.Children, func(ch *entity.Child) bool { return ch.From[0] == path[0] }) {
				continue
			}
			if leaf, badParent := lookup(path); badParent || leaf != nil && string(leaf) != "null" {
				got, gotOK := refValue(c, leaf, badParent, false, &refRecord{})
				if !gotOK || got.Text(c.Type.Kind) != v.Text(c.Type.Kind) {
					rr.labels = append(rr.labels, c.Name)
					foreign = true
				}
			}
		} else {
			leaf, badParent := lookup(pathOf(c))
			v, ok = refValue(c, leaf, badParent, slices.Contains(e.Key, c.Name), &rr)
		}
		if !ok {
			rr.labels = append(rr.labels, c.Name)
			keyOK = keyOK && !slices.Contains(e.Key, c.Name)
		}
		rr.vals = append(rr.vals, v)
	}
	read := leaves(e, src)
	for _, ch := range e.Children {
		read = append(read, ch.From)
	}
	for _, p := range repeatedPaths(raw, read) {
		rr.labels = append(rr.labels, p+": "+givenTwice+".")
	}
	leaf, _ := lookup(e.UpdatedAt)
	var s string
	updOK := json.Unmarshal(leaf, &s) == nil && dateTimeRe.MatchString(s)
	if updOK {
		t, err := time.Parse(time.RFC3339Nano, s)
		updOK = err == nil
		rr.updated = t.UTC()
	}
	if !updOK {
		rr.updated = time.Time{}
		rr.labels = append(rr.labels, "updated_at")
	}
	if e.Version == nil {
		switch {
		case !updOK: // updated_at says what is wrong
		case rr.updated.UnixMicro() < 1:
			rr.labels = append(rr.labels, "version")
		default:
			rr.version = rr.updated.UnixMicro()
		}
	} else {
		leaf, _ := lookup(e.Version)
		if n, ok := refInteger(leaf); ok && n.Sign() > 0 && n.IsInt64() {
			rr.version = n.Int64()
		} else {
			rr.labels = append(rr.labels, "version")
		}
	}
	if keyOK && !foreign {
		var parts []string
		for _, k := range e.KeyIndexes() {
			parts = append(parts, rr.vals[k].Text(e.Columns[k].Type.Kind))
		}
		rr.erpID = entity.KeyText(parts)
	}
	for _, ch := range e.Children {
		leaf, badParent := lookup(ch.From)
		lines, expect := refLines(ch, leaf, badParent, &rr)
		rr.lines = append(rr.lines, lines)
		rr.lineLabels = append(rr.lineLabels, expect...)
	}
	rr.ok = len(rr.labels) == 0 && len(rr.lineLabels) == 0
	return rr
}

// refLines reads the collection leaf of the child ch: its lines, or what
// a reason must say about it, each entry the start of one of its parts
// (a part that is all of a message ends with '.').
func refLines(ch *entity.Child, leaf json.RawMessage, badParent bool, rr *refRecord) (entity.Lines, []string) {
	label := ch.Name
	if p := strings.Join(ch.From, "."); p != ch.Name {
		label += " (" + p + ")"
	}
	var elems []json.RawMessage
	switch {
	case badParent:
		return nil, []string{label}
	case leaf == nil:
		return nil, []string{label + ": missing."}
	case string(leaf) == "null":
		return nil, []string{label + ": null, want an array of lines."}
	case json.Unmarshal(leaf, &elems) != nil:
		return nil, []string{label}
	}
	keys := make([]int, len(ch.Key))
	for i, k := range ch.Key {
		keys[i] = slices.IndexFunc(ch.Columns, func(c entity.Column) bool { return c.Name == k })
	}
	lines := make(entity.Lines, len(elems))
	bad := map[int][]string{} // line: what its parts start with
	name := func(j int) string {
		n := fmt.Sprintf("%s[%d]", ch.Name, j)
		for i, k := range keys {
			v, c := lines[j][k], ch.Columns[k]
			sep := ", "
			if i == 0 {
				sep = " ("
			}
			text := v.Text(c.Type.Kind)
			if c.Type.Kind == entity.String {
				if len(text) > 40 {
					text = strconv.Quote(text[:40]) + "..."
				} else {
					text = strconv.Quote(text)
				}
			}
			n += sep + c.Name + " " + text
		}
		if len(keys) > 0 {
			n += ")"
		}
		return n
	}
	for j, raw := range elems {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil || obj == nil {
			bad[j] = []string{fmt.Sprintf("%s[%d]: ", ch.Name, j)}
			continue
		}
		var failed, twice []string
		for _, p := range repeatedPaths(raw, columnPaths(ch.Columns)) {
			twice = append(twice, p+": "+givenTwice+".")
		}
		ok := make([]bool, len(ch.Columns))
		for i, c := range ch.Columns {
			leaf, badParent := lookupRaw(obj, pathOf(c))
			var v entity.Value
			v, ok[i] = refValue(c, leaf, badParent, slices.Contains(ch.Key, c.Name), rr)
			if !ok[i] {
				failed = append(failed, c.Name)
			}
			lines[j] = append(lines[j], v)
		}
		for i, c := range ch.Columns {
			b := slices.IndexFunc(ch.Columns, func(o entity.Column) bool { return o.Name == c.NotBefore })
			if b < 0 || !ok[i] || !ok[b] || lines[j][i].Null || lines[j][b].Null {
				continue
			}
			if v, w := lines[j][i], lines[j][b]; v.T.Before(w.T) || v.S < w.S {
				failed = append(failed, c.Name+": before "+c.NotBefore+".")
			}
		}
		if len(failed)+len(twice) == 0 {
			continue
		}
		prefix := fmt.Sprintf("%s[%d]", ch.Name, j)
		if !slices.ContainsFunc(keys, func(k int) bool { return !ok[k] }) {
			prefix = name(j)
		}
		for _, f := range append(twice, failed...) {
			bad[j] = append(bad[j], prefix+": "+f)
		}
	}
	first := map[string]int{}
	for j := range elems {
		if _, isBad := bad[j]; isBad {
			continue
		}
		var parts []string
		for _, k := range keys {
			t := lines[j][k].Text(ch.Columns[k].Type.Kind)
			parts = append(parts, t)
		}
		key := strings.Join(parts, "\x1f")
		if f, dup := first[key]; dup {
			bad[j] = []string{fmt.Sprintf("%s: the same key as %s[%d].", name(j), ch.Name, f)}
		} else {
			first[key] = j
		}
	}
	if len(bad) == 0 {
		return lines, nil
	}
	var expect []string
	reported, more := 0, 0
	for j := range elems {
		switch {
		case bad[j] == nil:
		case reported < 3:
			expect = append(expect, bad[j]...)
			reported++
		default:
			more++
		}
	}
	if more > 0 {
		expect = append(expect, fmt.Sprintf("%s: %d more lines do not fit.", label, more))
	}
	return nil, expect
}

// lookupRaw walks path below obj: the leaf's raw JSON, nil when missing, or
// whether an object on the way is another value.
func lookupRaw(obj map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	for _, name := range path[:len(path)-1] {
		v, ok := obj[name]
		if !ok || string(v) == "null" {
			return nil, false
		}
		var sub map[string]json.RawMessage
		if json.Unmarshal(v, &sub) != nil {
			return nil, true
		}
		obj = sub
	}
	return obj[path[len(path)-1]], false
}

// refConstant reads a value as the config file writes it.
func refConstant(c entity.Column, text string) (entity.Value, bool) {
	raw, _ := json.Marshal(text)
	switch c.Type.Kind {
	case entity.Bool:
		raw = []byte(text)
	case entity.JSON:
		raw = []byte(text)
	}
	c.Values = nil
	return refValue(c, raw, false, false, nil)
}

// refInteger reads a JSON integer, or a string holding one.
func refInteger(leaf json.RawMessage) (*big.Int, bool) {
	var v any
	d := json.NewDecoder(bytes.NewReader(leaf))
	d.UseNumber()
	if leaf == nil || d.Decode(&v) != nil {
		return nil, false
	}
	var text string
	switch x := v.(type) {
	case json.Number:
		text = string(x)
	case string:
		text = x
	default:
		return nil, false
	}
	if !integerRe.MatchString(text) {
		return nil, false
	}
	n, ok := new(big.Int).SetString(text, 10)
	return n, ok
}

func refValue(c entity.Column, leaf json.RawMessage, badParent, key bool, rr *refRecord) (entity.Value, bool) {
	if badParent {
		return entity.Value{}, false
	}
	var v any
	if leaf != nil {
		d := json.NewDecoder(bytes.NewReader(leaf))
		d.UseNumber()
		if d.Decode(&v) != nil {
			panic("undecodable leaf")
		}
	}
	if v == nil {
		return entity.Value{Null: true}, c.Nullable
	}
	if c.Values != nil {
		var from string
		switch x := v.(type) {
		case string:
			if loneSurrogate(leaf) {
				return entity.Value{}, false // encoding/json made it U+FFFD
			}
			from = x
		case json.Number:
			from = string(x)
		case bool:
			from = fmt.Sprint(x)
		default:
			return entity.Value{}, false
		}
		to, ok := c.Values[from]
		if !ok {
			return entity.Value{}, false
		}
		return refConstant(c, to)
	}
	str, isString := v.(string)
	if isString && loneSurrogate(leaf) && (c.Type.Kind == entity.String || c.Type.Kind == entity.Text) {
		// encoding/json made it U+FFFD; the decoder refuses it.
		return entity.Value{}, false
	}
	switch c.Type.Kind {
	case entity.String:
		if !isString || utf8.RuneCountInString(str) > c.Type.Length || key && str == "" ||
			strings.ContainsFunc(str, func(r rune) bool { return r < 0x20 || r >= 0x7f && r <= 0x9f }) {
			return entity.Value{}, false
		}
		return entity.Value{S: str}, true
	case entity.Text:
		return entity.Value{S: str}, isString && len(str) <= 65535
	case entity.Int32, entity.Int64:
		n, ok := refInteger(leaf)
		lo, hi := big.NewInt(-1<<63), big.NewInt(1<<63-1)
		if c.Type.Kind == entity.Int32 {
			lo, hi = big.NewInt(-1<<31), big.NewInt(1<<31-1)
		}
		if !ok || n.Cmp(lo) < 0 || n.Cmp(hi) > 0 {
			return entity.Value{}, false
		}
		return entity.Value{I: n.Int64()}, true
	case entity.Decimal:
		text := str
		if num, ok := v.(json.Number); ok {
			text = string(num)
		} else if !isString {
			return entity.Value{}, false
		}
		m := numberRe.FindStringSubmatch(text)
		if m == nil {
			return entity.Value{}, false
		}
		if len(m[4]) > 4 { // math/big would build 10^exponent
			if rr != nil {
				rr.skip = true
			}
			return entity.Value{}, false
		}
		r, ok := new(big.Rat).SetString(text)
		if !ok {
			panic("big.Rat refuses " + text)
		}
		scaled := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(c.Type.Scale)), nil)))
		limit := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(c.Type.Precision-c.Type.Scale)), nil))
		if !scaled.IsInt() || new(big.Rat).Abs(r).Cmp(limit) >= 0 {
			return entity.Value{}, false
		}
		return entity.Value{S: r.FloatString(c.Type.Scale)}, true
	case entity.Bool:
		b, ok := v.(bool)
		if b {
			return entity.Value{I: 1}, ok
		}
		return entity.Value{}, ok
	case entity.Date:
		t, err := time.Parse("2006-01-02", str)
		if !isString || err != nil || t.Format("2006-01-02") != str || t.Year() < 1000 {
			return entity.Value{}, false
		}
		return entity.Value{S: str}, true
	case entity.DateTime:
		if !isString || !dateTimeRe.MatchString(str) {
			return entity.Value{}, false
		}
		t, err := time.Parse(time.RFC3339Nano, str)
		t = t.UTC()
		// The digits past the column's, after the point, are zeros.
		_, frac, _ := strings.Cut(strings.TrimRight(str[:strings.IndexAny(str[19:], "Zz+-")+19], "0"), ".")
		if err != nil || t.Year() < 1000 || t.Year() > 9999 || len(frac) > c.Type.Digits() {
			return entity.Value{}, false
		}
		return entity.Value{T: t}, true
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, leaf); err != nil {
		panic(err)
	}
	return entity.Value{S: buf.String()}, true
}

// reasonSays reports whether reason's parts begin, in order, as entries
// say: a column, updated_at or version the reference names (followed by
// ": " or " ("), the start of a part about a child, or a whole part (an
// entry ending with '.'), and no further part begins with one of names.
// Parts are found by their expected starts, not split at "; ", which a
// value quoted in a reason may hold.
func reasonSays(reason string, entries, names []string) bool {
	for i, e := range entries {
		whole := strings.HasSuffix(e, ".")
		e = strings.TrimSuffix(e, ".")
		if !strings.HasPrefix(reason, e) {
			return false
		}
		reason = reason[len(e):]
		switch {
		case whole && reason != "" && !strings.HasPrefix(reason, "; "):
			return false
		case !whole && !strings.HasSuffix(e, " ") && !strings.HasPrefix(reason, ": ") && !strings.HasPrefix(reason, " ("):
			return false
		}
		rest := ""
		if i+1 < len(entries) {
			next := strings.Index(reason, "; "+strings.TrimSuffix(entries[i+1], "."))
			if next < 0 {
				return false
			}
			reason, rest = reason[:next], reason[next+2:]
		}
		if namesPart(reason, names) {
			return false // a part the reference does not expect
		}
		reason = rest
	}
	return len(entries) > 0 || !namesPart("; "+reason, names)
}

// namesPart reports whether text holds a part of a reason ("; " then a
// name and ": ", " (" or "[") that begins with one of names.
func namesPart(text string, names []string) bool {
	for _, n := range names {
		for _, after := range []string{": ", " (", "["} {
			if strings.Contains(text, "; "+n+after) {
				return true
			}
		}
	}
	return false
}

// labelNames are the names a reason about a record of e begins its parts
// with.
func labelNames(e *entity.Entity) []string {
	names := []string{"updated_at", "version"}
	for _, c := range e.Columns {
		names = append(names, c.Name)
	}
	for _, ch := range e.Children {
		names = append(names, ch.Name)
	}
	return names
}

// reasonLabels returns the columns, updated_at and version that a reason
// names, in order.
func reasonLabels(reason string) []string {
	var out []string
	for _, part := range strings.Split(reason, "; ") {
		name, _, _ := strings.Cut(part, ": ")
		name, _, _ = strings.Cut(name, " (")
		out = append(out, name)
	}
	return out
}

func sameValue(a, b entity.Value) bool {
	return a.Null == b.Null && a.S == b.S && a.I == b.I && a.T.Equal(b.T)
}

// FuzzTypedDecode holds the typed decoder to the reference on generated
// declarations and items: the same verdict, the same values, key text,
// version and updated_at, and the same columns named in the reason.
func FuzzTypedDecode(f *testing.F) {
	for i, data := range []string{
		"", "\"k1\"\x00\"x\"", "1234.567\x001.5E+2\x00\"-0.10\"", "9007199254740993\x00\"9223372036854775808\"\x00-0",
		"true\x00false\x00null\x00-", "\"2024-02-29\"\x00\"2024-02-29T23:59:59.9999+01:00\"\x00\"0999-12-31\"",
		`{"c0":"a","u":"2025-01-01T00:00:00Z","v":1}`, `{"n":{"c0":1},"n":null,"meta":{"u":"2025-01-01T00:00:00Z"}}`,
		"{\"c0\":\"\xff\"}", "[1]\x00{\"a\" : [ 1, 2 ]}\x00\"\\u0000\"", "1e999999\x00\"1e-3\"\x00\"12.50e1\"",
		"\"A\"\x00\"1\"\x001\x00true\x001.0\x002\x00false",
		// Keys that differ by a trailing space or a lone surrogate, a
		// member given twice.
		"\"A \"\x00\"\\ud800\"\x00\"a\\udfff\"", `{"c0":"a","c0":"a","u":"2025-01-01T00:00:00Z","v":1}`,
		`{"n":{"c0":1,"c0":2},"n":{"c0":3},"meta":{"u":"2025-01-01T00:00:00Z","u":"2025-01-01T00:00:00Z"}}`,
	} {
		f.Add(uint64(i*7919+1), []byte(data))
	}
	// Documents: entities with children, their lines drawn from data.
	for _, seed := range []uint64{2, 6, 14, 15} {
		f.Add(seed, []byte("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
		f.Add(seed, []byte(`{"c0":"a","u":"2025-01-01T00:00:00Z","v":1,"ch0":[{"c0":"a"},{"c0":"a "},7],"ch1":null,"doc":{"ch0":[],"ch1":{}}}`))
	}
	f.Fuzz(func(t *testing.T, seed uint64, data []byte) {
		e, src := genEntity(seed)
		s, err := Compile(e, src)
		if err != nil {
			t.Fatalf("generated entity %+v: %v", e, err)
		}
		raw := genItem(e, src, data)
		rec, inv, ok, err := s.DecodeItem(raw)
		if (err == nil) != json.Valid(raw) {
			t.Fatalf("decoder %v, json.Valid %v: %q", err, json.Valid(raw), raw)
		}
		if err != nil || !utf8.Valid(raw) {
			// encoding/json reads broken UTF-8 as U+FFFD, the decoder refuses it.
			return
		}
		want := reference(e, src, raw)
		if want.skip {
			return
		}
		if ok != want.ok {
			t.Fatalf("%q: ok %v (%s), reference %v (%v)", raw, ok, inv.Reason, want.ok, want.labels)
		}
		if !ok {
			entries := append(slices.Clone(want.labels), want.lineLabels...)
			if !reasonSays(inv.Reason, entries, labelNames(e)) && !(len(entries) == 0 && inv.Reason == "item is not a JSON object") {
				t.Fatalf("%q: reason %q, reference %q", raw, inv.Reason, entries)
			}
			if inv.ErpID != want.erpID || !inv.UpdatedAt.Equal(want.updated) || inv.Version != want.version || !bytes.Equal(inv.Raw, bytes.TrimSpace(raw)) {
				t.Fatalf("%q: invalid %q %v %d, reference %q %v %d", raw, inv.ErpID, inv.UpdatedAt, inv.Version, want.erpID, want.updated, want.version)
			}
			return
		}
		for i, v := range rec.Vals {
			if !sameValue(v, want.vals[i]) {
				t.Fatalf("%q: %s = %+v, reference %+v", raw, e.Columns[i].Name, v, want.vals[i])
			}
		}
		if len(rec.Children) != len(want.lines) {
			t.Fatalf("%q: %d children, reference %d", raw, len(rec.Children), len(want.lines))
		}
		for i, lines := range rec.Children {
			if lines == nil || !slices.EqualFunc(lines, want.lines[i], func(a, b []entity.Value) bool { return slices.EqualFunc(a, b, sameValue) }) {
				t.Fatalf("%q: %s lines %+v, reference %+v", raw, e.Children[i].Name, lines, want.lines[i])
			}
		}
		if rec.ErpID != want.erpID || rec.Version != want.version || !rec.UpdatedAt.Equal(want.updated) {
			t.Fatalf("%q: record %q %d %v, reference %q %d %v", raw, rec.ErpID, rec.Version, rec.UpdatedAt, want.erpID, want.version, want.updated)
		}
	})
}
