package guarantee

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/erpsync/erpsync/erpmock"
)

// The documents feeds' OData face: in about one documents feed of three
// the simulated ERP serves the orders as an OData V2 entity set, as SAP
// Gateway does, read through `kind: odata` (testdata/orders-odata.yaml):
// Orders with their lines in the navigation property Items, asked with
// $expand=Items; {"d":{"results":[...],"__next":...}} pages, /Date(ms)/
// date-times (and dates), decimals and Edm.Int64 values as strings, the
// lines as {"results":[...]}. In some feeds every order's lines are cut
// after k with a nested __next, which serves the rest k at a time: a
// reader that ignores it holds a document without all its lines. The
// model's compare (the table equals the ERP, lines included) catches a
// line lost or a date-time moved.

// docsODataSpec is the documents' OData face of a feed.
type docsODataSpec struct {
	// CutLines: the lines of each order come k at a time (0: all at once),
	// each part but the last with a nested __next to the next.
	CutLines int
}

// String names the feed's entity, with change events when ev is set.
func (d *docsODataSpec) String(ev *docEventsSpec) string {
	s := "entity: contracts of testdata/orders-odata.yaml (documents read as OData V2: Orders, $expand=Items), every execution a process"
	if ev != nil {
		s = "entity: contracts of testdata/orders-odata-events.yaml (documents read as OData V2, events: true), every execution a process; " + ev.String()
	}
	if d.CutLines > 0 {
		s += fmt.Sprintf("; the lines cut after %d with a nested __next", d.CutLines)
	}
	return s
}

// genDocsOData makes seed's documents feed read the OData face in one
// feed of three (seeds 2, 5, 8, ...; every other choice of the feed stays
// that of its seed), its lines cut after 1 to 3 but in one such feed of
// three (seeds 8, 17, ...). A feed with change events reads
// orders-odata-events.yaml. As an OData server answers the query, such a
// feed has no invalid items, no copies that turn invalid, replays,
// duplicates or stale copies.
func genDocsOData(seed uint64, sc *scenario) {
	if seed%3 != 2 {
		return
	}
	d := &docsODataSpec{}
	if seed%9 != 8 {
		d.CutLines = 1 + int(seed/3%3)
	}
	sc.Typed.DocsOData = d
	sc.Invalid, sc.Spoil, sc.Adv.Spoil, sc.Adv.Mend = nil, 0, 0, 0
}

// Properties of the Orders entity set.
const (
	docsSet      = "Orders"
	docsModified = "ChangedAt"
)

var (
	reDocsBound  = regexp.MustCompile(`^` + docsModified + ` (ge|lt) datetimeoffset'([^']+)'$`)
	reDocsKeyset = regexp.MustCompile(`\(` + docsModified + ` gt datetimeoffset'([^']+)' or \(` + docsModified + ` eq datetimeoffset'([^']+)' and ` +
		`\(Region gt '((?:[^']|'')*)' or \(Region eq '((?:[^']|'')*)' and No gt (-?[0-9]+)L\)\)\)\)`)
	reDocsItems = regexp.MustCompile(`^` + docsSet + `\(Region='((?:[^']|'')*)',No=(-?[0-9]+)L\)/Items$`)
)

// docKey is an order's position in the entity set's order: ChangedAt,
// Region, No.
type docKey struct {
	at     time.Time
	region string
	no     int64
}

func (k docKey) cmp(o docKey) int {
	if c := k.at.Compare(o.at); c != 0 {
		return c
	}
	if c := strings.Compare(k.region, o.region); c != 0 {
		return c
	}
	return int(k.no - o.no)
}

func keyOfItem(it item) docKey {
	region, no, _ := erpmock.SplitContractID(it.id)
	return docKey{at: it.at, region: region, no: no}
}

// docsQuery is a page request's $filter: the window and the keyset
// position.
type docsQuery struct {
	since, until time.Time
	after        *docKey
}

