package discover_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/erpsync/erpsync/internal/discover"
	"github.com/erpsync/erpsync/internal/entity"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata")

// file is the structure of a config file that discover writes: decoding
// with KnownFields refuses any other key.
type file struct {
	ERP struct {
		Kind string `yaml:"kind"`
		URL  string `yaml:"url"`
	} `yaml:"erp"`
	Entities []struct {
		Name      string   `yaml:"name"`
		Table     string   `yaml:"table"`
		Source    string   `yaml:"source"`
		Key       []string `yaml:"key"`
		UpdatedAt string   `yaml:"updated_at"`
		Version   string   `yaml:"version"`
		Columns   []column `yaml:"columns"`
		Children  []struct {
			Name    string   `yaml:"name"`
			Table   string   `yaml:"table"`
			From    string   `yaml:"from"`
			Key     []string `yaml:"key"`
			Columns []column `yaml:"columns"`
		} `yaml:"children"`
	} `yaml:"entities"`
}

type column struct {
	Name     string `yaml:"name"`
	From     string `yaml:"from"`
	Type     string `yaml:"type"`
	Nullable bool   `yaml:"nullable"`
}

var name = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// check decodes out and checks what the config file format asks of it:
// names, types, keys that are columns, no reserved name, no secret.
func check(t testing.TB, out []byte) file {
	t.Helper()
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(out))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("output is not a config file: %v\n%s", err, out)
	}
	if f.ERP.Kind != "odata" || f.ERP.URL == "" {
		t.Fatalf("erp = %+v, want kind odata and a url", f.ERP)
	}
	// The loader takes it as it is: children and all.
	if _, err := entity.Parse("discovered.yaml", out); err != nil {
		t.Fatalf("the loader refuses the output: %v\n%s", err, out)
	}
	tables := map[string]bool{}
	for _, e := range f.Entities {
		if !name.MatchString(e.Name) || e.Table != e.Name || e.Source == "" || e.UpdatedAt == "" || len(e.Key) == 0 {
			t.Fatalf("entity %+v: want a name, its table, a source, a key and updated_at", e)
		}
		if tables[e.Table] || slices.Contains(entity.OwnTables, e.Table) {
			t.Fatalf("table %s taken twice or erpsync's own", e.Table)
		}
		tables[e.Table] = true
		cols := map[string]bool{}
		for _, c := range e.Columns {
			if !name.MatchString(c.Name) || cols[c.Name] || slices.Contains(entity.Reserved, c.Name) {
				t.Fatalf("%s: column %q: not a name, taken twice or reserved", e.Name, c.Name)
			}
			cols[c.Name] = true
			if _, err := entity.ParseType(c.Type); err != nil {
				t.Fatalf("%s.%s: %v", e.Name, c.Name, err)
			}
			if c.From == "" || c.From == e.UpdatedAt || c.From == e.Version {
				t.Fatalf("%s.%s: from %q: empty, or the updated_at or version property", e.Name, c.Name, c.From)
			}
		}
		for _, k := range e.Key {
			if !cols[k] {
				t.Fatalf("%s: key %s is not a column", e.Name, k)
			}
		}
		for _, c := range e.Columns {
			typ, _ := entity.ParseType(c.Type)
			if slices.Contains(e.Key, c.Name) && (c.Nullable || typ.Kind == entity.Text || typ.Kind == entity.JSON || typ.Kind == entity.DateTime) {
				t.Fatalf("%s: key column %s is %s (nullable %v): not a key type", e.Name, c.Name, c.Type, c.Nullable)
			}
		}
	}
	return f
}

// golden compares out with testdata/name, or writes it with -update.
func golden(t *testing.T, name string, out []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if !bytes.Equal(out, want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n%s", path, out)
	}
}

func config(t *testing.T, fixture, url string) (file, []byte) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("testdata", fixture))
	if err != nil {
		t.Fatal(err)
	}
	out, err := discover.Config(doc, discover.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	return check(t, out), out
}

