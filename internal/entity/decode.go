package entity

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// decoder reads a config file's YAML nodes. It keeps the first mistake it
// meets (a file is refused with one line) and returns zero values after
// it, so that the reading code need not check an error at every step.
type decoder struct {
	path string
	err  *FileError
	// tables are the tables claimed so far: table to who writes it.
	tables map[string]string
}

// fail records the mistake at n's line, unless one is recorded already.
func (d *decoder) fail(n *yaml.Node, format string, args ...any) {
	if d.err == nil {
		d.err = &FileError{Path: d.path, Line: max(n.Line, 1), Msg: fmt.Sprintf(format, args...)}
	}
}

// ok tells whether no mistake is recorded yet.
func (d *decoder) ok() bool { return d.err == nil }

// describe names what n is, for "want X, not Y". It never shows a
// scalar's value: the value may be a secret.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a map"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	switch n.Tag {
	case "!!null":
		return "an empty value"
	case "!!str":
		return "a string"
	case "!!int", "!!float":
		return "a number"
	case "!!bool":
		return "true or false"
	case "!!timestamp":
		return "a date"
	}
	return "a value tagged " + n.Tag
}

// is tells whether n is of kind (and, for a scalar, of tag when tag is
// not ""); else it records "key: want what, not ...".
func (d *decoder) is(n *yaml.Node, key string, kind yaml.Kind, tag, what string) bool {
	if n.Kind == yaml.AliasNode {
		d.fail(n, "%s: an alias (*%s): anchors and aliases are not supported, write the value out", key, n.Value)
		return false
	}
	if n.Kind == kind && (tag == "" || n.Tag == tag) {
		return true
	}
	hint := ""
	if kind == yaml.ScalarNode && tag == "!!str" && n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		hint = " (quote it)"
	}
	d.fail(n, "%s: want %s, not %s%s", key, what, describe(n), hint)
	return false
}

// field is one key of a mapping and its value.
type field struct {
	key   *yaml.Node
	value *yaml.Node
}

// splitValue returns the pair before the key at i of the flow mapping n
// when a comma seems to have cut its value there: the value opens a
// parenthesis that the key closes, as {type: decimal(15,2)} reads.
func splitValue(n *yaml.Node, i int) *field {
	if n.Style&yaml.FlowStyle == 0 || i < 2 {
		return nil
	}
	k, v, pk := n.Content[i], n.Content[i+1], n.Content[i-2]
	pv := n.Content[i-1]
	if pv.Kind != yaml.ScalarNode || v.Tag != "!!null" || !strings.Contains(k.Value, ")") ||
		strings.Count(pv.Value, "(") <= strings.Count(pv.Value, ")") {
		return nil
	}
	return &field{pk, pv}
}

// fields returns the values of the mapping n by key. A key not in allowed
// (with the nearest allowed one, when it is close), a key given twice and
// a key that is not a string are mistakes.
func (d *decoder) fields(n *yaml.Node, key string, allowed ...string) map[string]field {
	if !d.is(n, key, yaml.MappingNode, "", "a map") {
		return nil
	}
	out := make(map[string]field, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Tag == "!!merge" {
			d.fail(k, "%s: a merge key (<<): anchors and aliases are not supported, write the keys out", key)
			return out
		}
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			d.fail(k, "%s: a key that is %s: want one of %s", key, describe(k), strings.Join(allowed, ", "))
			return out
		}
		if !slices.Contains(allowed, k.Value) {
			if prev := splitValue(n, i); prev != nil {
				// {type: decimal(15,2)}: the flow map's comma cut the value.
				whole := prev.value.Value + "," + k.Value
				d.fail(k, "%s: %s: the comma in a {...} map ends the value; quote it: %s: \"%s\"", prev.key.Value, whole, prev.key.Value, whole)
				return out
			}
			if near := nearest(k.Value, allowed); near != "" {
				d.fail(k, "unknown key %q (did you mean %q?)", k.Value, near)
			} else {
				d.fail(k, "unknown key %q: want one of %s", k.Value, strings.Join(allowed, ", "))
			}
			return out
		}
		if first, dup := out[k.Value]; dup {
			d.fail(k, "%s given twice (first on line %d)", k.Value, first.key.Line)
			return out
		}
		out[k.Value] = field{k, v}
	}
	return out
}

// pairs returns the keys and values of the mapping n, in order, each key
// and value a scalar other than null; a key given twice is a mistake.
func (d *decoder) pairs(n *yaml.Node, key string) [][2]*yaml.Node {
	if !d.is(n, key, yaml.MappingNode, "", "a map") {
		return nil
	}
	var out [][2]*yaml.Node
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !d.value(k, key) || !d.value(v, key+"."+k.Value) {
			return nil
		}
		if first, dup := seen[k.Value]; dup {
			d.fail(k, "%s: %q given twice (first on line %d)", key, k.Value, first)
			return nil
		}
		seen[k.Value] = k.Line
		out = append(out, [2]*yaml.Node{k, v})
	}
	return out
}

