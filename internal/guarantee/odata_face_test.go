package guarantee

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/odata"
	"github.com/erpsync/erpsync/internal/syncer"
)

// odataSpec is how a feed's ERP is read as an OData v4 entity set,
// through internal/odata as `--erp-kind odata` wires it, instead of the
// REST API.
type odataSpec struct {
	GUID    bool // erp_id is an Edm.Guid key, written unquoted in $filter
	Derived bool // no version property (version=): a version is updated_at in microseconds
	Cap     int  // the server's own page limit, whatever $top asks (0: none)
	// MetadataOutage: every attempt of the feed's first $metadata read
	// answers 503.
	MetadataOutage bool
	// EmptyAt: each execution's EmptyAt-th page request is answered with
	// an empty page and an @odata.nextLink while rows remain (0: never).
	EmptyAt int
	// V2: the face is an OData V2 service (odata_v2_face_test.go).
	V2 bool
}

func (o *odataSpec) String() string {
	s := "OData: key Edm.String"
	if o.GUID {
		s = "OData: key Edm.Guid"
	}
	if o.Derived {
		s += ", version= (updated_at in µs)"
	}
	if o.Cap > 0 {
		s += fmt.Sprintf(", server page limit %d", o.Cap)
	}
	if o.MetadataOutage {
		s += ", the first $metadata read fails"
	}
	if o.EmptyAt > 0 {
		s += fmt.Sprintf(", request %d of each execution: an empty page with a nextLink", o.EmptyAt)
	}
	if o.V2 {
		s += ", served as OData V2"
	}
	return s
}

var flagFaults = flag.Bool("guarantee.odata-faults", true, "let the OData face fail a $metadata read and serve empty pages with a nextLink")

// Properties of the entity set, and what erpsync is told of them.
const (
	odataSet       = "odata/v4/erp/Memberships"
	odataStatusMap = "active=ACTIVE,suspended=SUSPENDED,cancelled=CANCELLED,expired=EXPIRED"
	pKey           = "MembershipID"
	pModified      = "LastChangeDateTime"
	pVersion       = "ChangeCounter"
)

// odataProps maps the REST feed's fields to the entity's properties.
var odataProps = map[string]string{
	"erp_id": pKey, "member_id": "BusinessPartner", "product_code": "Product", "status": "LifecycleStatus",
	"starts_at": "ValidFrom", "ends_at": "ValidTo", "updated_at": pModified, "version": pVersion,
}

// metadataAttempts is how many attempts one read makes: erpsync's default
// of 6 retries, in this process and in bin/erpsync.
const metadataAttempts = 7

func (o *odataSpec) erpMap() string {
	var pairs []string
	for _, f := range []string{"erp_id", "member_id", "product_code", "status", "starts_at", "ends_at", "updated_at"} {
		pairs = append(pairs, f+"="+odataProps[f])
	}
	if o.Derived {
		return strings.Join(append(pairs, "version="), ",")
	}
	return strings.Join(append(pairs, "version="+pVersion), ",")
}