// TestS4 reads an S/4HANA-style service: A_BusinessPartner's cursor is
// LastChangeDateTime (LastChangeDate is a day), the decimals keep their
// precision and scale, the address set has no change time.
func TestS4(t *testing.T) {
	f, out := config(t, "s4-business-partner.xml", "https://s4.example.com/sap/opu/odata4/sap/api_business_partner/srvd_a2x/sap/businesspartner/0001/?sap-client=100")
	golden(t, "s4-business-partner.yaml", out)
	if f.ERP.URL != "https://s4.example.com/sap/opu/odata4/sap/api_business_partner/srvd_a2x/sap/businesspartner/0001/" {
		t.Errorf("url = %s, want the service root without its query", f.ERP.URL)
	}
	if len(f.Entities) != 2 || f.Entities[0].Name != "a_business_partner" || f.Entities[1].Name != "a_customer_company" {
		t.Fatalf("entities = %+v, want a_business_partner and a_customer_company (the addresses have no change time)", f.Entities)
	}
	bp, cc := f.Entities[0], f.Entities[1]
	if bp.UpdatedAt != "LastChangeDateTime" || bp.Version != "" || !slices.Equal(bp.Key, []string{"business_partner"}) {
		t.Errorf("a_business_partner = %+v", bp)
	}
	if cc.UpdatedAt != "ChangedOn" || !slices.Equal(cc.Key, []string{"customer", "company_code"}) {
		t.Errorf("a_customer_company = %+v", cc)
	}
	types := map[string]string{}
	for _, c := range cc.Columns {
		types[c.Name] = c.Type
	}
	for col, want := range map[string]string{"credit_limit_amount": "decimal(15,2)", "cash_discount_rate": "decimal(5,3)", "dunning_level": "int32", "accounting_clerk_number_of_documents": "int64", "exchange_rate": "json", "company_code": "string(4)"} {
		if types[col] != want {
			t.Errorf("a_customer_company.%s: type %q, want %q", col, types[col], want)
		}
	}
	if !bytes.Contains(out, []byte("# A_BusinessPartnerAddress: not synced as it is: no change timestamp")) {
		t.Errorf("A_BusinessPartnerAddress is not commented out with its reason:\n%s", out)
	}
}

// TestBusinessCentral reads a Business Central-style service: customers
// keyed by a Guid, lastModifiedDateTime the cursor (also its etag), no
// integer version.
func TestBusinessCentral(t *testing.T) {
	f, out := config(t, "bc-customers.xml", "https://erpsync:s3cr3t-pw@api.businesscentral.dynamics.com/v2.0/tenant/Production/api/v2.0/")
	golden(t, "bc-customers.yaml", out)
	if bytes.Contains(out, []byte("s3cr3t-pw")) || bytes.Contains(out, []byte("erpsync:")) {
		t.Fatalf("the output holds the URL's credentials:\n%s", out)
	}
	if len(f.Entities) != 1 {
		t.Fatalf("entities = %+v, want customers alone (companies have no change time)", f.Entities)
	}
	c := f.Entities[0]
	if c.Name != "customers" || c.UpdatedAt != "lastModifiedDateTime" || c.Version != "" || !slices.Equal(c.Key, []string{"id"}) {
		t.Errorf("customers = %+v", c)
	}
	types := map[string]string{}
	for _, col := range c.Columns {
		types[col.Name] = col.Type
	}
	for col, want := range map[string]string{"id": "string(36)", "type": "string(7)", "blocked": "string(7)", "balance": "decimal(38,10)", "credit_limit": "decimal(38,10)", "tax_liable": "bool", "display_name": "string(100)"} {
		if types[col] != want {
			t.Errorf("customers.%s: type %q, want %q", col, types[col], want)
		}
	}
	if _, ok := types["picture"]; ok || !bytes.Contains(out, []byte("# picture: not synced: type Edm.Stream")) {
		t.Errorf("picture (Edm.Stream) is not left out with its reason:\n%s", out)
	}
}