// value tells whether n is a scalar other than null: a string, number or
// boolean taken as it is written.
func (d *decoder) value(n *yaml.Node, key string) bool {
	if !d.is(n, key, yaml.ScalarNode, "", "a string, number or boolean") {
		return false
	}
	if !slices.Contains([]string{"!!str", "!!int", "!!float", "!!bool", "!!timestamp"}, n.Tag) {
		d.fail(n, "%s: want a string, number or boolean, not %s", key, describe(n))
		return false
	}
	return true
}

// str returns the string n.
func (d *decoder) str(n *yaml.Node, key string) string {
	if !d.is(n, key, yaml.ScalarNode, "!!str", "a string") {
		return ""
	}
	return n.Value
}

// boolean returns the boolean n.
func (d *decoder) boolean(n *yaml.Node, key string) bool {
	var b bool
	if d.is(n, key, yaml.ScalarNode, "!!bool", "true or false") && n.Decode(&b) != nil {
		d.fail(n, "%s: want true or false", key)
	}
	return b
}

// integer returns the integer n, which must be within lo..hi.
func (d *decoder) integer(n *yaml.Node, key string, lo, hi int) int {
	var i int
	if !d.is(n, key, yaml.ScalarNode, "!!int", "a whole number") {
		return 0
	}
	if err := n.Decode(&i); err != nil || i < lo || i > hi {
		d.fail(n, "%s: want %d..%d", key, lo, hi)
	}
	return i
}

// duration returns the Go duration n (like 30s or 5m), at least lo.
func (d *decoder) duration(n *yaml.Node, key string, lo time.Duration) time.Duration {
	s := d.str(n, key)
	if !d.ok() {
		return 0
	}
	v, err := time.ParseDuration(s)
	switch {
	case err != nil:
		d.fail(n, "%s %q: want a duration, like 30s or 5m", key, s)
	case v < lo:
		d.fail(n, "%s %s: want at least %s", key, s, lo)
	}
	return v
}

// list returns the items of the list n.
func (d *decoder) list(n *yaml.Node, key string) []*yaml.Node {
	if !d.is(n, key, yaml.SequenceNode, "", "a list") {
		return nil
	}
	return n.Content
}

// oneOf returns the string n, which must be one of want.
func (d *decoder) oneOf(n *yaml.Node, key string, want ...string) string {
	s := d.str(n, key)
	if d.ok() && !slices.Contains(want, s) {
		d.fail(n, "%s %q: want %s", key, s, orList(want))
	}
	return s
}

// orList writes want as "a, b or c".
func orList(want []string) string {
	if len(want) < 2 {
		return strings.Join(want, "")
	}
	return strings.Join(want[:len(want)-1], ", ") + " or " + want[len(want)-1]
}

// namePattern is what an entity's, a table's, a column's or a child's name
// must match; MaxNameLength bounds it (MySQL's identifiers).
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// MaxNameLength is the longest name of an entity, table, column or child.
const MaxNameLength = 64

// name returns the name n: [a-z][a-z0-9_]*, at most MaxNameLength long.
func (d *decoder) name(n *yaml.Node, key string) string {
	s := d.str(n, key)
	switch {
	case !d.ok():
	case !namePattern.MatchString(s):
		d.fail(n, "%s %q: want a lower-case name of [a-z][a-z0-9_]*, like customer_orders", key, s)
	case len(s) > MaxNameLength:
		d.fail(n, "%s %q: %d characters, want at most %d", key, s, len(s), MaxNameLength)
	}
	return s
}

// dotted returns the dotted path n of a source property or body member
// ("Address.City"): names joined by dots, none empty.
func (d *decoder) dotted(n *yaml.Node, key string) []string {
	s := d.str(n, key)
	if !d.ok() {
		return nil
	}
	p := strings.Split(s, ".")
	if slices.Contains(p, "") || strings.TrimSpace(s) != s {
		d.fail(n, "%s %q: want a property name, or names joined by dots like Address.City", key, s)
		return nil
	}
	return p
}

// nearest returns the word of words within two edits of w, "" when none.
func nearest(w string, words []string) string {
	best, bestD := "", 3
	for _, c := range words {
		if d := distance(w, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b, over one row.
func distance(a, b string) int {
	row := make([]int, len(b)+1)
	for j := range row {
		row[j] = j
	}
	for i := 1; i <= len(a); i++ {
		diag := row[0]
		row[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			diag, row[j] = row[j], min(row[j]+1, row[j-1]+1, diag+cost)
		}
	}
	return row[len(b)]
}
