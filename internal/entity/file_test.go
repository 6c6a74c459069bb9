package entity_test

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
)

// examples are the config files the project ships.
func examples(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	return files
}

// withoutLines returns a copy of e with every Line zero.
func withoutLines(e *entity.Entity) *entity.Entity {
	c := *e
	c.Line = 0
	c.Sources = append([]entity.Source(nil), e.Sources...)
	for i := range c.Sources {
		c.Sources[i].Line = 0
	}
	c.Columns = append([]entity.Column(nil), e.Columns...)
	for i := range c.Columns {
		c.Columns[i].Line = 0
	}
	return &c
}

func TestExamplesLoad(t *testing.T) {
	for _, path := range examples(t) {
		f, err := entity.Load(path)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if f.Path != path || len(f.Entities) == 0 {
			t.Errorf("%s: path %q, %d entities", path, f.Path, len(f.Entities))
		}
	}
}

func TestMembershipsExampleIsTheBuiltIn(t *testing.T) {
	f, err := entity.Load("../../examples/memberships.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Entities) != 1 {
		t.Fatalf("%d entities, want 1", len(f.Entities))
	}
	if got, want := withoutLines(f.Entities[0]), entity.Memberships(); !reflect.DeepEqual(got, want) {
		t.Errorf("examples/memberships.yaml:\n got %+v\nwant %+v", got, want)
	}
	if f.ERP.Kind != entity.KindREST || f.ERP.URL != "http://127.0.0.1:8090" {
		t.Errorf("erp %+v", f.ERP)
	}
}

func TestCustomersExample(t *testing.T) {
	f, err := entity.Load("../../examples/customers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e := f.Entity("customers")
	if e == nil {
		t.Fatal("no entity customers")
	}
	want := []entity.Source{{Name: "Customers", Set: map[string]string{"company": "1000"}}, {Name: "Customers", Set: map[string]string{"company": "2000"}}}
	if got := withoutLines(e).Sources; !reflect.DeepEqual(got, want) {
		t.Errorf("sources %+v, want %+v", got, want)
	}
	if e.Table != "customers" || !reflect.DeepEqual(e.Key, []string{"company", "customer"}) || e.Every != 5*time.Minute {
		t.Errorf("table %q, key %v, every %v", e.Table, e.Key, e.Every)
	}
	if c := e.Column("credit_limit"); c == nil || c.Type != (entity.Type{Kind: entity.Decimal, Precision: 15, Scale: 2}) || !c.Nullable {
		t.Errorf("credit_limit %+v", c)
	}
	if c := e.Column("city"); c == nil || !reflect.DeepEqual(c.From, []string{"Address", "City"}) {
		t.Errorf("city %+v", c)
	}
	if c := e.Column("status"); c == nil || c.Values["B"] != "BLOCKED" {
		t.Errorf("status %+v", c)
	}
	if f.ERP.Kind != entity.KindOData || f.ERP.Username != "erpsync" || f.ERP.PasswordFile == "" {
		t.Errorf("erp %+v", f.ERP)
	}
}

func TestRESTInvoicesExample(t *testing.T) {
	f, err := entity.Load("../../examples/rest-invoices.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e := f.Entity("invoices")
	want := &entity.RESTShape{Path: "/v2/invoices/changes", HasCountPath: true, RecordsPath: "result.items", CursorPath: "result.next",
		Paging: "cursor", Params: "since=changedAfter,until=changedBefore,cursor=page_token,limit=page_size"}
	if e == nil || e.REST == nil {
		t.Fatal("no rest shape")
	}
	got := *e.REST
	got.Line = 0
	if !reflect.DeepEqual(&got, want) {
		t.Errorf("rest\n got %+v\nwant %+v", &got, want)
	}
	if e.Version != nil || e.Cron != "*/10 * * * *" || !e.Events || f.Events == nil || f.Events.Sink != entity.SinkWebhook {
		t.Errorf("version %v, cron %q, events %v %+v", e.Version, e.Cron, e.Events, f.Events)
	}
	if len(e.Children) != 1 || e.Children[0].Table != "invoice_lines" || len(e.Children[0].Columns) != 3 {
		t.Errorf("children %+v", e.Children)
	}
	if c := e.Column("paid"); c == nil || !reflect.DeepEqual(c.From, []string{"paid"}) {
		t.Errorf("paid: from %+v, want its own name", c)
	}
}

func TestDefaults(t *testing.T) {
	f, err := entity.Parse("x.yaml", []byte(`
entities:
  - name: orders
    source: Orders
    key: id
    updated_at: changed
    columns:
      - {name: id, type: int64}
`))
	if err != nil {
		t.Fatal(err)
	}
	e := f.Entities[0]
	if e.Table != "orders" || !reflect.DeepEqual(e.Columns[0].From, []string{"id"}) || !reflect.DeepEqual(e.Key, []string{"id"}) || e.Version != nil {
		t.Errorf("defaults not filled: %+v", e)
	}
	if e.Line != 3 || e.Columns[0].Line != 8 || e.Sources[0].Line != 4 {
		t.Errorf("lines: entity %d, column %d, source %d", e.Line, e.Columns[0].Line, e.Sources[0].Line)
	}
}

func TestDocumentMarkers(t *testing.T) {
	for _, s := range []string{"---\n" + good, good + "...\n", good + "---\n"} {
		if _, err := entity.Parse("c.yaml", []byte(s)); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.yaml")
	_, err := entity.Load(path)
	var fe *entity.FileError
	if !errors.As(err, &fe) || fe.Path != path || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("err %v", err)
	}
}

func TestFileErrorFormat(t *testing.T) {
	err := &entity.FileError{Path: "a.yaml", Line: 7, Msg: "unknown key"}
	if err.Error() != "a.yaml:7: unknown key" {
		t.Errorf("%q", err.Error())
	}
}

// TestDatabaseBlock: the database block's kind (mysql when not given),
// DSN or DSN file, and the lines a command names when the DSN is of the
// wrong form; a file without the block has none.
func TestDatabaseBlock(t *testing.T) {
	for _, c := range []struct {
		name, block string
		want        *entity.Database
	}{
		{"none", "", nil},
		{"postgres dsn", "database:\n  kind: postgres\n  dsn: postgres://app@db:5432/erp?sslmode=verify-full\n",
			&entity.Database{Kind: entity.DatabasePostgres, DSN: "postgres://app@db:5432/erp?sslmode=verify-full", Line: 2, DSNLine: 3}},
		{"mysql by default", "# the database\ndatabase:\n  dsn_file: /run/secrets/erpsync-dsn\n",
			&entity.Database{Kind: entity.DatabaseMySQL, DSNFile: "/run/secrets/erpsync-dsn", Line: 3, DSNLine: 3}},
		{"flow map", "database: {kind: mysql, dsn: \"app:pw@tcp(db:3306)/erp\"}\n",
			&entity.Database{Kind: entity.DatabaseMySQL, DSN: "app:pw@tcp(db:3306)/erp", Line: 1, DSNLine: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := entity.Parse("c.yaml", []byte(c.block+good))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.Database, c.want) {
				t.Errorf("database %+v, want %+v", f.Database, c.want)
			}
		})
	}
}
