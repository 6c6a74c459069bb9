package odata_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/odata"
)

// v2Metadata is an SAP Gateway-style EDMX 1.0 document: SalesOrders with
// an Edm.DateTime change stamp, a date, an Edm.Time, a Decimal, an Int64,
// an Edm.DateTimeOffset and lines through an association; Partners keyed
// by an Edm.Guid and an Edm.Int64.
const v2Metadata = `<?xml version="1.0" encoding="utf-8"?>
<edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx" xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" xmlns:sap="http://www.sap.com/Protocols/SAPData">
 <edmx:DataServices m:DataServiceVersion="2.0">
  <Schema Namespace="API_SALES" xml:lang="en" sap:schema-version="1" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">
   <EntityType Name="A_SalesOrderType" sap:label="Sales Order">
    <Key><PropertyRef Name="OrderNo"/></Key>
    <Property Name="OrderNo" Type="Edm.String" Nullable="false" MaxLength="10" sap:label="Sales Order"/>
    <Property Name="OrderDate" Type="Edm.DateTime" Precision="0" sap:display-format="Date"/>
    <Property Name="OrderTime" Type="Edm.Time" Precision="0"/>
    <Property Name="Amount" Type="Edm.Decimal" Precision="16" Scale="3"/>
    <Property Name="Big" Type="Edm.Int64"/>
    <Property Name="Created" Type="Edm.DateTimeOffset" Precision="7"/>
    <Property Name="LastChangeDateTime" Type="Edm.DateTime" Precision="7"/>
    <NavigationProperty Name="Items" Relationship="API_SALES.assoc_Items" FromRole="FromRole_Items" ToRole="ToRole_Items"/>
    <NavigationProperty Name="ToPartner" Relationship="API_SALES.assoc_Partner" FromRole="FromRole_Partner" ToRole="ToRole_Partner"/>
   </EntityType>
   <EntityType Name="A_SalesOrderItemType">
    <Key><PropertyRef Name="OrderNo"/><PropertyRef Name="ItemNo"/></Key>
    <Property Name="OrderNo" Type="Edm.String" Nullable="false" MaxLength="10"/>
    <Property Name="ItemNo" Type="Edm.String" Nullable="false" MaxLength="6"/>
    <Property Name="Quantity" Type="Edm.Decimal" Precision="13" Scale="3"/>
    <Property Name="DeliveryDate" Type="Edm.DateTime" Precision="0" sap:display-format="Date"/>
   </EntityType>
   <EntityType Name="A_PartnerType">
    <Key><PropertyRef Name="Partner"/><PropertyRef Name="Seq"/></Key>
    <Property Name="Partner" Type="Edm.Guid" Nullable="false"/>
    <Property Name="Seq" Type="Edm.Int64" Nullable="false"/>
    <Property Name="ChangedAt" Type="Edm.DateTimeOffset" Precision="7"/>
   </EntityType>
   <Association Name="assoc_Items">
    <End Type="API_SALES.A_SalesOrderType" Multiplicity="1" Role="FromRole_Items"/>
    <End Type="API_SALES.A_SalesOrderItemType" Multiplicity="*" Role="ToRole_Items"/>
   </Association>
   <Association Name="assoc_Partner">
    <End Type="API_SALES.A_SalesOrderType" Multiplicity="1" Role="FromRole_Partner"/>
    <End Type="API_SALES.A_PartnerType" Multiplicity="0..1" Role="ToRole_Partner"/>
   </Association>
   <EntityContainer Name="API_SALES_Entities" m:IsDefaultEntityContainer="true">
    <EntitySet Name="A_SalesOrder" EntityType="API_SALES.A_SalesOrderType" sap:creatable="false"/>
    <EntitySet Name="A_SalesOrderItem" EntityType="API_SALES.A_SalesOrderItemType"/>
    <EntitySet Name="A_Partner" EntityType="API_SALES.A_PartnerType"/>
   </EntityContainer>
  </Schema>
 </edmx:DataServices>
</edmx:Edmx>`

// v2Server serves v2Metadata at /sap/API_SALES/$metadata (404 when
// noMetadata) and V2 JSON of A_SalesOrder and A_Partner: SO1's Items cut
// after two lines with an absolute __next, the rest two at a time; a
// keyset page after the first is empty.
type v2Server struct {
	noMetadata bool
	mu         sync.Mutex
	reqs       []*http.Request
	url        string
}

