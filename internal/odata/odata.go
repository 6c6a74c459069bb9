package odata

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/erp"
)

// Paging styles.
const (
	// PagingKeyset asks each page with a $filter after the last
	// (updated_at, erp_id) seen. The default.
	PagingKeyset = "keyset"
	// PagingServer follows the server's @odata.nextLink.
	PagingServer = "server"
)

// Config configures a Source.
type Config struct {
	// URL is the entity set's absolute http or https URL, e.g.
	// https://host/odata/v4/erp/Memberships. Required.
	URL string
	// Mapping names the entity's properties and translates its status
	// values. Defaults to the fields' own names (erp.IdentityMapping).
	Mapping *erp.Mapping
	// Schema, when set, reads the records of its entity (any entity of
	// the config file) instead of memberships; Mapping must then be nil.
	// Defaults to nil.
	Schema *erp.Schema
	// Paging is PagingKeyset or PagingServer. Defaults to PagingKeyset.
	Paging string
	// Version is the OData version: Version4, Version2 or VersionAuto (read
	// $metadata once to choose). Defaults to Version4.
	Version string
	// HTTP configures the requests: authentication, timeouts, retries,
	// body cap, shared rate and hooks (its BaseURL and Mapping are
	// ignored). Defaults to erp.Config's defaults.
	HTTP erp.Config
	// Shared tells that another source of the entity reads the same
	// entity set: the constants the Schema's source sets must then be
	// filtered on, each property $metadata declares, or every page and
	// count fails with ErrUnfilterable. Without $metadata the filter is
	// sent as it is, for the service to apply or refuse. Defaults to
	// false: a constant the entity set has no property for filters
	// nothing (its own entity set tells the source's records apart).
	Shared bool
}

// ErrUnfilterable is the error of a Shared source whose constant has no
// property in the entity set's $metadata: it would read the records of
// the entity set's other sources.
var ErrUnfilterable = errors.New("odata: the source's constant cannot be filtered on")

// Source reads memberships from an OData v4 entity set. It is safe for
// concurrent use.
type Source struct {
	g        *erp.Getter
	url      string       // the entity set, without a query
	m        *erp.Mapping // nil when schema is set
	schema   *erp.Schema
	paging   string
	keys     []keyProp   // the key, in order: erp_id's property for memberships
	keyNames string      // the key properties, for errors
	modified string      // the property (path) of updated_at
	selected string      // the $select value
	expand   string      // the $expand value; "" for an entity without children
	navs     []nav       // the navigation properties of the children, in order
	accept   string      // the Accept header of a page; "" the default
	query    [][2]string // the URL's own query parameters (sap-client=100), sent with every request

	// version is Config.Version; kinds and childKinds are the column
	// kinds of the values the V2 reader converts (kindsOf).
	version    string
	kinds      map[string]entity.Kind
	childKinds map[string]map[string]entity.Kind

	// sets are the source's constant columns (entity.Source.Set) whose
	// property the entity set may serve: once $metadata says it does, the
	// source filters on it (setTerms), so that one entity set read as one
	// source per company yields each company's records to its own source.
	sets   []setProp
	shared bool // Config.Shared

	mu       sync.Mutex
	keyTypes map[string]string // the Edm type of a key property, once a $metadata document declared it
	setTerms []string          // the $filter terms of sets, once resolved
	setsDone bool

	meta       *v2Meta // V2's view of $metadata, once detect chose V2
	detectedV4 bool    // detect chose V4
}

// setProp is one constant of the source: the property that would hold it.
type setProp struct {
	key    keyProp
	column string
	value  string
}

// nav is the navigation property of one child: its collection is
// expanded into each record.
type nav struct {
	prop  string // the navigation property
	label string // the child as the record's reasons name it
}

// keyProp is one key column as $filter and $orderby name it.
type keyProp struct {
	prop string      // the property path, '/'-separated; "" when the source sets the column
	kind entity.Kind // how its literal is written
}

