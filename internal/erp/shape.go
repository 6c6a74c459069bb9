package erp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrNoCount is the answer of Count when the API has no count endpoint
// (Shape.CountPath empty).
var ErrNoCount = errors.New("erp: no count endpoint")

// Paging is how a REST API pages its records.
type Paging int

const (
	// PagingCursor passes the cursor the previous page returned (at
	// Shape.Cursor) until a page returns none: a keyset, exact while
	// records change.
	PagingCursor Paging = iota
	// PagingOffset passes an offset, the number of records already read,
	// and stops at a page shorter than its limit. An offset skips a record
	// whenever a record before it changes (and moves to the end of the
	// feed) while the pages are read.
	PagingOffset
)

// String returns the paging's name as ParsePaging reads it.
func (p Paging) String() string {
	if p == PagingOffset {
		return "offset"
	}
	return "cursor"
}

// ParsePaging reads "cursor" or "offset".
func ParsePaging(s string) (Paging, error) {
	switch s {
	case "cursor":
		return PagingCursor, nil
	case "offset":
		return PagingOffset, nil
	}
	return PagingCursor, errors.New("want cursor or offset")
}

// Params are the names of the query parameters of a REST API.
type Params struct {
	Since  string // inclusive lower bound on updated_at (Query.Since)
	Until  string // exclusive upper bound on updated_at (Query.Until)
	Cursor string // the cursor of PagingCursor
	Limit  string // the page size
	Offset string // the offset of PagingOffset
}

// DefaultParams are the parameter names of the spec's API.
var DefaultParams = Params{Since: "updated_since", Until: "updated_until", Cursor: "cursor", Limit: "limit", Offset: "offset"}

// ParseParams renames parameters of DefaultParams by a spec like
// "since=changedAfter,until=changedBefore,cursor=page_token"; the names
// not listed keep their defaults.
func ParseParams(spec string) (Params, error) {
	p := DefaultParams
	ptrs := map[string]*string{"since": &p.Since, "until": &p.Until, "cursor": &p.Cursor, "limit": &p.Limit, "offset": &p.Offset}
	given, err := pairs(spec)
	if err != nil {
		return p, err
	}
	set := map[string]bool{}
	for _, kv := range given {
		k, v := kv[0], kv[1]
		switch dst := ptrs[k]; {
		case dst == nil:
			return p, fmt.Errorf("unknown name %q (want since, until, cursor, limit or offset)", k)
		case set[k]:
			return p, fmt.Errorf("%s given twice", k)
		case v == "":
			return p, fmt.Errorf("%s: empty parameter", k)
		default:
			set[k] = true
			*dst = v
		}
	}
	names := map[string]string{}
	for _, k := range []string{"since", "until", "cursor", "limit", "offset"} {
		if other, dup := names[*ptrs[k]]; dup {
			return p, fmt.Errorf("parameter %q stands for both %s and %s", *ptrs[k], other, k)
		}
		names[*ptrs[k]] = k
	}
	return p, nil
}

// JSONPath is a path of object member names from a body's root, written
// with dots ("result.items"). An empty JSONPath is the root itself.
type JSONPath []string

// ParseJSONPath reads a dotted path; "." is the root.
func ParseJSONPath(s string) (JSONPath, error) {
	switch s = strings.TrimSpace(s); s {
	case "":
		return nil, errors.New("empty path (\".\" is the body itself)")
	case ".":
		return JSONPath{}, nil
	}
	p := JSONPath(strings.Split(s, "."))
	if slices.Contains(p, "") {
		return nil, errors.New("empty member name (want names joined by dots, like result.items)")
	}
	return p, nil
}

// String returns the path as ParseJSONPath reads it.
func (p JSONPath) String() string {
	if len(p) == 0 {
		return "."
	}
	return strings.Join(p, ".")
}