func parseDocsFilter(filter string) (docsQuery, error) {
	var q docsQuery
	if m := reDocsKeyset.FindStringSubmatchIndex(filter); m != nil {
		t, err1 := time.Parse(time.RFC3339Nano, filter[m[2]:m[3]])
		t2, err2 := time.Parse(time.RFC3339Nano, filter[m[4]:m[5]])
		r1, r2 := filter[m[6]:m[7]], filter[m[8]:m[9]]
		no, err3 := strconv.ParseInt(filter[m[10]:m[11]], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || !t.Equal(t2) || r1 != r2 {
			return q, fmt.Errorf("keyset: bad literals in %q", filter[m[0]:m[1]])
		}
		q.after = &docKey{at: t, region: strings.ReplaceAll(r1, "''", "'"), no: no}
		filter = filter[:m[0]] + filter[m[1]:]
	}
	var err error
	q.since, q.until, err = windowBounds(filter, reDocsBound)
	return q, err
}

func (q docsQuery) holds(it item) bool {
	if it.at.Before(q.since) || !q.until.IsZero() && !it.at.Before(q.until) {
		return false
	}
	return q.after == nil || keyOfItem(it).cmp(*q.after) > 0
}

// serveDocsOData serves the documents' OData face under
// /x/<execution>/: $metadata, Orders/$count, pages of Orders and the rest
// of an order's lines (Orders(Region='…',No=…L)/Items), and logs what it
// served under the execution's id with typedLog, as the typed face does.
func (e *erpSim) serveDocsOData(w http.ResponseWriter, r *http.Request) {
	x, rest, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/x/"), "/")
	if !ok || !strings.HasPrefix(r.URL.Path, "/x/") {
		odataError(w, http.StatusNotFound, "no such resource")
		return
	}
	x += typedLog
	v := r.URL.Query()
	if rest == "$metadata" {
		w.Header().Set("Content-Type", "application/xml")
		w.Write(docsMetadataV2)
		return
	}
	if m := reDocsItems.FindStringSubmatch(rest); m != nil {
		e.serveDocLines(w, "http://"+r.Host+strings.TrimSuffix(r.URL.Path, rest), m, v)
		return
	}
	q, err := parseDocsFilter(v.Get("$filter"))
	if err != nil {
		odataError(w, http.StatusBadRequest, err.Error())
		return
	}
	e.mu.Lock()
	w.Header().Set("Date", e.now().UTC().Format(http.TimeFormat))
	switch rest {
	case docsSet + "/$count":
		e.serveCount(w, q.holds)
		return
	case docsSet:
	default:
		e.mu.Unlock()
		odataError(w, http.StatusNotFound, "no such resource: "+rest)
		return
	}
	if ob := v.Get("$orderby"); ob != docsModified+",Region,No" {
		e.mu.Unlock()
		odataError(w, http.StatusBadRequest, fmt.Sprintf("$orderby %q: want %s,Region,No", ob, docsModified))
		return
	}
	if ex, f := v.Get("$expand"), v.Get("$format"); ex != "Items" || f != "json" {
		e.mu.Unlock()
		odataError(w, http.StatusBadRequest, fmt.Sprintf("$expand %q, $format %q: want Items, json", ex, f))
		return
	}
	top := 1000
	if t := v.Get("$top"); t != "" {
		if top, err = strconv.Atoi(t); err != nil || top < 0 {
			e.mu.Unlock()
			odataError(w, http.StatusBadRequest, "$top "+t)
			return
		}
	}
	var skip *docKey
	if tok := v.Get("$skiptoken"); tok != "" {
		k, err := parseDocToken(tok)
		if err != nil {
			e.mu.Unlock()
			odataError(w, http.StatusBadRequest, err.Error())
			return
		}
		skip = &k
	}
	l, n := e.pageRequest(x)
	var match []item
	for _, it := range e.feed() {
		if q.holds(it) && (skip == nil || keyOfItem(it).cmp(*skip) > 0) {
			match = append(match, it)
		}
	}
	slices.SortFunc(match, func(a, b item) int { return keyOfItem(a).cmp(keyOfItem(b)) })
	page := match[:min(len(match), top)]
	more := len(page) < len(match)
	hook := e.logServed(x, l, page, more)
	cut := e.docs.CutLines
	e.mu.Unlock()

	base := "http://" + r.Host + strings.TrimSuffix(r.URL.Path, docsSet)
	var b bytes.Buffer
	b.WriteString(`{"d":{"results":[`)
	for i, it := range page {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(docEntityV2(it, base, cut))
	}
	b.WriteString("]")
	if more {
		q := reSkiptoken.ReplaceAllString(r.URL.RawQuery, "")
		link, _ := json.Marshal(base + docsSet + "?" + q + "&$skiptoken=" + docToken(keyOfItem(page[len(page)-1])))
		b.WriteString(`,"__next":`)
		b.Write(link)
	}
	b.WriteString("}}")
	if hook != nil {
		hook(n)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b.Bytes())
}

// docToken is the $skiptoken of a __next that continues after k.
func docToken(k docKey) string {
	return strconv.FormatInt(k.at.UnixNano(), 10) + "~" + k.region + "~" + strconv.FormatInt(k.no, 10)
}

func parseDocToken(tok string) (docKey, error) {
	p := strings.Split(tok, "~")
	if len(p) != 3 {
		return docKey{}, fmt.Errorf("$skiptoken %q", tok)
	}
	ns, err1 := strconv.ParseInt(p[0], 10, 64)
	no, err2 := strconv.ParseInt(p[2], 10, 64)
	if err1 != nil || err2 != nil {
		return docKey{}, fmt.Errorf("$skiptoken %q", tok)
	}
	return docKey{at: time.Unix(0, ns).UTC(), region: p[1], no: no}, nil
}

// docEntityV2 is the order of item it as the V2 face serves it, under the
// service root base: its lines (erpmock.OrderOfAt) in Items, cut after
// cut lines (0: none) with a __next to the rest.
func docEntityV2(it item, base string, cut int) []byte {
	raw, err := erpmock.OrderOfAt(it.raw, it.linesRev)
	if err != nil {
		return it.raw
	}
	var o struct {
		Region    string           `json:"region"`
		No        int64            `json:"no"`
		Customer  struct{ ID any } `json:"customer"`
		Plan      any              `json:"plan"`
		Status    any              `json:"status"`
		Period    struct{ From, To *string }
		SignedOn  string      `json:"signed_on"`
		Amount    json.Number `json:"amount"`
		Balance   json.Number `json:"balance"`
		Serial    json.Number `json:"serial"`
		Rev       int64       `json:"rev"`
		ChangedAt string      `json:"changed_at"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&o) != nil {
		return it.raw
	}
	date := func(s *string, offset bool) any {
		if s == nil {
			return nil
		}
		t, err := time.Parse(time.RFC3339Nano, *s)
		if err != nil {
			t, err = time.Parse(time.DateOnly, *s)
		}
		if err != nil {
			return *s
		}
		return v2Date(t, offset)
	}
	e := map[string]any{
		"__metadata": map[string]string{"type": "ErpService.Order", "uri": base + docOrderPath(o.Region, o.No)},
		"Region":     o.Region, "No": strconv.FormatInt(o.No, 10), "Customer": o.Customer.ID, "Plan": o.Plan, "Status": o.Status,
		"PeriodFrom": date(o.Period.From, false), "PeriodTo": date(o.Period.To, false), "SignedOn": date(&o.SignedOn, false),
		"Amount": o.Amount.String(), "Balance": strings.Trim(o.Balance.String(), `"`), "Serial": strings.Trim(o.Serial.String(), `"`),
		"Rev": strconv.FormatInt(o.Rev, 10), docsModified: date(&o.ChangedAt, true),
		"Items": docLinesV2(it.id, o.Rev, it.linesRev(it.id, o.Rev), 0, cut, base+docOrderPath(o.Region, o.No)),
	}
	b, _ := json.Marshal(e)
	return b
}

// docOrderPath is the path of an order's entity under the service root.
func docOrderPath(region string, no int64) string {
	return docsSet + "(Region='" + strings.ReplaceAll(region, "'", "''") + "',No=" + strconv.FormatInt(no, 10) + "L)"
}

// docLinesV2 is the collection of the lines of erpID at version v and
// revision rev from the from-th: all of them, or cut of them with a
// __next (under the order's URI) to the rest.
func docLinesV2(erpID string, v int64, rev, from, cut int, order string) map[string]any {
	all := erpmock.OrderLinesAt(erpID, v, rev)
	from = min(from, len(all))
	lines := all[from:]
	out := map[string]any{}
	if cut > 0 && len(lines) > cut {
		lines = lines[:cut]
		out["__next"] = fmt.Sprintf("%s/Items?$format=json&v=%d&rev=%d&$skiptoken=%d", order, v, rev, from+cut)
	}
	results := make([]map[string]any, 0, len(lines))
	for _, l := range lines {
		results = append(results, map[string]any{
			"__metadata": map[string]string{"type": "ErpService.OrderItem"},
			"Pos":        l.Pos, "Material": l.Material, "Qty": l.Qty,
		})
	}
	out["results"] = results
	return out
}

// serveDocLines serves the rest of an order's lines at a nested __next
// under the service root root: m is the match of reDocsItems, v the link's query (the version and
// revision of the lines the order was served with, and where they go on).
func (e *erpSim) serveDocLines(w http.ResponseWriter, root string, m []string, v map[string][]string) {
	get := func(k string) int64 {
		if len(v[k]) == 0 {
			return -1
		}
		n, err := strconv.ParseInt(v[k][0], 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	no, _ := strconv.ParseInt(m[2], 10, 64)
	ver, rev, from := get("v"), get("rev"), get("$skiptoken")
	if ver < 1 || rev < 0 || from < 0 {
		odataError(w, http.StatusBadRequest, "want v, rev and $skiptoken")
		return
	}
	region := strings.ReplaceAll(m[1], "''", "'")
	coll := docLinesV2(erpmock.ContractID(region, no), ver, int(rev), int(from), e.docs.CutLines, root+docOrderPath(region, no))
	body := map[string]any{"results": coll["results"]}
	if next, ok := coll["__next"]; ok {
		body["__next"] = next
	}
	b, _ := json.Marshal(map[string]any{"d": body})
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// docsMetadataV2 is the V2 service's EDMX document: ChangedAt an
// Edm.DateTimeOffset, the period Edm.DateTime, SignedOn an Edm.DateTime
// shown as a date, the decimals Edm.Decimal, No, Serial and Rev
// Edm.Int64, and Items the navigation property to the lines.
var docsMetadataV2 = []byte(`<?xml version="1.0" encoding="utf-8"?>
<edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx" xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" xmlns:sap="http://www.sap.com/Protocols/SAPData">
<edmx:DataServices m:DataServiceVersion="2.0">
<Schema Namespace="ErpService" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">
<EntityType Name="Order"><Key><PropertyRef Name="Region"/><PropertyRef Name="No"/></Key>
<Property Name="Region" Type="Edm.String" MaxLength="64" Nullable="false"/><Property Name="No" Type="Edm.Int64" Nullable="false"/>
<Property Name="Customer" Type="Edm.String"/><Property Name="Plan" Type="Edm.String"/><Property Name="Status" Type="Edm.String"/>
<Property Name="PeriodFrom" Type="Edm.DateTime"/><Property Name="PeriodTo" Type="Edm.DateTime"/>
<Property Name="SignedOn" Type="Edm.DateTime" sap:display-format="Date"/>
<Property Name="Amount" Type="Edm.Decimal" Precision="12" Scale="2"/><Property Name="Balance" Type="Edm.Decimal" Precision="20" Scale="2"/>
<Property Name="Serial" Type="Edm.Int64"/><Property Name="Rev" Type="Edm.Int64"/>
<Property Name="` + docsModified + `" Type="Edm.DateTimeOffset" Precision="7" Nullable="false"/>
<NavigationProperty Name="Items" Relationship="ErpService.Order_Items" FromRole="Order" ToRole="Items"/>
</EntityType>
<EntityType Name="OrderItem"><Key><PropertyRef Name="Region"/><PropertyRef Name="No"/><PropertyRef Name="Pos"/></Key>
<Property Name="Region" Type="Edm.String" Nullable="false"/><Property Name="No" Type="Edm.Int64" Nullable="false"/>
<Property Name="Pos" Type="Edm.Int32" Nullable="false"/><Property Name="Material" Type="Edm.String"/>
<Property Name="Qty" Type="Edm.Decimal" Precision="13" Scale="3"/>
</EntityType>
<Association Name="Order_Items"><End Type="ErpService.Order" Multiplicity="1" Role="Order"/><End Type="ErpService.OrderItem" Multiplicity="*" Role="Items"/></Association>
<EntityContainer Name="EntityContainer" m:IsDefaultEntityContainer="true">
<EntitySet Name="Orders" EntityType="ErpService.Order"/><EntitySet Name="OrderItems" EntityType="ErpService.OrderItem"/>
<AssociationSet Name="Order_Items_Set" Association="ErpService.Order_Items"><End EntitySet="Orders" Role="Order"/><End EntitySet="OrderItems" Role="Items"/></AssociationSet>
</EntityContainer>
</Schema>
</edmx:DataServices>
</edmx:Edmx>
`)
