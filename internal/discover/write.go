package discover

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// maxName is the longest MySQL identifier.
const maxName = 64

// snake returns s in snake case, a name the config file accepts
// ([a-z][a-z0-9_]*): A_BusinessPartner is a_business_partner,
// SalesOrderItems sales_order_items, ID id, up__ID up_id.
func snake(s string) string {
	rs := []rune(s)
	var b strings.Builder
	under := func() {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "_") {
			b.WriteByte('_')
		}
	}
	for i, r := range rs {
		switch {
		case r >= 'A' && r <= 'Z':
			prevLower := i > 0 && (rs[i-1] >= 'a' && rs[i-1] <= 'z' || rs[i-1] >= '0' && rs[i-1] <= '9')
			nextLower := i > 0 && rs[i-1] >= 'A' && rs[i-1] <= 'Z' && i+1 < len(rs) && rs[i+1] >= 'a' && rs[i+1] <= 'z'
			if prevLower || nextLower {
				under()
			}
			b.WriteRune(r + 'a' - 'A')
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			under()
		}
	}
	out := strings.Trim(b.String(), "_")
	if out == "" || out[0] < 'a' || out[0] > 'z' {
		out = "c_" + out
		out = strings.TrimSuffix(out, "_")
	}
	if len(out) > maxName {
		out = strings.TrimRight(out[:maxName], "_")
	}
	return out
}

// names hands out unique names, none of them reserved.
type names struct {
	reserved map[string]bool
	taken    map[string]bool
}

func newNames(reserved []string) *names {
	n := &names{reserved: map[string]bool{}, taken: map[string]bool{}}
	for _, r := range reserved {
		n.reserved[r] = true
	}
	return n
}

// take returns name, or a name with a suffix when name is reserved or
// taken, and then a comment on the rename (what is a "column" or a
// "table").
func (n *names) take(name, what string) (string, string) {
	var why string
	out := name
	switch {
	case n.reserved[name]:
		out = suffixed(name, "_erp")
		why = fmt.Sprintf("renamed from %s, which is one of erpsync's own %s names", name, what)
	case n.taken[name]:
		why = fmt.Sprintf("renamed: another %s is %s", what, name)
	}
	for base, i := out, 2; n.taken[out] || n.reserved[out]; i++ {
		out = suffixed(base, "_"+strconv.Itoa(i))
	}
	n.taken[out] = true
	return out, why
}

func suffixed(name, suffix string) string {
	if len(name)+len(suffix) > maxName {
		name = name[:maxName-len(suffix)]
	}
	return name + suffix
}

// serviceRoot returns u without its user, password and query, and a
// comment when something was left out.
func serviceRoot(u string) (string, string, error) {
	if u == "" {
		return "", "", errors.New("discover: no service URL")
	}
	p, err := url.Parse(u)
	if err != nil || p.Host == "" || p.Scheme != "http" && p.Scheme != "https" {
		return "", "", fmt.Errorf("discover: service URL %q: want an http or https URL", redact(u))
	}
	var left []string
	if p.User != nil {
		p.User = nil
		left = append(left, "user and password")
	}
	if p.RawQuery != "" {
		p.RawQuery = ""
		left = append(left, "query (add it back if the service needs it, like sap-client, unless it holds a secret)")
	}
	p.Fragment = ""
	note := ""
	if len(left) > 0 {
		note = "the URL's " + strings.Join(left, " and ") + " left out"
	}
	return p.String(), note, nil
}

func redact(u string) string {
	if p, err := url.Parse(u); err == nil {
		p.RawQuery = ""
		return p.Redacted()
	}
	return "(unreadable)"
}