// New returns a Source for cfg.
func New(cfg Config) (*Source, error) {
	raw, rawQuery, _ := strings.Cut(cfg.URL, "?")
	u, err := erp.ParseURL("entity set URL", raw)
	if err != nil {
		return nil, err
	}
	query, err := urlQuery(rawQuery)
	if err != nil {
		return nil, fmt.Errorf("erp: entity set URL %q: %w", cfg.URL, err)
	}
	switch cfg.Version {
	case "":
		cfg.Version = Version4
	case Version2, Version4, VersionAuto:
	default:
		return nil, fmt.Errorf("odata: version %q: want %s, %s or %s", cfg.Version, Version2, Version4, VersionAuto)
	}
	switch cfg.Paging {
	case "":
		cfg.Paging = PagingKeyset
	case PagingKeyset, PagingServer:
	default:
		return nil, fmt.Errorf("odata: paging %q: want %s or %s", cfg.Paging, PagingKeyset, PagingServer)
	}
	src := &Source{url: strings.TrimRight(u.String(), "/"), paging: cfg.Paging, keyTypes: map[string]string{}, shared: cfg.Shared, query: query, version: cfg.Version}
	switch {
	case cfg.Schema != nil && cfg.Mapping != nil:
		return nil, errors.New("odata: a Mapping or a Schema, not both")
	case cfg.Schema != nil:
		if err := src.typed(cfg.Schema); err != nil {
			return nil, err
		}
	default:
		if cfg.Mapping == nil {
			cfg.Mapping = erp.IdentityMapping()
		}
		key, _ := cfg.Mapping.Property("erp_id")
		src.modified, _ = cfg.Mapping.Property("updated_at")
		src.m, src.keys, src.selected = cfg.Mapping, []keyProp{{prop: key, kind: entity.String}}, strings.Join(cfg.Mapping.Properties(), ",")
	}
	var names []string
	for _, k := range src.keys {
		if k.prop != "" {
			names = append(names, k.prop)
		}
	}
	src.keyNames = strings.Join(names, ",")
	src.kinds, src.childKinds = kindsOf(src.schema, src.m)
	if src.g, err = erp.NewGetter(cfg.HTTP); err != nil {
		return nil, err
	}
	return src, nil
}

// typed sets s up to read the records of sc: $select of the top-level
// properties it reads, the key and updated_at as $filter and $orderby
// name them, and IEEE754Compatible=true asked when the entity has decimal
// or int64 columns.
func (s *Source) typed(sc *erp.Schema) error {
	s.schema = sc
	s.modified = strings.Join(sc.UpdatedAt(), "/")
	s.selected = strings.Join(sc.Properties(), ",")
	for _, k := range sc.Keys() {
		switch {
		case k.Mapped && k.From != nil:
			return fmt.Errorf("odata: key column %s has values: keyset paging filters on the values the source serves, which the record does not keep", k.Column)
		case k.Type.Kind == entity.Text || k.Type.Kind == entity.JSON:
			return fmt.Errorf("odata: key column %s: no $filter literal for %s", k.Column, k.Type)
		}
		s.keys = append(s.keys, keyProp{prop: strings.Join(k.From, "/"), kind: k.Type.Kind})
	}
	if !slices.ContainsFunc(s.keys, func(k keyProp) bool { return k.prop != "" }) {
		return errors.New("odata: every key column is set by the source: keyset paging needs a key property")
	}
	var expand []string
	for _, ch := range sc.Children() {
		if len(ch.From) != 1 {
			return fmt.Errorf("odata: child %s: from %s: a child's collection is one navigation property of the entity set, expanded with $expand; a path through several is not read",
				ch.Name, strings.Join(ch.From, "."))
		}
		n := nav{prop: ch.From[0], label: ch.Name}
		if n.prop != ch.Name {
			n.label += " (" + n.prop + ")"
		}
		s.navs = append(s.navs, n)
		expand = append(expand, n.prop+"($select="+strings.Join(ch.Properties, ",")+")")
	}
	s.expand = strings.Join(expand, ",")
	if sc.Exact() {
		s.accept = "application/json;IEEE754Compatible=true"
	}
	e := sc.Entity()
	for _, c := range e.Columns {
		v, ok := sc.Source().Set[c.Name]
		if !ok {
			continue
		}
		from := c.From
		if len(from) == 0 {
			from = []string{c.Name}
		}
		s.sets = append(s.sets, setProp{key: keyProp{prop: strings.Join(from, "/"), kind: c.Type.Kind}, column: c.Name, value: v})
	}
	return nil
}