// Shape describes the REST API of an ERP shaped differently from the
// spec's: its endpoints, parameter names, paging and where its bodies keep
// the records, the next cursor and the count. The items of a page are
// validated like the spec's.
type Shape struct {
	// Path is the records endpoint, appended to Config.BaseURL. Defaults
	// to /api/v1/memberships.
	Path string
	// CountPath is the count endpoint. Empty means the API has none:
	// Count returns ErrNoCount.
	CountPath string
	// Params names the query parameters.
	Params Params
	// Paging is how pages follow each other. Defaults to PagingCursor.
	Paging Paging
	// Records is where a page body holds its array of records.
	Records JSONPath
	// Cursor is where a page body holds the next cursor (PagingCursor): a
	// string, or a number taken as written; missing, null or "" on the
	// last page.
	Cursor JSONPath
	// Count is where a count body holds the count, an integer.
	Count JSONPath
}

// DefaultShape returns the shape of the spec's API.
func DefaultShape() Shape {
	return Shape{
		Path: "/api/v1/memberships", CountPath: "/api/v1/memberships/count", Params: DefaultParams,
		Records: JSONPath{"data"}, Cursor: JSONPath{"next_cursor"}, Count: JSONPath{"count"},
	}
}

// spec tells whether s is the spec's API, which the hand-written page
// decoder reads.
func (s *Shape) spec() bool {
	d := DefaultShape()
	return s.Path == d.Path && s.CountPath == d.CountPath && s.Params == d.Params && s.Paging == d.Paging &&
		slices.Equal(s.Records, d.Records) && slices.Equal(s.Cursor, d.Cursor) && slices.Equal(s.Count, d.Count)
}

// check reports what makes s unusable.
func (s *Shape) check() error {
	for _, p := range []string{s.Path, s.CountPath} {
		if p != "" && (!strings.HasPrefix(p, "/") || strings.ContainsAny(p, "?#")) {
			return fmt.Errorf("erp: endpoint path %q: want /a/path without a query", p)
		}
	}
	switch {
	case s.Path == "":
		return errors.New("erp: empty records path")
	case s.Params.Since == "" || s.Params.Until == "" || s.Params.Limit == "":
		return errors.New("erp: since, until and limit parameters are required")
	case s.Paging == PagingCursor && (s.Params.Cursor == "" || s.Cursor == nil):
		return errors.New("erp: cursor paging needs a cursor parameter and a cursor path")
	case s.Paging == PagingOffset && s.Params.Offset == "":
		return errors.New("erp: offset paging needs an offset parameter")
	case s.Records == nil:
		return errors.New("erp: no records path")
	case s.CountPath != "" && s.Count == nil:
		return errors.New("erp: a count endpoint needs a count path")
	case s.Paging == PagingCursor && s.Records.Overlaps(s.Cursor):
		return fmt.Errorf("erp: records path %s and cursor path %s overlap", s.Records, s.Cursor)
	}
	return nil
}

// Overlaps tells whether p or q starts with the other: a value at one
// would hold the other, or be it.
func (p JSONPath) Overlaps(q JSONPath) bool {
	n := min(len(p), len(q))
	return slices.Equal(p[:n], q[:n])
}

// defaultOffsetLimit is the page size of offset paging when a Query has
// none: the end of the feed is a page shorter than a known limit.
const defaultOffsetLimit = 500