// plain is what YAML reads as a string without quotes, in a flow
// collection too.
var plain = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_./()-]*$`)

// scalar writes s as a YAML string: plain when it reads back as the same
// string, else double-quoted.
func scalar(s string) string {
	switch strings.ToLower(s) {
	case "true", "false", "null", "yes", "no", "on", "off", "y", "n":
		return strconv.Quote(s)
	}
	if plain.MatchString(s) {
		return s
	}
	return strconv.Quote(s)
}

// sanitize makes s safe in a YAML comment and a message: one line of
// printable characters, at most 1,000.
func sanitize(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) && r != unicode.ReplacementChar {
			return r
		}
		return '?'
	}, s)
	if r := []rune(s); len(r) > 1000 {
		s = string(r[:1000]) + "..."
	}
	return s
}

// writeFile writes the config file of specs to b.
func writeFile(b *bytes.Buffer, root, note string, specs []*spec) {
	b.WriteString("# erpsync config file, written by `erpsync discover` from the service's $metadata.\n")
	b.WriteString("# Check every comment that says \"guessed\" or \"check\" before the first sync.\n")
	b.WriteString("erp:\n  kind: odata\n")
	fmt.Fprintf(b, "  url: %s", scalar(root))
	if note != "" {
		fmt.Fprintf(b, "  # %s", sanitize(note))
	}
	b.WriteString("\n")
	b.WriteString("  # Credentials never go in this file's values: username: with password_file:, token_file:,\n")
	b.WriteString("  # oauth: {..., client_secret_file: ...}, or the flags and ERPSYNC_* variables.\n\n")
	b.WriteString("entities:\n")
	for _, s := range specs {
		lines := s.lines()
		if s.disabled() {
			fmt.Fprintf(b, "  # %s: not synced as it is: %s.\n", sanitize(s.set), sanitize(s.reason))
			for _, l := range lines {
				fmt.Fprintf(b, "  # %s\n", strings.TrimPrefix(l, "  "))
			}
		} else {
			for _, l := range lines {
				b.WriteString(l + "\n")
			}
		}
		b.WriteString("\n")
	}
	// One newline at the end.
	for bytes.HasSuffix(b.Bytes(), []byte("\n\n")) {
		b.Truncate(b.Len() - 1)
	}
}

// lines returns the entity's lines, indented for the entities list.
func (s *spec) lines() []string {
	comment := func(c string) string {
		if c == "" {
			return ""
		}
		return "  # " + sanitize(c)
	}
	keys := make([]string, len(s.key))
	for i, k := range s.key {
		keys[i] = scalar(k)
	}
	out := []string{
		"  - name: " + scalar(s.name) + comment(s.renamed),
		"    table: " + scalar(s.name),
		"    source: " + scalar(s.set),
		"    key: [" + strings.Join(keys, ", ") + "]",
	}
	if s.updatedAt != "" {
		out = append(out, "    updated_at: "+scalar(s.updatedAt)+comment(s.updatedNote))
	}
	if s.version != "" {
		out = append(out, "    version: "+scalar(s.version)+comment(s.versionNote))
	} else if s.updatedAt != "" {
		out = append(out, "    # version: "+s.versionNote)
	}
	out = append(out, "    columns:")
	out = append(out, columnLines(s.columns, "      ")...)
	for _, n := range s.navs {
		out = append(out, "      # "+n)
	}
	if len(s.children) > 0 {
		out = append(out, "    children:")
	}
	for _, c := range s.children {
		keys := make([]string, len(c.key))
		for i, k := range c.key {
			keys[i] = scalar(k)
		}
		out = append(out,
			"      - name: "+scalar(c.name)+comment(c.renamed),
			"        table: "+scalar(c.table),
			"        from: "+scalar(c.from)+comment("a composition: each record's lines, read with $expand; the table's rows are exactly the lines of the record's version"),
			"        key: ["+strings.Join(keys, ", ")+"]",
			"        columns:")
		out = append(out, columnLines(c.columns, "          ")...)
	}
	return out
}

// columnLines returns the lines of a columns list, indented by indent:
// one flow mapping a column, aligned, and a comment a property left out.
func columnLines(cols []col, indent string) []string {
	comment := func(c string) string {
		if c == "" {
			return ""
		}
		return "  # " + sanitize(c)
	}
	var out []string
	wName, wFrom := 0, 0
	for _, c := range cols {
		if c.typ != "" {
			wName = max(wName, len(scalar(c.name)))
			wFrom = max(wFrom, len(scalar(c.from)))
		}
	}
	for _, c := range cols {
		if c.typ == "" {
			out = append(out, indent+"# "+sanitize(c.from)+": not synced: "+sanitize(c.comment))
			continue
		}
		typ := c.typ
		if strings.Contains(typ, ",") {
			typ = strconv.Quote(typ)
		}
		name, from := scalar(c.name), scalar(c.from)
		item := fmt.Sprintf("%s- {name: %s,%s from: %s,%s type: %s", indent, name, pad(wName-len(name)), from, pad(wFrom-len(from)), typ)
		if c.nullable {
			item += ", nullable: true"
		}
		out = append(out, item+"}"+comment(c.comment))
	}
	return out
}

func pad(n int) string { return strings.Repeat(" ", max(n, 0)) }