// TestNames renames what would take erpsync's own names, and writes a
// complex type's properties as dotted paths.
func TestNames(t *testing.T) {
	const doc = `<edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx"><edmx:DataServices>
<Schema Namespace="s" xmlns="http://docs.oasis-open.org/odata/ns/edm">
 <ComplexType Name="Address"><Property Name="City" Type="Edm.String" MaxLength="40"/><Property Name="Street" Type="Edm.String"/></ComplexType>
 <EntityType Name="T"><Key><PropertyRef Name="ID"/></Key>
  <Property Name="ID" Type="Edm.String" Nullable="false"/>
  <Property Name="createdAt" Type="Edm.DateTimeOffset"/>
  <Property Name="created_at" Type="Edm.String" MaxLength="3"/>
  <Property Name="Address" Type="s.Address"/>
  <Property Name="version" Type="Edm.Int64" Nullable="false"/>
  <Property Name="LastChangedAt" Type="Edm.DateTimeOffset" Nullable="false"/>
 </EntityType>
 <EntityContainer Name="C"><EntitySet Name="sync_runs" EntityType="s.T"/><EntitySet Name="SyncRuns" EntityType="s.T"/></EntityContainer>
</Schema></edmx:DataServices></edmx:Edmx>`
	out, err := discover.Config([]byte(doc), discover.Options{URL: "http://127.0.0.1:4004/odata/v4/x/"})
	if err != nil {
		t.Fatal(err)
	}
	f := check(t, out)
	golden(t, "names.yaml", out)
	if len(f.Entities) != 2 || f.Entities[0].Table != "sync_runs_erp" || f.Entities[1].Table != "sync_runs_erp_2" {
		t.Fatalf("tables = %+v, want sync_runs_erp and sync_runs_erp_2", f.Entities)
	}
	e := f.Entities[0]
	var got []string
	for _, c := range e.Columns {
		got = append(got, c.Name+"="+c.From+":"+c.Type)
	}
	want := []string{"id=ID:string(255)", "created_at_erp=createdAt:datetime", "created_at_erp_2=created_at:string(3)", "address_city=Address.City:string(40)", "address_street=Address.Street:text"}
	if !slices.Equal(got, want) || e.UpdatedAt != "LastChangedAt" || e.Version != "version" {
		t.Errorf("columns %v, updated_at %s, version %s; want %v, LastChangedAt, version", got, e.UpdatedAt, e.Version, want)
	}
}

// childrenDoc has an order type with five navigation properties: lines it
// contains, notes without an entity set of their own (keyed by the order's
// key alone), deliveries deleted with the order (keyed by the order's key
// and their own), a customer (one entity), and invoices with an entity set
// of their own.
const childrenDoc = `<edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx"><edmx:DataServices>
<Schema Namespace="s" xmlns="http://docs.oasis-open.org/odata/ns/edm">
 <EntityType Name="Order"><Key><PropertyRef Name="OrderID"/></Key>
  <Property Name="OrderID" Type="Edm.String" MaxLength="10" Nullable="false"/>
  <Property Name="ChangedAt" Type="Edm.DateTimeOffset" Nullable="false"/>
  <NavigationProperty Name="Lines" Type="Collection(s.Line)" ContainsTarget="true"/>
  <NavigationProperty Name="Notes" Type="Collection(s.Note)" Partner="order"/>
  <NavigationProperty Name="Deliveries" Type="Collection(s.Delivery)" Partner="order"><OnDelete Action="Cascade"/></NavigationProperty>
  <NavigationProperty Name="Customer" Type="s.Customer" ContainsTarget="true"/>
  <NavigationProperty Name="Invoices" Type="Collection(s.Invoice)"/>
 </EntityType>
 <EntityType Name="Line"><Key><PropertyRef Name="LineNo"/></Key>
  <Property Name="LineNo" Type="Edm.Int32" Nullable="false"/>
  <Property Name="OrderID" Type="Edm.String" MaxLength="10"/>
  <Property Name="Quantity" Type="Edm.Decimal" Precision="13" Scale="3"/>
 </EntityType>
 <EntityType Name="Note"><Key><PropertyRef Name="order_OrderID"/></Key>
  <Property Name="order_OrderID" Type="Edm.String" MaxLength="10" Nullable="false"/>
  <Property Name="Text" Type="Edm.String"/>
  <NavigationProperty Name="order" Type="s.Order" Partner="Notes"><ReferentialConstraint Property="order_OrderID" ReferencedProperty="OrderID"/></NavigationProperty>
 </EntityType>
 <EntityType Name="Delivery"><Key><PropertyRef Name="order_OrderID"/><PropertyRef Name="DeliveryNo"/></Key>
  <Property Name="order_OrderID" Type="Edm.String" MaxLength="10" Nullable="false"/>
  <Property Name="DeliveryNo" Type="Edm.String" MaxLength="8" Nullable="false"/>
  <Property Name="ShippedOn" Type="Edm.Date"/>
  <NavigationProperty Name="order" Type="s.Order" Partner="Deliveries"><ReferentialConstraint Property="order_OrderID" ReferencedProperty="OrderID"/></NavigationProperty>
 </EntityType>
 <EntityType Name="Customer"><Key><PropertyRef Name="ID"/></Key><Property Name="ID" Type="Edm.Int32" Nullable="false"/></EntityType>
 <EntityType Name="Invoice"><Key><PropertyRef Name="ID"/></Key><Property Name="ID" Type="Edm.Int32" Nullable="false"/></EntityType>
 <EntityContainer Name="C"><EntitySet Name="Orders" EntityType="s.Order"/><EntitySet Name="Invoices" EntityType="s.Invoice"/><EntitySet Name="Deliveries" EntityType="s.Delivery"/></EntityContainer>
</Schema></edmx:DataServices></edmx:Edmx>`