// setFilter returns the $filter terms of the source's constants that the
// entity set serves as properties ($metadata tells, once): a constant the
// entity set has no property for (a company in the URL, as Business
// Central's companies(...)/customers) filters nothing.
func (s *Source) setFilter(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	done, terms := s.setsDone, s.setTerms
	s.mu.Unlock()
	if done || len(s.sets) == 0 {
		return terms, nil
	}
	terms = nil
	for _, sp := range s.sets {
		t, err := s.propertyType(ctx, sp.key.prop)
		switch {
		case errors.Is(err, errNoProperty) && s.shared:
			set := s.url[strings.LastIndexByte(s.url, '/')+1:]
			return nil, fmt.Errorf("%w: source %s sets %s to %q and shares the entity set with other sources, but $metadata declares no property %s on %s to filter it: it would read their records too",
				ErrUnfilterable, set, sp.column, sp.value, sp.key.prop, set)
		case notFound(err) && s.shared:
			// No $metadata to tell: the filter goes as a string, for the
			// service to apply or to refuse.
		case errors.Is(err, errNoProperty) || notFound(err):
			continue // the entity set has no such property, or the service no $metadata to tell
		case err != nil:
			return nil, err
		}
		lit := sp.value
		if sp.key.kind == entity.String && t != "Edm.Guid" {
			lit = stringLiteral(sp.value)
		}
		terms = append(terms, sp.key.prop+" eq "+lit)
	}
	s.mu.Lock()
	s.setTerms, s.setsDone = terms, true
	s.mu.Unlock()
	return terms, nil
}

// Stats returns the source's request counters.
func (s *Source) Stats() erp.Stats { return s.g.Stats() }

// cursor is the position a page ends at: the last (updated_at, erp_id)
// served under keyset paging, the next link under server paging, and the
// next link of an empty page under either, with how many empty pages in a
// row came before it.
type cursor struct {
	T     time.Time `json:"t,omitzero"`
	K     string    `json:"k,omitempty"`
	Next  string    `json:"n,omitempty"`
	Empty int       `json:"e,omitempty"`
}

// maxEmptyPages is how many pages in a row may come back with no item and
// a next link before a pass fails: a server that keeps sending them is
// stuck, not paging.
const maxEmptyPages = 100

func (c cursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(v string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		return cursor{}, fmt.Errorf("%w: cursor %q is not one of this source's", erp.ErrBadRequest, v)
	}
	return c, nil
}

// Page reads one page of the entity set: the records of q's window in
// (updated_at, erp_id) order after q.Cursor. Invalid items are in
// Page.Invalid. Under keyset paging only an empty page without
// @odata.nextLink is the last one (a server may serve fewer rows than $top
// with more to come, or no row and a next link); under server paging, a
// page without @odata.nextLink. An empty page's next link is followed
// under either, up to maxEmptyPages in a row.
func (s *Source) Page(ctx context.Context, q erp.Query) (*erp.Page, error) {
	if q.Limit < 0 || q.Limit > 1000 {
		return nil, fmt.Errorf("%w: limit %d not in [1, 1000]", erp.ErrBadRequest, q.Limit)
	}
	limit := q.Limit
	if limit == 0 {
		limit = 500
	}
	var after cursor
	if q.Cursor != "" {
		var err error
		if after, err = decodeCursor(q.Cursor); err != nil {
			return nil, err
		}
	}
	v2, err := s.detect(ctx)
	if err != nil {
		return nil, err
	}
	u := after.Next
	var header http.Header
	if u == "" {
		filter := s.window(q.Since, q.Until)
		sets, err := s.setFilter(ctx)
		if err != nil {
			return nil, err
		}
		filter = append(filter, sets...)
		sel, expand := s.selected, s.expand
		if v2 {
			sel, expand = s.queryV2()
		}
		params := [][2]string{{"$select", sel}}
		if expand != "" {
			params = append(params, [2]string{"$expand", expand})
		}
		if s.paging == PagingKeyset && !after.T.IsZero() {
			k, err := s.after(ctx, after.K)
			if err != nil {
				return nil, err
			}
			filter = append(filter, "("+s.modified+" gt "+s.timeLit(after.T)+" or ("+
				s.modified+" eq "+s.timeLit(after.T)+" and "+k+"))")
		}
		if len(filter) > 0 {
			params = append(params, [2]string{"$filter", strings.Join(filter, " and ")})
		}
		params = append(params, [2]string{"$orderby", s.modified + "," + s.keyNames})
		if s.paging == PagingKeyset {
			params = append(params, [2]string{"$top", strconv.Itoa(limit)})
		} else if !v2 {
			// $top would bound the whole result: ask the server for its
			// page size instead (V2 has no such preference).
			header = http.Header{"Prefer": {"odata.maxpagesize=" + strconv.Itoa(limit)}}
		}
		if v2 {
			params = append(params, [2]string{"$format", "json"})
		}
		u = s.url + "?" + encodeQuery(append(params, s.query...))
	}
	if v2 {
		header = http.Header{"Accept": {"application/json"}}
	} else if s.accept != "" {
		if header == nil {
			header = http.Header{}
		}
		header.Set("Accept", s.accept)
	}
	var env envelope
	var served time.Time
	if v2 {
		env.Value, env.NextLink, served, err = s.getV2(ctx, u, header)
	} else {
		err = s.g.GetWith(ctx, erp.EndpointPage, u, header, func(h http.Header, body []byte) error {
			served = erp.ServedAt(h)
			return env.decode(body)
		})
	}
	if err != nil {
		return nil, err
	}
	p, last, err := s.decodeItems(ctx, u, header, env.Value)
	if err != nil {
		return nil, err
	}
	p.ServedAt = served
	next := env.NextLink
	empty := len(p.Records)+len(p.Invalid) == 0
	switch {
	case next != "" && (s.paging == PagingServer || empty):
		ref, err := resolve(u, next)
		if err != nil {
			return nil, err
		}
		c := cursor{Next: ref}
		if empty {
			// Keyset paging goes on from the same position once a page
			// has items again.
			c = cursor{T: after.T, K: after.K, Next: ref, Empty: after.Empty + 1}
			if c.Empty >= maxEmptyPages {
				return nil, fmt.Errorf("odata: %d pages in a row came back with no item and an @odata.nextLink (the last: %s): the server sends neither records nor the end of the feed; the pass stops",
					c.Empty, truncate([]byte(next), 120))
			}
		}
		p.NextCursor = c.encode()
	case s.paging == PagingServer, empty:
		// The last page.
	case last.T.IsZero():
		return nil, fmt.Errorf("odata: a page of %d items without one whose %s and %s are readable: keyset paging cannot go on",
			len(p.Records)+len(p.Invalid), s.modified, s.keyNames)
	case last.T.Equal(after.T) && last.K == after.K:
		return nil, fmt.Errorf("odata: the page after %s=%s, %s=%q ends where it started: does the server compare %s at a finer precision than it serves?",
			s.modified, timeLiteral(after.T), s.keyNames, after.K, s.modified)
	default:
		p.NextCursor = last.encode()
	}
	return p, nil
}