// shapedPage is Page for an API of another shape.
func (c *Client) shapedPage(ctx context.Context, q Query) (*Page, error) {
	s := c.shape
	v := s.Params.window(q.Since, q.Until)
	limit, offset := q.Limit, 0
	switch s.Paging {
	case PagingOffset:
		if q.Cursor != "" {
			n, err := strconv.Atoi(q.Cursor)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%w: offset cursor %q is not an integer >= 0", ErrBadRequest, q.Cursor)
			}
			offset = n
		}
		if limit == 0 {
			limit = defaultOffsetLimit
		}
		v.Set(s.Params.Offset, strconv.Itoa(offset))
	default:
		if q.Cursor != "" {
			v.Set(s.Params.Cursor, q.Cursor)
		}
	}
	if limit > 0 {
		v.Set(s.Params.Limit, strconv.Itoa(limit))
	}
	var p *Page
	err := c.get(ctx, EndpointPage, s.Path, v, func(h http.Header, body []byte) (err error) {
		if p, err = s.decodePage(body, c.m, c.s); err == nil {
			p.ServedAt = ServedAt(h)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if s.Paging == PagingOffset {
		p.NextCursor = ""
		if len(p.Records)+len(p.Invalid) >= limit {
			p.NextCursor = strconv.Itoa(offset + limit)
		}
	}
	return p, nil
}

// shapedCount is Count for an API of another shape.
func (c *Client) shapedCount(ctx context.Context, since, until time.Time) (int64, error) {
	s := c.shape
	if s.CountPath == "" {
		return 0, ErrNoCount
	}
	var n int64
	err := c.get(ctx, EndpointCount, s.CountPath, s.Params.window(since, until), func(_ http.Header, body []byte) (err error) {
		n, err = decodeCountAt(body, s.Count)
		return err
	})
	return n, err
}

// window is the query of the window [since, until) under p's names.
func (p Params) window(since, until time.Time) url.Values {
	v := url.Values{}
	if !since.IsZero() {
		v.Set(p.Since, since.UTC().Format(time.RFC3339Nano))
	}
	if !until.IsZero() {
		v.Set(p.Until, until.UTC().Format(time.RFC3339Nano))
	}
	return v
}

// decodePage decodes a page body of shape s with the hand-written decoder:
// the records array at s.Records, each item read through m (nil: the
// spec's names) and validated as the spec's, or as a record of sc when sc
// is not nil, and the cursor at s.Cursor.
func (s *Shape) decodePage(body []byte, m *Mapping, sc *Schema) (*Page, error) {
	d := decoder{b: body, m: m, s: sc}
	p := &Page{}
	var haveRecords bool
	targets := []target{{s.Records, func() error {
		haveRecords = true
		p.Records, p.Invalid = nil, nil // a repeated member replaces the first
		return d.items(p)
	}}}
	if s.Paging == PagingCursor {
		targets = append(targets, target{s.Cursor, func() error {
			switch c := d.next(); {
			case c == 'n':
				p.NextCursor = ""
				return d.literal("null")
			case c == '"':
				v, err := d.str()
				p.NextCursor = string(v)
				return err
			case c == '-' || c >= '0' && c <= '9':
				v, _, err := d.number()
				p.NextCursor = string(v)
				return err
			}
			return d.fail("the cursor at " + s.Cursor.String() + " is neither a string, a number nor null")
		}})
	}
	if err := d.document(targets); err != nil {
		return nil, fmt.Errorf("decode page: %w", err)
	}
	if !haveRecords {
		return nil, fmt.Errorf("decode page: no records array at %s", s.Records)
	}
	return p, nil
}

// decodeCountAt decodes a count body that holds the count at path.
func decodeCountAt(body []byte, path JSONPath) (int64, error) {
	d := decoder{b: body}
	var count []byte
	err := d.document([]target{{path, func() error {
		if c := d.next(); c != '-' && (c < '0' || c > '9') {
			return d.fail("count is not a number")
		}
		v, isInt, err := d.number()
		if err == nil && !isInt {
			err = d.fail("count is not an integer")
		}
		count = v
		return err
	}}})
	if err != nil {
		return 0, fmt.Errorf("decode count: %w", err)
	}
	if count == nil {
		return 0, fmt.Errorf("decode count: no count at %s", path)
	}
	n, err := strconv.ParseInt(string(count), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("decode count: %s is not a count", quote(count))
	}
	return n, nil
}

// target is a value of a document to read: read is called standing on the
// value at path, and must consume it.
type target struct {
	path JSONPath
	read func() error
}

// document reads a whole JSON document, calling the read of each target
// whose path it holds and skipping the rest.
func (d *decoder) document(targets []target) error {
	if err := d.visit(targets, 0); err != nil {
		return err
	}
	if !d.atEnd() {
		return d.fail("data after the document")
	}
	return nil
}

// visit reads the value ahead, the one at depth of every target's path.
func (d *decoder) visit(targets []target, depth int) error {
	for _, t := range targets {
		if len(t.path) == depth {
			return t.read() // paths are distinct: no other target ends here
		}
	}
	if d.next() != '{' {
		return d.skip() // the paths go deeper than the document
	}
	return d.object(func(key []byte) error {
		var sub []target
		for _, t := range targets {
			if t.path[depth] == string(key) {
				sub = append(sub, t)
			}
		}
		if len(sub) == 0 {
			return d.skip()
		}
		return d.visit(sub, depth+1)
	})
}