// TestChildren writes a composition's lines as a child: contained lines
// (their OrderID renamed, the parent's key column), deliveries without the
// order's key their constraint names; and explains the navigation
// properties it leaves out.
func TestChildren(t *testing.T) {
	out, err := discover.Config([]byte(childrenDoc), discover.Options{URL: "http://127.0.0.1:4004/odata/v4/x/"})
	if err != nil {
		t.Fatal(err)
	}
	f := check(t, out)
	golden(t, "children.yaml", out)
	var got []string
	for _, c := range f.Entities[0].Children {
		var cols []string
		for _, col := range c.Columns {
			cols = append(cols, col.Name+"="+col.From)
		}
		got = append(got, fmt.Sprintf("%s %s %s %v %v", c.Name, c.Table, c.From, c.Key, cols))
	}
	want := []string{
		"lines orders_lines Lines [line_no] [line_no=LineNo order_id_2=OrderID quantity=Quantity]",
		"deliveries orders_deliveries Deliveries [delivery_no] [delivery_no=DeliveryNo shipped_on=ShippedOn]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("children\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, want := range []string{
		"# Notes: a navigation property (to Collection(s.Note)), not synced: a composition, but its lines have no key of their own",
		"# Customer: a navigation property (to s.Customer), not synced: a composition, but a single entity, not a collection of lines",
		"# Invoices: a navigation property (to Collection(s.Invoice)), not synced: not a composition",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

func TestNoDocument(t *testing.T) {
	for _, doc := range []string{"", "{}", "<html><body>login</body></html>", `<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx"><edmx:DataServices/></edmx:Edmx>`} {
		if _, err := discover.Config([]byte(doc), discover.Options{URL: "http://h/"}); !errors.Is(err, discover.ErrNoDocument) {
			t.Errorf("%q: err = %v, want ErrNoDocument", doc, err)
		}
	}
	empty := `<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx"><edmx:DataServices><Schema Namespace="s"/></edmx:DataServices></edmx:Edmx>`
	if _, err := discover.Config([]byte(empty), discover.Options{URL: "http://h/"}); !errors.Is(err, discover.ErrNoEntitySets) {
		t.Errorf("err = %v, want ErrNoEntitySets", err)
	}
	none := `<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx"><edmx:DataServices><Schema Namespace="s">
<EntityType Name="T"><Key><PropertyRef Name="ID"/></Key><Property Name="ID" Type="Edm.Guid" Nullable="false"/><Property Name="LastChangeDate" Type="Edm.Date"/></EntityType>
<EntityContainer Name="C"><EntitySet Name="Things" EntityType="s.T"/></EntityContainer></Schema></edmx:DataServices></edmx:Edmx>`
	if _, err := discover.Config([]byte(none), discover.Options{URL: "http://h/"}); !errors.Is(err, discover.ErrNothingToSync) || !strings.Contains(err.Error(), "Things: no change timestamp") || !strings.Contains(err.Error(), "LastChangeDate is an Edm.Date") {
		t.Errorf("no set with a change time: err = %v, want ErrNothingToSync naming Things and its LastChangeDate", err)
	}
	if _, err := discover.Config([]byte(empty), discover.Options{}); err == nil || !strings.Contains(err.Error(), "URL") {
		t.Errorf("no URL: err = %v, want one naming the URL", err)
	}
}

// FuzzConfig: any document either fails or gives a config file of the
// expected structure; never a panic.
func FuzzConfig(f *testing.F) {
	for _, name := range []string{"s4-business-partner.xml", "bc-customers.xml", "s4-api-business-partner-v2.xml", "s4-api-sales-order-v2.xml"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(childrenDoc))
	f.Add([]byte(`<Edmx><DataServices><Schema Namespace="n"><EntityType Name="t"><Key><PropertyRef Name="true"/></Key><Property Name="true" Type="Edm.String" MaxLength="4"/><Property Name="modified" Type="Edm.DateTimeOffset"/></EntityType><EntityContainer Name="c"><EntitySet Name="null" EntityType="n.t"/></EntityContainer></Schema></DataServices></Edmx>`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		out, err := discover.Config(doc, discover.Options{URL: "http://127.0.0.1:4004/odata/v4/sales/"})
		if err != nil {
			return
		}
		check(t, out)
	})
}

// TestS4V2 reads S/4HANA-style OData V2 services (EDMX 1.0 with SAP's
// annotations): Edm.DateTime of sap:display-format "Date" a date,
// LastChangeDateTime the cursor, sap:label the columns' comments, a
// property sap:filterable="false" no cursor (A_Customer), and the lines
// of associations of multiplicity * children, the parent's key left out
// by the referential constraint (to_BusinessPartnerAddress, to_Partner)
// or, without one, by the lines' key that holds it (to_Item).
func TestS4V2(t *testing.T) {
	f, out := config(t, "s4-api-business-partner-v2.xml", "https://s4.example.com/sap/opu/odata/sap/API_BUSINESS_PARTNER/")
	golden(t, "s4-api-business-partner-v2.yaml", out)
	if len(f.Entities) != 1 || f.Entities[0].Name != "a_business_partner" || f.Entities[0].UpdatedAt != "LastChangeDateTime" {
		t.Fatalf("entities = %+v, want a_business_partner alone (A_Customer's LastChangeDateTime is not filterable)", f.Entities)
	}
	bp := f.Entities[0]
	types := map[string]string{}
	for _, c := range bp.Columns {
		types[c.Name] = c.Type
	}
	for col, want := range map[string]string{"birth_date": "date", "business_partner_uuid": "string(36)", "business_partner_is_blocked": "bool"} {
		if types[col] != want {
			t.Errorf("a_business_partner.%s: type %q, want %q", col, types[col], want)
		}
	}
	if len(bp.Children) != 1 || bp.Children[0].From != "to_BusinessPartnerAddress" || !slices.Equal(bp.Children[0].Key, []string{"address_id"}) {
		t.Errorf("children %+v, want the addresses keyed by address_id", bp.Children)
	}
	for _, want := range []string{"# A_Customer: not synced as it is: no change timestamp", "Date of Birth"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}

	f, out = config(t, "s4-api-sales-order-v2.xml", "https://s4.example.com/sap/opu/odata/sap/API_SALES_ORDER_SRV/")
	golden(t, "s4-api-sales-order-v2.yaml", out)
	if len(f.Entities) != 1 || f.Entities[0].Name != "a_sales_order" {
		t.Fatalf("entities = %+v, want a_sales_order", f.Entities)
	}
	so := f.Entities[0]
	var children []string
	for _, c := range so.Children {
		children = append(children, c.From+" "+strings.Join(c.Key, ","))
	}
	if so.UpdatedAt != "LastChangeDateTime" || strings.Join(children, "; ") != "to_Item sales_order_item; to_Partner partner_function" {
		t.Errorf("a_sales_order: updated_at %s, children %q", so.UpdatedAt, children)
	}
}