var v2Lines = []string{
	`{"__metadata":{"type":"API_SALES.A_SalesOrderItemType"},"OrderNo":"SO1","ItemNo":"10","Quantity":"1.500","DeliveryDate":"\/Date(1735689600000)\/"}`,
	`{"__metadata":{"type":"API_SALES.A_SalesOrderItemType"},"OrderNo":"SO1","ItemNo":"20","Quantity":"2.000","DeliveryDate":null}`,
	`{"OrderNo":"SO1","ItemNo":"30","Quantity":"1234567890.125","DeliveryDate":"\/Date(-86400000)\/"}`,
	`{"OrderNo":"SO1","ItemNo":"40","Quantity":"4.000","DeliveryDate":"\/Date(0)\/"}`,
	`{"OrderNo":"SO1","ItemNo":"50","Quantity":"5.000","DeliveryDate":"\/Date(253402214400000)\/"}`,
}

func (f *v2Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.mu.Unlock()
	switch {
	case r.URL.Path == "/sap/API_SALES/$metadata" && !f.noMetadata:
		w.Header().Set("Content-Type", "application/xml")
		w.Header().Set("DataServiceVersion", "2.0")
		fmt.Fprint(w, v2Metadata)
		return
	case strings.HasSuffix(r.URL.Path, "$metadata"):
		http.NotFound(w, r)
		return
	case r.URL.Path == "/sap/API_SALES/A_SalesOrder('SO1')/Items":
		var from int
		fmt.Sscan(r.URL.Query().Get("$skiptoken"), &from)
		fmt.Fprint(w, v2Collection(v2Lines, from, f.url+"/sap/API_SALES/A_SalesOrder('SO1')/Items?sap-client=100&$skiptoken=%d"))
		return
	case strings.Contains(r.URL.Query().Get("$filter"), " gt "):
		fmt.Fprint(w, `{"d":{"results":[]}}`)
		return
	case r.URL.Path == "/sap/API_SALES/A_Partner":
		fmt.Fprint(w, `{"d":{"results":[{"__metadata":{"uri":"x"},"Partner":"0894ef45-7741-1eda-b6b1-2a6d1a1c7a3b","Seq":"9007199254740993","ChangedAt":"\/Date(1735689600000+0060)\/"}]}}`)
		return
	}
	items := v2Collection(v2Lines, 0, f.url+"/sap/API_SALES/A_SalesOrder('SO1')/Items?sap-client=100&$skiptoken=%d")
	items = strings.TrimSuffix(strings.TrimPrefix(items, `{"d":`), "}")
	fmt.Fprintf(w, `{"d":{"__count":"2","results":[
{"__metadata":{"id":"x","uri":"x","type":"API_SALES.A_SalesOrderType"},"OrderNo":"SO1","OrderDate":"\/Date(-315619200000)\/","OrderTime":"PT12H30M15S","Amount":"1234567890123.125","Big":"9007199254740993","Created":"\/Date(1735689600123+0060)\/","LastChangeDateTime":"\/Date(1735787045123)\/","Items":%s,"ToPartner":{"__deferred":{"uri":"x"}}},
{"OrderNo":"SO2","OrderDate":"\/Date(1735689600000)\/","OrderTime":"PT1H","Amount":"-0.001","Big":"-9223372036854775808","Created":"2025-01-01T00:00:00Z","LastChangeDateTime":"2025-01-02T03:04:05.123","Items":{"results":[]},"ToPartner":{"__deferred":{"uri":"x"}}}]}}`, items)
}

// v2Collection writes lines[from:] as a V2 collection of at most two
// lines, with a __next (next, a format of the next offset) when more
// follow.
func v2Collection(lines []string, from int, next string) string {
	to := min(from+2, len(lines))
	link := ""
	if to < len(lines) {
		link = fmt.Sprintf(`,"__next":"`+next+`"`, to)
	}
	return `{"d":{"results":[` + strings.Join(lines[from:to], ",") + `]` + link + `}}`
}

// v2Orders is the sales order entity of v2Server.
func v2Orders(t *testing.T) *entity.Entity {
	t.Helper()
	col := func(name, from, typ string) entity.Column {
		ty, err := entity.ParseType(typ)
		if err != nil {
			t.Fatal(err)
		}
		return entity.Column{Name: name, From: []string{from}, Type: ty, Nullable: !strings.Contains("order_no item_no", name)}
	}
	return &entity.Entity{
		Name: "sales_orders", Sources: []entity.Source{{Name: "A_SalesOrder"}},
		Key: []string{"order_no"}, UpdatedAt: []string{"LastChangeDateTime"},
		Columns: []entity.Column{
			col("order_no", "OrderNo", "string(10)"), col("order_date", "OrderDate", "date"), col("order_time", "OrderTime", "string(8)"),
			col("amount", "Amount", "decimal(16,3)"), col("big", "Big", "int64"), col("created", "Created", "datetime"),
		},
		Children: []*entity.Child{{Name: "items", From: []string{"Items"}, Key: []string{"item_no"}, Columns: []entity.Column{
			col("item_no", "ItemNo", "string(6)"), col("quantity", "Quantity", "decimal(13,3)"), col("delivery", "DeliveryDate", "date"),
		}}},
	}
}