// envelope is an OData collection response: its value array and its
// @odata.nextLink.
type envelope struct {
	Value    *[]json.RawMessage `json:"value"`
	NextLink string             `json:"@odata.nextLink"`
}

// decode reads a collection response body into env.
func (env *envelope) decode(body []byte) error {
	if err := json.Unmarshal(body, env); err != nil {
		return fmt.Errorf("decode page: %w", err)
	}
	if env.Value == nil {
		return errors.New("decode page: no value array")
	}
	return nil
}

// decodeItems decodes the items of a page that request u (with header)
// served, each decoded with the mapping or the schema once its children's
// collections are whole, and returns the position of its last
// item with a readable updated_at and erp_id (zero when none).
func (s *Source) decodeItems(ctx context.Context, u string, header http.Header, items *[]json.RawMessage) (p *erp.Page, last cursor, err error) {
	p = &erp.Page{Records: make([]erp.Record, 0, len(*items))}
	for _, raw := range *items {
		var problem string
		if len(s.navs) > 0 {
			if raw, problem, err = s.whole(ctx, u, header, raw); err != nil {
				return nil, cursor{}, err
			}
		}
		rec, inv, ok, err := s.decodeItem(raw)
		switch {
		case err != nil:
			return nil, cursor{}, fmt.Errorf("decode page: %w", err)
		case ok && problem != "":
			inv = erp.Invalid{ErpID: rec.ErpID, Reason: problem, Raw: raw, UpdatedAt: rec.UpdatedAt, Version: rec.Version}
		case problem != "":
			inv.Reason += "; " + problem
		}
		if ok && problem == "" {
			p.Records = append(p.Records, rec)
			last = cursor{T: rec.UpdatedAt, K: rec.ErpID}
			continue
		}
		p.Invalid = append(p.Invalid, inv)
		if !inv.UpdatedAt.IsZero() && inv.ErpID != "" {
			last = cursor{T: inv.UpdatedAt, K: inv.ErpID}
		}
	}
	return p, last, nil
}

// maxFollows is how many next links of one expanded collection are
// followed before the page fails: a server that keeps sending them is
// stuck, not paging.
const maxFollows = 1000

