package odata_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/captest"
	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/odata"
)

// customers is a typed entity with a composite key, a decimal, an int64,
// a date and a version, read from the Customers entity set.
func customers(t *testing.T) *entity.Entity {
	t.Helper()
	col := func(name, from, typ string, nullable bool) entity.Column {
		ty, err := entity.ParseType(typ)
		if err != nil {
			t.Fatal(err)
		}
		return entity.Column{Name: name, From: strings.Split(from, "."), Type: ty, Nullable: nullable}
	}
	return &entity.Entity{
		Name: "customers", Sources: []entity.Source{{Name: "Customers"}},
		Key: []string{"company", "customer"}, UpdatedAt: []string{"LastChangeDateTime"}, Version: []string{"ChangeCounter"},
		Columns: []entity.Column{
			col("company", "CompanyCode", "string(4)", false),
			col("customer", "Customer", "string(10)", false),
			col("name", "CustomerName", "string(80)", false),
			col("credit_limit", "CreditLimit", "decimal(15,2)", true),
			col("blocked", "IsBlocked", "bool", false),
			col("founded_on", "FoundedOn", "date", true),
			col("rating", "Rating", "int64", false),
		},
	}
}

func compile(t *testing.T, e *entity.Entity, src entity.Source) *erp.Schema {
	t.Helper()
	s, err := erp.Compile(e, src)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// typedServer serves two customers, their decimals and int64s as strings
// when the request asks IEEE754Compatible=true and as numbers otherwise,
// and an empty page to a keyset $filter.
type typedServer struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (f *typedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.mu.Unlock()
	if strings.Contains(r.URL.Query().Get("$filter"), " gt ") {
		fmt.Fprint(w, `{"value":[]}`)
		return
	}
	limit, rating := `1234.5`, `9007199254740993`
	if strings.Contains(r.Header.Get("Accept"), "IEEE754Compatible=true") {
		limit, rating = `"1234.50"`, `"9007199254740993"`
	}
	fmt.Fprintf(w, `{"value":[
		{"CompanyCode":"1000","Customer":"C1","CustomerName":"A","CreditLimit":%s,"IsBlocked":false,"FoundedOn":"1999-12-31","Rating":%s,"ChangeCounter":3,"LastChangeDateTime":"2025-01-01T00:00:00.000Z"},
		{"CompanyCode":"1000","Customer":"C2","CustomerName":"B","CreditLimit":null,"IsBlocked":true,"FoundedOn":null,"Rating":-1,"ChangeCounter":"4","LastChangeDateTime":"2025-01-01T00:00:00.000Z"}]}`, limit, rating)
}

// TestTypedQueryAndExactNumbers: the query of a typed entity, and the same
// values whether the server sends decimals and int64s as numbers or
// strings.
func TestTypedQueryAndExactNumbers(t *testing.T) {
	f := &typedServer{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	e := customers(t)
	var got [][]entity.Value
	for _, exact := range []bool{true, false} {
		sch := compile(t, e, e.Sources[0])
		if !exact {
			// Without an int64 or decimal column nothing asks for strings.
			e2 := customers(t)
			e2.Columns = e2.Columns[:3]
			sch = compile(t, e2, e2.Sources[0])
		}
		s, err := odata.New(odata.Config{URL: srv.URL + "/Customers", Schema: sch})
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.Page(context.Background(), erp.Query{Limit: 2, Since: base})
		if err != nil || len(p.Records) != 2 || len(p.Invalid) != 0 || p.NextCursor == "" {
			t.Fatalf("%v %+v", err, p)
		}
		if p.Records[0].ErpID != "1000\x1fC1" || p.Records[0].Version != 3 || p.Records[1].Version != 4 {
			t.Errorf("records %+v", p.Records)
		}
		if exact {
			got = append(got, p.Records[0].Vals, p.Records[1].Vals)
		}
		p, err = s.Page(context.Background(), erp.Query{Limit: 2, Since: base, Cursor: p.NextCursor})
		if err != nil || len(p.Records) != 0 || p.NextCursor != "" {
			t.Fatalf("second page: %v %+v", err, p)
		}
	}
	f.mu.Lock()
	reqs := f.reqs
	f.mu.Unlock()
	first, second := reqs[0], reqs[1]
	if a := first.Header.Get("Accept"); a != "application/json;IEEE754Compatible=true" {
		t.Errorf("Accept %q", a)
	}
	if a := reqs[2].Header.Get("Accept"); a != "application/json" {
		t.Errorf("Accept %q without exact columns", a)
	}
	wantQ := "$select=CompanyCode%2CCustomer%2CCustomerName%2CCreditLimit%2CIsBlocked%2CFoundedOn%2CRating%2CLastChangeDateTime%2CChangeCounter" +
		"&$filter=LastChangeDateTime%20ge%202025-01-01T00%3A00%3A00Z&$orderby=LastChangeDateTime%2CCompanyCode%2CCustomer&$top=2"
	if first.URL.RawQuery != wantQ {
		t.Errorf("query\n%s\nwant\n%s", first.URL.RawQuery, wantQ)
	}
	if f, want := second.URL.Query().Get("$filter"), "LastChangeDateTime ge 2025-01-01T00:00:00Z and (LastChangeDateTime gt 2025-01-01T00:00:00Z or "+
		"(LastChangeDateTime eq 2025-01-01T00:00:00Z and (CompanyCode gt '1000' or (CompanyCode eq '1000' and Customer gt 'C2'))))"; f != want {
		t.Errorf("keyset filter\n%s\nwant\n%s", f, want)
	}

	// The string and number answers give the same values.
	f.mu.Lock()
	f.reqs = nil
	f.mu.Unlock()
	numbers := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Accept", "application/json")
		f.ServeHTTP(w, r)
	}))
	defer numbers.Close()
	s, err := odata.New(odata.Config{URL: numbers.URL + "/Customers", Schema: compile(t, e, e.Sources[0])})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Page(context.Background(), erp.Query{Limit: 2})
	if err != nil || len(p.Records) != 2 {
		t.Fatalf("%v %+v", err, p)
	}
	for i, want := range got {
		for j, v := range p.Records[i].Vals {
			if v != want[j] {
				t.Errorf("record %d column %d: %+v as a number, %+v as a string", i, j, v, want[j])
			}
		}
	}
	if v := p.Records[0].Vals; v[3].S != "1234.50" || v[6].I != 9007199254740993 || v[5].S != "1999-12-31" {
		t.Errorf("values %+v", v)
	}

	if _, err := odata.New(odata.Config{URL: srv.URL + "/Customers", Schema: compile(t, e, e.Sources[0]), Mapping: erp.IdentityMapping()}); err == nil {
		t.Error("a Mapping and a Schema accepted")
	}
	mapped := customers(t)
	mapped.Columns[0].Values = map[string]string{"A": "1000"}
	if _, err := odata.New(odata.Config{URL: srv.URL + "/Customers", Schema: compile(t, mapped, mapped.Sources[0])}); err == nil {
		t.Error("a key column with values accepted")
	}
}