// TestV2Reads reads an SAP Gateway-style V2 service, its version learnt
// from $metadata: /Date(ms)/ values as UTC (dates before 1970 negative, a
// date property a date), Edm.DateTimeOffset with an offset, Edm.Time,
// exact Decimal and Int64 strings, __metadata and __deferred left out,
// expanded lines whose __next is followed to the end with the URL's
// sap-client; the request asks $format=json and V2's $select and
// $expand, and the next keyset page datetime'...' literals.
func TestV2Reads(t *testing.T) {
	f := &v2Server{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	f.url = srv.URL
	e := v2Orders(t)
	s, err := odata.New(odata.Config{URL: srv.URL + "/sap/API_SALES/A_SalesOrder?sap-client=100", Schema: compile(t, e, e.Sources[0]), Version: odata.VersionAuto})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	since := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	p, err := s.Page(ctx, erp.Query{Limit: 10, Since: since})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Records) != 2 || len(p.Invalid) != 0 {
		t.Fatalf("%+v", p)
	}
	got := func(vals []entity.Value, cols []entity.Column) string {
		var out []string
		for i, v := range vals {
			switch {
			case v.Null:
				out = append(out, "NULL")
			case cols[i].Type.Kind == entity.DateTime:
				out = append(out, v.T.UTC().Format(time.RFC3339Nano))
			case cols[i].Type.Kind == entity.Int64:
				out = append(out, fmt.Sprint(v.I))
			default:
				out = append(out, v.S)
			}
		}
		return strings.Join(out, " ")
	}
	for i, want := range []string{
		"SO1 1960-01-01 12:30:15 1234567890123.125 9007199254740993 2025-01-01T00:00:00.123Z",
		"SO2 2025-01-01 01:00:00 -0.001 -9223372036854775808 2025-01-01T00:00:00Z",
	} {
		if g := got(p.Records[i].Vals, e.Columns); g != want {
			t.Errorf("record %d: %q, want %q", i, g, want)
		}
	}
	if u := p.Records[1].UpdatedAt; !u.Equal(time.Date(2025, 1, 2, 3, 4, 5, 123e6, time.UTC)) {
		t.Errorf("SO2's updated_at %v, want 2025-01-02T03:04:05.123Z (an Edm.DateTime is UTC)", u)
	}
	var lines []string
	for _, l := range p.Records[0].Children[0] {
		lines = append(lines, got(l, e.Children[0].Columns))
	}
	if want := "10 1.500 2025-01-01|20 2.000 NULL|30 1234567890.125 1969-12-31|40 4.000 1970-01-01|50 5.000 9999-12-31"; strings.Join(lines, "|") != want {
		t.Errorf("SO1's lines %q, want %q", strings.Join(lines, "|"), want)
	}
	if n := len(p.Records[1].Children[0]); n != 0 {
		t.Errorf("SO2: %d lines, want none", n)
	}

	if _, err := s.Page(ctx, erp.Query{Limit: 10, Since: since, Cursor: p.NextCursor}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	reqs := f.reqs
	f.mu.Unlock()
	var uris []string
	for _, r := range reqs {
		uris = append(uris, r.URL.Path)
		if r.URL.Query().Get("sap-client") != "100" {
			t.Errorf("%s: no sap-client=100", r.URL)
		}
	}
	if want := "/sap/API_SALES/$metadata|/sap/API_SALES/A_SalesOrder|/sap/API_SALES/A_SalesOrder('SO1')/Items|/sap/API_SALES/A_SalesOrder('SO1')/Items|/sap/API_SALES/A_SalesOrder"; strings.Join(uris, "|") != want {
		t.Fatalf("requests %q, want %q", strings.Join(uris, "|"), want)
	}
	first, last := reqs[1].URL.Query(), reqs[4].URL.Query()
	if first.Get("$format") != "json" || first.Get("$expand") != "Items" ||
		first.Get("$select") != "OrderNo,OrderDate,OrderTime,Amount,Big,Created,LastChangeDateTime,Items/ItemNo,Items/Quantity,Items/DeliveryDate" ||
		first.Get("$filter") != "LastChangeDateTime ge datetime'2024-01-01T00:00:00'" || reqs[1].Header.Get("Prefer") != "" {
		t.Errorf("first page %s", reqs[1].URL)
	}
	if want := "LastChangeDateTime ge datetime'2024-01-01T00:00:00' and (LastChangeDateTime gt datetime'2025-01-02T03:04:05.123' or (LastChangeDateTime eq datetime'2025-01-02T03:04:05.123' and OrderNo gt 'SO2'))"; last.Get("$filter") != want {
		t.Errorf("next page $filter %q, want %q", last.Get("$filter"), want)
	}
}

// TestV2KeyLiterals: a composite key of an Edm.Guid and an Edm.Int64 is
// written guid'...' and 123L in the keyset $filter, and an
// Edm.DateTimeOffset change stamp datetimeoffset'...'; the version is
// pinned, $metadata read for the types only.
func TestV2KeyLiterals(t *testing.T) {
	f := &v2Server{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	f.url = srv.URL
	ty := func(s string) entity.Type {
		typ, err := entity.ParseType(s)
		if err != nil {
			t.Fatal(err)
		}
		return typ
	}
	e := &entity.Entity{
		Name: "partners", Sources: []entity.Source{{Name: "A_Partner"}},
		Key: []string{"partner", "seq"}, UpdatedAt: []string{"ChangedAt"},
		Columns: []entity.Column{{Name: "partner", From: []string{"Partner"}, Type: ty("string(36)")}, {Name: "seq", From: []string{"Seq"}, Type: ty("int64")}},
	}
	s, err := odata.New(odata.Config{URL: srv.URL + "/sap/API_SALES/A_Partner", Schema: compile(t, e, e.Sources[0]), Version: odata.Version2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := s.Page(ctx, erp.Query{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Records) != 1 || !p.Records[0].UpdatedAt.Equal(time.UnixMilli(1735689600000)) {
		t.Fatalf("%+v", p)
	}
	if _, err := s.Page(ctx, erp.Query{Limit: 10, Cursor: p.NextCursor}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	last := f.reqs[len(f.reqs)-1].URL.Query().Get("$filter")
	f.mu.Unlock()
	if want := "(ChangedAt gt datetimeoffset'2025-01-01T00:00:00Z' or (ChangedAt eq datetimeoffset'2025-01-01T00:00:00Z' and (Partner gt guid'0894ef45-7741-1eda-b6b1-2a6d1a1c7a3b' or (Partner eq guid'0894ef45-7741-1eda-b6b1-2a6d1a1c7a3b' and Seq gt 9007199254740993L))))"; last != want {
		t.Errorf("$filter %q, want %q", last, want)
	}
}

// TestVersionChosen: auto reads V4 when no path serves $metadata (the
// V4 request, no $format), and a V2 pin reads V2 without it.
func TestVersionChosen(t *testing.T) {
	for _, version := range []string{odata.VersionAuto, odata.Version2} {
		f := &v2Server{noMetadata: true}
		srv := httptest.NewServer(f)
		f.url = srv.URL
		e := v2Orders(t)
		s, err := odata.New(odata.Config{URL: srv.URL + "/sap/API_SALES/A_SalesOrder", Schema: compile(t, e, e.Sources[0]), Version: version,
			HTTP: erp.Config{MaxRetries: 1, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Page(context.Background(), erp.Query{Limit: 10})
		var page url.Values
		f.mu.Lock()
		for _, r := range f.reqs {
			if r.URL.Path == "/sap/API_SALES/A_SalesOrder" {
				page = r.URL.Query()
			}
		}
		f.mu.Unlock()
		switch {
		case version == odata.VersionAuto && (err == nil || page.Get("$format") != "" || page.Get("$expand") != "Items($select=ItemNo,Quantity,DeliveryDate)"):
			t.Errorf("auto without $metadata: %v, %v", err, page)
		case version == odata.Version2 && (err != nil || page.Get("$format") != "json"):
			t.Errorf("v2 without $metadata: %v, %v", err, page)
		}
		srv.Close()
	}
	if _, err := odata.New(odata.Config{URL: "http://127.0.0.1:1/x/S?$top=1"}); err == nil || !strings.Contains(err.Error(), "query option $top") {
		t.Errorf("a $ option in the URL: %v", err)
	}
}