// selected is the $select erpsync must send: every mapped property.
func (o *odataSpec) selected() []string {
	var ps []string
	for f, p := range odataProps {
		if f != "version" || !o.Derived {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps
}

// genSources picks the feed's lock service and, in about one feed of
// three, an OData face of its ERP, and fits the scenario to that face.
// It draws after every other choice of generate, so the rest of a seed's
// scenario stays as it was.
func genSources(s *source, sc *scenario) {
	sc.Locks = genLocks(s)
	if !s.pct(35) || sc.Typed != nil { // a config file's entities read the REST API
		return
	}
	o := &odataSpec{GUID: s.pct(50), Derived: s.pct(50)}
	if s.pct(50) {
		o.Cap = 1 + s.intn(10)
	}
	o.MetadataOutage = o.GUID && s.pct(30)
	if s.pct(20) {
		o.EmptyAt = 1 + s.intn(2)
	}
	if !*flagFaults {
		o.MetadataOutage, o.EmptyAt = false, 0
	}
	if o.V2 = s.pct(33); o.V2 {
		o.MetadataOutage = false // a V2 feed reads $metadata first, to learn its version
	}
	sc.OData = o
	for i := range sc.Records {
		o.fit(&sc.Records[i])
	}
	var inv []item
	for _, it := range sc.Invalid {
		if c, ok := o.invalidItem(it); ok {
			inv = append(inv, c)
		}
	}
	sc.Invalid = inv
}

// guidOf is the Edm.Guid that stands for id in a feed with GUID keys.
func guidOf(id string) string {
	h := sha256.Sum256([]byte(id))
	x := fmt.Sprintf("%x", h[:16])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// fit makes a new record what the face can serve: a GUID key, and with
// version= a version that is its updated_at in µs, after 1970 and far
// enough below the last storable instant for every later change to move
// it forward.
func (o *odataSpec) fit(r *record) {
	if o.GUID {
		r.ID = guidOf(r.ID)
	}
	if o.Derived {
		if !r.Updated.After(epoch) {
			r.Updated = epoch.Add(time.Millisecond)
		}
		if limit := maxStorable.Add(-time.Hour); r.Updated.After(limit) {
			r.Updated = limit
		}
		r.Version = r.Updated.UnixMicro()
	}
}

// invalidItem turns an invalid item of the REST feed into an entity of
// the set, properties renamed and the status in the source's case, and
// reports false for one no OData server can hold: an updated_at that is
// missing, not a date-time or past 9999 in UTC (erpsync writes it into
// the next page's $filter), or an erp_id that is empty or, with GUID keys,
// not a GUID. With version= the version is not read, so an item whose
// only flaw was its version is dated 1970-01-01T00:00:00Z, whose
// microseconds are no version.
func (o *odataSpec) invalidItem(it item) (item, bool) {
	var w map[string]any
	if json.Unmarshal(it.raw, &w) != nil || o.V2 && !v2Serves(w) {
		return item{}, false
	}
	id, _ := w["erp_id"].(string)
	ts, _ := w["updated_at"].(string)
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil || at.UTC().Year() > 9999 || id == "" {
		return item{}, false
	}
	if o.GUID {
		if !reInvalidID.MatchString(id) {
			return item{}, false
		}
		id = guidOf(id)
		w["erp_id"] = id
	}
	if v, ok := w["version"].(float64); o.Derived && (!ok || v < 1 || v != float64(int64(v))) {
		at = epoch
		w["updated_at"] = epoch.Format(tsLayout)
	}
	if st, ok := w["status"].(string); ok {
		w["status"] = strings.ToLower(st)
	}
	e := map[string]any{}
	for f, p := range odataProps {
		if f != "version" || !o.Derived {
			e[p] = w[f] // nil, a JSON null, for a missing field
		}
	}
	raw, _ := json.Marshal(e)
	return item{id: id, at: at, raw: raw}, true
}

// entity is record r as the face serves it.
func (o *odataSpec) entity(r record) []byte {
	if o.V2 {
		return o.v2Entity(r)
	}
	e := map[string]any{
		pKey: r.ID, "BusinessPartner": r.Member, "Product": r.Product, "LifecycleStatus": strings.ToLower(r.Status),
		"ValidFrom": r.Starts.Format(tsLayout), "ValidTo": nil, pModified: r.Updated.Format(tsLayout),
	}
	if r.Ends != nil {
		e["ValidTo"] = r.Ends.Format(tsLayout)
	}
	if !o.Derived {
		e[pVersion] = r.Version
	}
	b, _ := json.Marshal(e)
	return b
}

// face is the feed's OData face: its spec and what it has failed so far.
type face struct {
	*odataSpec
	metadataFailed int
}

func newFace(o *odataSpec) *face {
	if o == nil {
		return nil
	}
	return &face{odataSpec: o}
}

// created fits a record the ERP creates; e.born already holds it under
// its first id and version. Callers hold mu.
func (f *face) created(e *erpSim, r *record) {
	if f == nil {
		return
	}
	made := e.born[bornKey(r.ID, r.Version)]
	delete(e.born, bornKey(r.ID, r.Version))
	f.fit(r)
	e.born[bornKey(r.ID, r.Version)] = made
}

// changed moves a change of old forward in a feed with version=: its
// updated_at is after old's, even when old is dated in the future, and
// its version is that updated_at in µs; e.born already holds it under
// the version the change drew. Callers hold mu.
func (f *face) changed(e *erpSim, n *record, old record) {
	if f == nil || !f.Derived {
		return
	}
	made := e.born[bornKey(n.ID, n.Version)]
	delete(e.born, bornKey(n.ID, n.Version))
	if !n.Updated.After(old.Updated) {
		n.Updated = old.Updated.Add(time.Millisecond)
	}
	n.Version = n.Updated.UnixMicro()
	e.born[bornKey(n.ID, n.Version)] = made
}

var (
	reKeyset = regexp.MustCompile(`\(` + pModified + ` (gt|ge|lt|le) (\S+) or \(` + pModified + ` eq (\S+) and ` + pKey + ` (gt|ge|lt|le) ('(?:[^']|'')*'|[^)\s]+)\)\)`)
	reBound  = regexp.MustCompile(`^` + pModified + ` (ge|lt) (\S+)$`)
	// reInvalidID is the erp_id of an invalid item that a GUID stands for.
	reInvalidID = regexp.MustCompile(`^inv-\d+$`)
	reSkiptoken = regexp.MustCompile(`&?\$skiptoken=[^&]*`)
)

// odataError answers code with an OData error body.
func odataError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": strconv.Itoa(code), "message": msg}})
	w.Write(b)
}

// query is a request's $filter, read as exactly what erpsync sends: the
// window's bounds and the keyset position, each at most once.
type query struct {
	since, until time.Time
	after        *item  // the keyset position
	atOp, keyOp  string // how the keyset compares modified-at and the key with after's
}

func (f *face) parseFilter(filter string) (query, error) {
	var q query
	if f.V2 {
		var err error
		if filter, err = f.v2Filter(filter); err != nil {
			return q, err
		}
	}
	if m := reKeyset.FindStringSubmatchIndex(filter); m != nil {
		t, err1 := time.Parse(time.RFC3339Nano, filter[m[4]:m[5]])
		t2, err2 := time.Parse(time.RFC3339Nano, filter[m[6]:m[7]])
		if err1 != nil || err2 != nil || !t.Equal(t2) {
			return q, fmt.Errorf("keyset: bad Edm.DateTimeOffset literals %q, %q", filter[m[4]:m[5]], filter[m[6]:m[7]])
		}
		k, err := f.keyLiteral(filter[m[10]:m[11]])
		if err != nil {
			return q, err
		}
		q.after, q.atOp, q.keyOp = &item{at: t, id: k}, filter[m[2]:m[3]], filter[m[8]:m[9]]
		filter = filter[:m[0]] + filter[m[1]:]
	}
	var err error
	q.since, q.until, err = windowBounds(filter, reBound)
	return q, err
}

// windowBounds reads the terms of filter, joined by " and ", as the
// window's bounds: each a match of re, whose groups are ge or lt and an
// Edm.DateTimeOffset literal.
func windowBounds(filter string, re *regexp.Regexp) (since, until time.Time, err error) {
	for _, term := range strings.Split(filter, " and ") {
		if term == "" {
			continue
		}
		m := re.FindStringSubmatch(term)
		if m == nil {
			return since, until, fmt.Errorf("unsupported $filter term %q", term)
		}
		t, err := time.Parse(time.RFC3339Nano, m[2])
		if err != nil {
			return since, until, fmt.Errorf("bad Edm.DateTimeOffset literal %q", m[2])
		}
		if m[1] == "ge" {
			since = t
		} else {
			until = t
		}
	}
	return since, until, nil
}

// keyLiteral reads a literal of the key property as a real server does:
// an Edm.Guid unquoted (a quoted one is a string, which a Guid cannot be
// compared with), an Edm.String quoted.
func (f *face) keyLiteral(lit string) (string, error) {
	quoted := strings.HasPrefix(lit, "'") && strings.HasSuffix(lit, "'") && len(lit) >= 2
	switch {
	case f.GUID && quoted:
		return "", fmt.Errorf("the types 'Edm.Guid' and 'Edm.String' are not compatible: %s gt %s", pKey, lit)
	case f.GUID && !guidRe.MatchString(lit):
		return "", fmt.Errorf("%q is not an Edm.Guid literal", lit)
	case f.GUID:
		return strings.ToLower(lit), nil
	case !quoted:
		return "", fmt.Errorf("%q is not an Edm.String literal", lit)
	}
	return strings.ReplaceAll(lit[1:len(lit)-1], "''", "'"), nil
}

var guidRe = regexp.MustCompile(`^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$`)

func (q query) holds(it item) bool {
	if it.at.Before(q.since) || !q.until.IsZero() && !it.at.Before(q.until) {
		return false
	}
	return q.after == nil || satisfies(q.atOp, it.at.Compare(q.after.at)) || it.at.Equal(q.after.at) && satisfies(q.keyOp, strings.Compare(it.id, q.after.id))
}

// satisfies reports whether a comparison whose result is c satisfies op.
func satisfies(op string, c int) bool {
	switch op {
	case "gt":
		return c > 0
	case "ge":
		return c >= 0
	case "lt":
		return c < 0
	}
	return c <= 0
}

// skiptoken is the position an @odata.nextLink continues after; "-" for
// the start of the query.
func skiptoken(after *item) string {
	if after == nil {
		return "-"
	}
	return cursorOf(*after)
}

// serveOData serves the feed's ERP as an OData v4 entity set under
// /x/<execution>/odata/v4/erp/: $metadata, Memberships/$count and pages
// of Memberships for the queries of internal/odata, with the adversary
// changing records between pages as for the REST API, and logs what it
// served each execution as that API does.
func (e *erpSim) serveOData(w http.ResponseWriter, r *http.Request) {
	x, rest, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/x/"), "/")
	if !ok || !strings.HasPrefix(r.URL.Path, "/x/") {
		odataError(w, http.StatusNotFound, "no such resource")
		return
	}
	if strings.Contains(r.URL.RawQuery, "+") || strings.HasSuffix(r.URL.RawQuery, "&") {
		odataError(w, http.StatusBadRequest, "malformed query")
		return
	}
	f := e.face
	v := r.URL.Query()
	q, err := f.parseFilter(v.Get("$filter"))
	if err != nil {
		odataError(w, http.StatusBadRequest, err.Error())
		return
	}
	e.mu.Lock()
	w.Header().Set("Date", e.now().UTC().Format(http.TimeFormat))
	switch rest {
	case "odata/v4/erp/$metadata":
		failed := f.MetadataOutage && f.metadataFailed < metadataAttempts
		if failed {
			f.metadataFailed++
		}
		e.mu.Unlock()
		if failed {
			odataError(w, http.StatusServiceUnavailable, "service unavailable")
			return
		}
		w.Header().Set("Content-Type", "application/xml")
		w.Write(f.metadata())
		return
	case odataSet + "/$count":
		e.serveCount(w, q.holds)
		return
	case odataSet:
	default:
		e.mu.Unlock()
		odataError(w, http.StatusNotFound, "no such resource: "+rest)
		return
	}
	p, err := f.pageQuery(v, q)
	if err != nil {
		e.mu.Unlock()
		odataError(w, http.StatusBadRequest, err.Error())
		return
	}
	body, hook, n := e.odataPage(x, r.URL.RawQuery, q, p)
	if hook != nil {
		hook(n)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// serveCount answers a /$count request: how many items of the feed hold.
// Callers hold mu; it releases it.
func (e *erpSim) serveCount(w http.ResponseWriter, holds func(item) bool) {
	n := 0
	for _, it := range e.feed() {
		if holds(it) {
			n++
		}
	}
	e.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprint(w, n)
}

// pageQuery is what a page request asks beyond its $filter.
type pageQuery struct {
	top  int
	skip *item // from $skiptoken: the position a nextLink continues after
	next bool  // asked with a $skiptoken
}

// pageQuery checks $select, $orderby, $top and $skiptoken.
func (f *face) pageQuery(v map[string][]string, q query) (pageQuery, error) {
	get := func(k string) string {
		if len(v[k]) == 0 {
			return ""
		}
		return v[k][0]
	}
	sel := strings.Split(get("$select"), ",")
	slices.Sort(sel)
	if !slices.Equal(sel, f.selected()) {
		return pageQuery{}, fmt.Errorf("$select %q: want the mapped properties %s", get("$select"), strings.Join(f.selected(), ","))
	}
	if ob := get("$orderby"); ob != pModified+","+pKey {
		return pageQuery{}, fmt.Errorf("$orderby %q: want %s,%s", ob, pModified, pKey)
	}
	p := pageQuery{top: 1000}
	if t := get("$top"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 {
			return pageQuery{}, fmt.Errorf("$top %q", t)
		}
		p.top = n
	}
	if f.Cap > 0 {
		p.top = min(p.top, f.Cap)
	}
	if tok := get("$skiptoken"); tok != "" {
		p.next = true
		if tok != "-" {
			c, err := parseCursor(tok)
			if err != nil {
				return pageQuery{}, fmt.Errorf("$skiptoken %q", tok)
			}
			p.skip = &c
		}
	}
	return p, nil
}

// odataPage answers one page request of execution x and logs it; it
// returns the body and the execution's page hook with the request's
// number. Callers hold mu; it releases it.
func (e *erpSim) odataPage(x, rawQuery string, q query, p pageQuery) ([]byte, func(int), int) {
	l, n := e.pageRequest(x)
	var match []item
	for _, it := range e.feed() {
		if q.holds(it) && (p.skip == nil || it.cmp(*p.skip) > 0) {
			match = append(match, it)
		}
	}
	page := match[:min(len(match), p.top)]
	more := len(page) < len(match)
	from := p.skip
	if from == nil && !p.next {
		from = q.after
	}
	if e.face.EmptyAt == n && len(match) > 0 && !p.next {
		page, more = nil, true // a nextLink that continues where the request began
	} else if len(page) > 0 {
		from = &page[len(page)-1]
	}
	hook := e.logServed(x, l, page, more)
	e.mu.Unlock()

	var b strings.Builder
	open, nextName, end := e.face.envelope()
	b.WriteString(open)
	for i, it := range page {
		if i > 0 {
			b.WriteByte(',')
		}
		if it.rec != nil {
			b.Write(e.face.entity(*it.rec))
		} else {
			b.Write(it.raw)
		}
	}
	b.WriteString("]")
	if more {
		query := reSkiptoken.ReplaceAllString(rawQuery, "")
		link, _ := json.Marshal("Memberships?" + query + "&$skiptoken=" + skiptoken(from))
		b.WriteString(`,"` + nextName + `":`)
		b.Write(link)
	}
	b.WriteString(end)
	return []byte(b.String()), hook, n
}

// logPage logs that page was served, the last one unless more, and
// returns the page hook. Callers hold the ERP's mu.
func (l *execLog) logPage(page []item, more bool) func(int) {
	for _, it := range page {
		if it.rec != nil {
			l.served[it.id] = max(l.served[it.id], it.rec.Version)
		}
	}
	l.last = page
	l.done = l.done || !more
	return l.onPage
}

// keyAndVersion are the Property elements of the key and the version
// ("" with version=).
func (f *face) keyAndVersion() (key, version string) {
	key = `<Property Name="` + pKey + `" Type="Edm.String" MaxLength="64" Nullable="false"/>`
	if f.GUID {
		key = `<Property Name="` + pKey + `" Type="Edm.Guid" Nullable="false"/>`
	}
	if !f.Derived {
		version = `<Property Name="` + pVersion + `" Type="Edm.Int64"/>`
	}
	return key, version
}

// metadata is the service's CSDL document.
func (f *face) metadata() []byte {
	if f.V2 {
		return f.metadataV2()
	}
	key, version := f.keyAndVersion()
	return []byte(`<?xml version="1.0" encoding="utf-8"?>
<edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
<edmx:DataServices>
<Schema Namespace="ErpService" xmlns="http://docs.oasis-open.org/odata/ns/edm">
<EntityType Name="Membership"><Key><PropertyRef Name="` + pKey + `"/></Key>` + key + `
<Property Name="BusinessPartner" Type="Edm.String"/><Property Name="Product" Type="Edm.String"/>
<Property Name="LifecycleStatus" Type="Edm.String"/><Property Name="ValidFrom" Type="Edm.DateTimeOffset"/>
<Property Name="ValidTo" Type="Edm.DateTimeOffset"/><Property Name="` + pModified + `" Type="Edm.DateTimeOffset" Nullable="false"/>` + version + `
</EntityType>
<EntityContainer Name="EntityContainer"><EntitySet Name="Memberships" EntityType="ErpService.Membership"/></EntityContainer>
</Schema>
</edmx:DataServices>
</edmx:Edmx>
`)
}

// erpURL is the URL execution id reads the ERP at: the REST API's base,
// or the entity set.
func (f *feed) erpURL(id string) string {
	if f.sc.OData != nil {
		return f.url + "/x/" + id + "/" + odataSet
	}
	return f.url + "/x/" + id
}

// procFlags are the flags of an erpsync process of the feed on the entity
// of tab beyond its execution's: the lock service, and the OData source or
// the config file and the entity.
func (f *feed) procFlags(tab *table) []string {
	flags := f.lockFlags()
	if o := f.sc.OData; o != nil {
		flags = append(flags, "--erp-kind", "odata", "--erp-odata", o.version(), "--erp-map", o.erpMap(), "--erp-status-map", odataStatusMap)
	}
	if ty := f.sc.Typed; ty != nil {
		flags = append(flags, "--config", ty.config(), "--entity", tab.entity)
	}
	return flags
}

// execKey is the context key of the execution a request of the shared
// OData source belongs to.
type execKey struct{}

// route sends each request of the shared OData source to the path of the
// execution in its context.
type route struct{ base http.RoundTripper }

func (rt route) RoundTrip(r *http.Request) (*http.Response, error) {
	if id, ok := r.Context().Value(execKey{}).(string); ok {
		r = r.Clone(r.Context())
		r.URL.Path = strings.Replace(r.URL.Path, "/x/shared/", "/x/"+id+"/", 1)
	}
	return rt.base.RoundTrip(r)
}

// newODataSource returns the OData source the feed's in-process
// executions share, as the runs of one `erpsync schedule` process share
// theirs (its $metadata read included), wired as `--erp-kind odata`
// wires it; nil for a feed of the REST API.
func (f *feed) newODataSource() *odata.Source {
	o := f.sc.OData
	if o == nil {
		return nil
	}
	m, err := erp.ParseMapping(o.erpMap(), odataStatusMap)
	if err != nil {
		f.t.Fatalf("--erp-map: %v", err)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	s, err := odata.New(odata.Config{URL: f.erpURL("shared"), Mapping: m, Version: o.version(), HTTP: erp.Config{
		Timeout: time.Minute, MinBackoff: time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		HTTPClient: &http.Client{Transport: route{t}},
	}})
	if err != nil {
		f.t.Fatalf("odata source: %v", err)
	}
	return s
}

// execSource is the shared OData source as execution id reads it.
type execSource struct {
	*odata.Source
	id string
}

func (s execSource) Page(ctx context.Context, q erp.Query) (*erp.Page, error) {
	return s.Source.Page(context.WithValue(ctx, execKey{}, s.id), q)
}

// odataSource returns the ERP source of execution id in a feed of the
// OData face; nil for a feed of the REST API.
func (f *feed) odataSource(id string) syncer.Source {
	if f.odata == nil {
		return nil
	}
	return execSource{Source: f.odata, id: id}
}