// TestTypedSetKeyAndLiterals: a key column the source sets is not in the
// keyset condition; an int key is written bare.
func TestTypedSetKeyAndLiterals(t *testing.T) {
	var mu sync.Mutex
	var filters []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "$metadata") {
			http.NotFound(w, r) // no document: the constant filters nothing
			return
		}
		mu.Lock()
		filters = append(filters, r.URL.Query().Get("$filter"))
		n := len(filters)
		mu.Unlock()
		if n > 1 {
			fmt.Fprint(w, `{"value":[]}`)
			return
		}
		fmt.Fprint(w, `{"value":[{"No":17,"Name":"x","Modified":"2025-01-01T00:00:00.5Z"}]}`)
	}))
	defer srv.Close()
	e := &entity.Entity{Name: "items", Key: []string{"company", "no"}, UpdatedAt: []string{"Modified"}, Columns: []entity.Column{
		{Name: "company", Type: entity.Type{Kind: entity.String, Length: 8}},
		{Name: "no", From: []string{"No"}, Type: entity.Type{Kind: entity.Int32}},
		{Name: "name", From: []string{"Name"}, Type: entity.Type{Kind: entity.Text}},
	}}
	src := entity.Source{Name: "Items", Set: map[string]string{"company": "CRONUS"}}
	s, err := odata.New(odata.Config{URL: srv.URL + "/Items", Schema: compile(t, e, src)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Page(context.Background(), erp.Query{})
	if err != nil || len(p.Records) != 1 || p.Records[0].ErpID != "CRONUS\x1f17" || p.Records[0].Version != time.Date(2025, 1, 1, 0, 0, 0, 5e8, time.UTC).UnixMicro() {
		t.Fatalf("%v %+v", err, p)
	}
	allSet := entity.Source{Name: "Items", Set: map[string]string{"company": "CRONUS", "no": "1"}}
	if _, err := odata.New(odata.Config{URL: srv.URL + "/Items", Schema: compile(t, e, allSet)}); err == nil {
		t.Error("a key the source sets whole accepted")
	}
	if _, err := s.Page(context.Background(), erp.Query{Cursor: p.NextCursor}); err != nil {
		t.Fatal(err)
	}
	if want := "(Modified gt 2025-01-01T00:00:00.5Z or (Modified eq 2025-01-01T00:00:00.5Z and No gt 17))"; filters[1] != want {
		t.Errorf("filter %q, want %q", filters[1], want)
	}
}

// capProject writes a CAP project serving a Customers entity set beside
// the captest project's own, linking its node_modules.
func capProject(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := captest.ProjectDir()
	for _, f := range []string{"package.json", "server.js", "srv/bearer-auth.js", "srv/erp-service.js", "srv/change-counter.js", "db/schema.cds"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "db/schema.cds" {
			b = append(b, `
entity Customers {
  key CompanyCode    : String(4);
  key Customer       : String(10);
  CustomerName       : String(80) not null;
  CreditLimit        : Decimal(15,2);
  IsBlocked          : Boolean not null;
  FoundedOn          : Date;
  Rating             : Int64 not null;
  ChangeCounter      : Integer not null;
  LastChangeDateTime : Timestamp not null;
}
`...)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	service := `using erp from '../db/schema';
@path    : 'erp'
@requires: 'authenticated-user'
service ErpService {
  entity Memberships          as projection on erp.Memberships;
  entity VersionedMemberships as projection on erp.VersionedMemberships;
  entity Customers            as projection on erp.Customers;
}
`
	if err := os.WriteFile(filepath.Join(dir, "srv", "erp-service.cds"), []byte(service), 0o644); err != nil {
		t.Fatal(err)
	}
	// node_modules is a directory of links, not a link: captest copies the
	// project with filepath.WalkDir, whose SkipDir on a link to a
	// directory would skip the rest of the project's root.
	modules, err := os.ReadDir(filepath.Join(src, "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "node_modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, m := range modules {
		if err := os.Symlink(filepath.Join(src, "node_modules", m.Name()), filepath.Join(dir, "node_modules", m.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestTypedAgainstCAP pages a typed entity with a composite key out of
// SAP CAP: ties of LastChangeDateTime across both key properties, pages
// capped below $top, decimals and int64s as CAP sends them (numbers).
func TestTypedAgainstCAP(t *testing.T) {
	srv := captest.Start(t, captest.Options{Project: capProject(t), PageLimit: 3})
	ctx := context.Background()
	type row struct {
		CompanyCode, Customer, CustomerName string
		CreditLimit                         *string
		IsBlocked                           bool
		FoundedOn                           *string
		Rating                              string
		ChangeCounter                       int
		LastChangeDateTime                  string
	}
	var want []row
	for i := range 14 {
		limit, founded := fmt.Sprintf("%d.%d0", 100+i, i%10), "2001-02-03"
		r := row{CompanyCode: []string{"2000", "1000"}[i%2], Customer: fmt.Sprintf("C%02d", 20-i), CustomerName: fmt.Sprintf("Kunde %d ü", i),
			CreditLimit: &limit, IsBlocked: i%3 == 0, FoundedOn: &founded, Rating: fmt.Sprint(int64(i) * 1e12), ChangeCounter: i + 1,
			LastChangeDateTime: fmt.Sprintf("2025-01-01T00:00:0%d.000Z", i/5)}
		if i == 4 {
			r.CreditLimit, r.FoundedOn = nil, nil
		}
		b, _ := json.Marshal(r)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.ServiceURL+"Customers", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("POST %s: %s\n%s", b, res.Status, srv.Logs())
		}
		want = append(want, r)
	}
	e := customers(t)
	s, err := odata.New(odata.Config{URL: srv.ServiceURL + "Customers", Schema: compile(t, e, e.Sources[0])})
	if err != nil {
		t.Fatal(err)
	}
	var recs []erp.Record
	q := erp.Query{Limit: 4}
	for pages := 0; ; pages++ {
		p, err := s.Page(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Invalid) > 0 {
			t.Fatalf("invalid: %+v", p.Invalid)
		}
		recs = append(recs, p.Records...)
		if p.NextCursor == "" {
			break
		}
		q.Cursor = p.NextCursor
		if pages > 50 {
			t.Fatal("no end")
		}
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	byKey := map[string]row{}
	for _, r := range want {
		byKey[r.CompanyCode+"\x1f"+r.Customer] = r
	}
	for i, rec := range recs {
		if i > 0 && (rec.UpdatedAt.Before(recs[i-1].UpdatedAt) || rec.UpdatedAt.Equal(recs[i-1].UpdatedAt) && rec.ErpID <= recs[i-1].ErpID) {
			t.Fatalf("out of (updated_at, key) order at %d: %q after %q", i, rec.ErpID, recs[i-1].ErpID)
		}
		w, ok := byKey[rec.ErpID]
		if !ok {
			t.Fatalf("unknown key %q", rec.ErpID)
		}
		delete(byKey, rec.ErpID)
		v := rec.Vals
		limit := entity.Value{Null: true}
		if w.CreditLimit != nil {
			limit = entity.Value{S: *w.CreditLimit}
		}
		if v[2].S != w.CustomerName || v[3] != limit || (v[4].I == 1) != w.IsBlocked || v[5].Null != (w.FoundedOn == nil) ||
			fmt.Sprint(v[6].I) != w.Rating || rec.Version != int64(w.ChangeCounter) {
			t.Errorf("%q: %+v, want %+v", rec.ErpID, v, w)
		}
	}
}

// TestTypedSetFiltersAServedProperty: a source's constant whose column's
// property the entity set serves ($metadata) filters the source, so that
// one entity set read as one source per company gives each source its own
// company's records; the count is filtered alike.
func TestTypedSetFiltersAServedProperty(t *testing.T) {
	var mu sync.Mutex
	var filters []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "$metadata") {
			fmt.Fprint(w, `<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0"><edmx:DataServices>
<Schema xmlns="http://docs.oasis-open.org/odata/ns/edm" Namespace="S"><EntityType Name="Customer"><Key><PropertyRef Name="CompanyCode"/><PropertyRef Name="Customer"/></Key>
<Property Name="CompanyCode" Type="Edm.String"/><Property Name="Customer" Type="Edm.String"/><Property Name="Modified" Type="Edm.DateTimeOffset"/></EntityType>
<EntityContainer Name="C"><EntitySet Name="Customers" EntityType="S.Customer"/></EntityContainer></Schema></edmx:DataServices></edmx:Edmx>`)
			return
		}
		mu.Lock()
		filters = append(filters, r.URL.Query().Get("$filter"))
		mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "$count") {
			fmt.Fprint(w, "1")
			return
		}
		fmt.Fprint(w, `{"value":[{"CompanyCode":"2000","Customer":"C1","Modified":"2025-01-01T00:00:00Z"}]}`)
	}))
	defer srv.Close()
	e := &entity.Entity{Name: "customers", Key: []string{"company", "customer"}, UpdatedAt: []string{"Modified"}, Columns: []entity.Column{
		{Name: "company", From: []string{"CompanyCode"}, Type: entity.Type{Kind: entity.String, Length: 4}},
		{Name: "customer", From: []string{"Customer"}, Type: entity.Type{Kind: entity.String, Length: 10}},
	}}
	src := entity.Source{Name: "Customers", Set: map[string]string{"company": "2000"}}
	s, err := odata.New(odata.Config{URL: srv.URL + "/Customers", Schema: compile(t, e, src)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Page(context.Background(), erp.Query{})
	if err != nil || len(p.Records) != 1 || p.Records[0].ErpID != "2000\x1fC1" {
		t.Fatalf("%v %+v", err, p)
	}
	if _, err := s.Count(context.Background(), time.Time{}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range filters {
		if f != "CompanyCode eq '2000'" {
			t.Errorf("filter %q, want CompanyCode eq '2000'", f)
		}
	}
	if len(filters) != 2 {
		t.Errorf("%d requests, want a page and a count", len(filters))
	}
}