// whole makes the expanded collections of the item raw, which request u
// (with header) served, whole: a collection the server cut short carries
// <nav>@odata.nextLink, which is followed (GET, resolved against the
// request that served it) to its end and its lines appended; the item is
// returned with the whole collection and without the link. A
// <nav>@odata.count above the lines that came is a problem of the item,
// returned as a reason; a request that fails fails the page.
func (s *Source) whole(ctx context.Context, u string, header http.Header, raw json.RawMessage) (json.RawMessage, string, error) {
	if !slices.ContainsFunc(s.navs, func(n nav) bool { return bytes.Contains(raw, []byte(n.prop+"@odata.")) }) {
		return raw, "", nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return raw, "", nil // not an object: the decoder says so
	}
	var problems []string
	changed := false
	for _, n := range s.navs {
		linkRaw, countRaw := obj[n.prop+"@odata.nextLink"], obj[n.prop+"@odata.count"]
		var lines []json.RawMessage
		if linkRaw == nil && countRaw == nil || json.Unmarshal(obj[n.prop], &lines) != nil || lines == nil {
			continue // no annotation, or no array: the decoder says what is wrong
		}
		if linkRaw != nil {
			var link string
			if json.Unmarshal(linkRaw, &link) != nil || link == "" {
				problems = append(problems, fmt.Sprintf("%s: %s@odata.nextLink %s is not a link", n.label, n.prop, truncate(linkRaw, 80)))
				continue
			}
			more, err := s.follow(ctx, u, header, n.prop, link)
			if err != nil {
				return nil, "", err
			}
			lines = append(lines, more...)
			whole, err := marshal(lines)
			if err != nil {
				return nil, "", fmt.Errorf("odata: join the lines of %s: %w", n.prop, err)
			}
			obj[n.prop] = whole
			delete(obj, n.prop+"@odata.nextLink")
			changed = true
		}
		if countRaw != nil {
			// An Edm.Int64: a string under IEEE754Compatible=true.
			v, err := strconv.ParseInt(string(bytes.Trim(countRaw, `"`)), 10, 64)
			switch {
			case err != nil || v < 0:
				problems = append(problems, fmt.Sprintf("%s: %s@odata.count %s is not a count", n.label, n.prop, truncate(countRaw, 40)))
			case v > int64(len(lines)):
				problems = append(problems, fmt.Sprintf("%s: the server counts %d lines (%s@odata.count), %d came", n.label, v, n.prop, len(lines)))
			}
		}
	}
	if changed {
		var err error
		if raw, err = marshal(obj); err != nil {
			return nil, "", fmt.Errorf("odata: join an item and its lines: %w", err)
		}
	}
	return raw, strings.Join(problems, "; "), nil
}

// marshal writes v as compact JSON, its strings as they came (no HTML
// escapes): the item a record is read from and quarantined with. The
// members of an object come in the order of their names.
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// follow GETs the next link of the collection prop, which request u
// served, and the links after it, to the end: the lines they hold.
func (s *Source) follow(ctx context.Context, u string, header http.Header, prop, link string) ([]json.RawMessage, error) {
	var lines []json.RawMessage
	for n := 0; link != ""; n++ {
		if n == maxFollows {
			return nil, fmt.Errorf("odata: %s@odata.nextLink followed %d times (the last: %s): the server sends neither the lines nor their end; the pass stops",
				prop, n, truncate([]byte(link), 120))
		}
		ref, err := resolve(u, link)
		if err != nil {
			return nil, err
		}
		var env envelope
		if err := s.g.GetWith(ctx, erp.EndpointPage, ref, header, func(_ http.Header, body []byte) error { return env.decode(body) }); err != nil {
			return nil, fmt.Errorf("odata: follow %s@odata.nextLink: %w", prop, err)
		}
		lines = append(lines, *env.Value...)
		u, link = ref, env.NextLink
	}
	return lines, nil
}

// decodeItem decodes one item of the value array.
func (s *Source) decodeItem(raw []byte) (erp.Record, erp.Invalid, bool, error) {
	if s.schema != nil {
		return s.schema.DecodeItem(raw)
	}
	return s.m.DecodeItem(raw)
}

// after returns the keyset condition on the key properties of a record
// after the one of key text k (same updated_at): over a composite key,
// K1 gt v1 or (K1 eq v1 and (K2 gt v2 or (K2 eq v2 and K3 gt v3))).
// Columns the source sets are constants of its records: not compared.
func (s *Source) after(ctx context.Context, k string) (string, error) {
	parts := entity.SplitKey(k, len(s.keys))
	if len(parts) != len(s.keys) {
		return "", fmt.Errorf("%w: cursor key %q has not the %d parts of the key", erp.ErrBadRequest, k, len(s.keys))
	}
	var cond string
	for i := len(s.keys) - 1; i >= 0; i-- {
		key := s.keys[i]
		if key.prop == "" {
			continue
		}
		lit, err := s.literal(ctx, key, parts[i])
		if err != nil {
			return "", err
		}
		if cond == "" {
			cond = key.prop + " gt " + lit
		} else {
			cond = "(" + key.prop + " gt " + lit + " or (" + key.prop + " eq " + lit + " and " + cond + "))"
		}
	}
	return cond, nil
}

// literal writes the key text v of key as a $filter literal: bare for
// numbers, booleans, dates and date-times, else as keyLiteral writes a
// string.
func (s *Source) literal(ctx context.Context, key keyProp, v string) (string, error) {
	if s.v2() {
		return s.literalV2(key.prop, key.kind, v), nil
	}
	if key.kind == entity.String {
		return s.keyLiteral(ctx, key.prop, v)
	}
	return v, nil
}

// Count returns how many records the entity set holds in [since, until)
// (zero times leave a bound open), from <url>/$count.
func (s *Source) Count(ctx context.Context, since, until time.Time) (int64, error) {
	u := s.url + "/$count"
	if _, err := s.detect(ctx); err != nil {
		return 0, err
	}
	sets, err := s.setFilter(ctx)
	if err != nil {
		return 0, err
	}
	var params [][2]string
	if filter := append(s.window(since, until), sets...); len(filter) > 0 {
		params = [][2]string{{"$filter", strings.Join(filter, " and ")}}
	}
	if params = append(params, s.query...); len(params) > 0 {
		u += "?" + encodeQuery(params)
	}
	var n int64
	err = s.g.GetWith(ctx, erp.EndpointCount, u, http.Header{"Accept": {"text/plain"}}, func(_ http.Header, body []byte) error {
		v, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")))), 10, 64)
		if err != nil || v < 0 {
			return fmt.Errorf("decode count: %q is not a count", truncate(body, 40))
		}
		n = v
		return nil
	})
	return n, err
}

// window returns the $filter terms of [since, until).
func (s *Source) window(since, until time.Time) []string {
	var terms []string
	if !since.IsZero() {
		terms = append(terms, s.modified+" ge "+s.timeLit(since))
	}
	if !until.IsZero() {
		terms = append(terms, s.modified+" lt "+s.timeLit(until))
	}
	return terms
}

// timeLiteral is an Edm.DateTimeOffset literal: unquoted RFC 3339 in UTC
// with as many fraction digits as t has.
func timeLiteral(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// stringLiteral is an Edm.String literal: quoted, ' doubled.
func stringLiteral(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }

// encodeQuery writes the query of params in order: values percent-encoded
// with %20 for a space (OData servers such as SAP CAP answer 400 to a '+'
// for a space), no trailing '&'.
func encodeQuery(params [][2]string) string {
	var b strings.Builder
	for i, p := range params {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p[0])
		b.WriteByte('=')
		b.WriteString(strings.ReplaceAll(url.QueryEscape(p[1]), "+", "%20"))
	}
	return b.String()
}

// urlQuery reads the query of an entity set URL (SAP's sap-client=100)
// into parameters sent with every request, in order; OData's own system
// query options ($...) are refused: the source writes them.
func urlQuery(raw string) ([][2]string, error) {
	var out [][2]string
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		key, err1 := url.QueryUnescape(k)
		val, err2 := url.QueryUnescape(v)
		switch {
		case err1 != nil || err2 != nil:
			return nil, fmt.Errorf("query %q is not URL-encoded", part)
		case strings.HasPrefix(key, "$"):
			return nil, fmt.Errorf("query option %s: the source writes OData's options itself; only a service's own parameters (sap-client=100) go in the URL", key)
		}
		out = append(out, [2]string{key, val})
	}
	return out, nil
}

// resolve makes a next link absolute against the request URL it came in.
func resolve(request, link string) (string, error) {
	base, err := url.Parse(request)
	if err != nil {
		return "", err
	}
	ref, err := url.Parse(link)
	if err != nil {
		return "", fmt.Errorf("odata: @odata.nextLink %q: %w", truncate([]byte(link), 80), err)
	}
	return base.ResolveReference(ref).String(), nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
