package erp

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/entity"
)

// salesOrders is a document entity: a header with one child, items, whose
// lines have an int key, a decimal, a nested property, a values map, a
// pattern and a not_before rule.
func salesOrders(t testing.TB) *entity.Entity {
	t.Helper()
	typ := func(s string) entity.Type { return parseType(t, s) }
	return &entity.Entity{
		Name:      "sales_orders",
		Key:       []string{"order_no"},
		UpdatedAt: []string{"ChangedAt"},
		Columns: []entity.Column{
			{Name: "order_no", From: []string{"OrderNo"}, Type: typ("string(10)")},
			{Name: "customer", From: []string{"Customer"}, Type: typ("string(10)")},
		},
		Children: []*entity.Child{{
			Name: "items", Table: "sales_order_items", From: []string{"Items"}, Key: []string{"item_no"},
			Columns: []entity.Column{
				{Name: "item_no", From: []string{"ItemNo"}, Type: typ("int32")},
				{Name: "material", From: []string{"Material"}, Type: typ("string(40)"), Pattern: "^[A-Z0-9-]+$"},
				{Name: "quantity", From: []string{"Quantity"}, Type: typ("decimal(13,3)")},
				{Name: "price", From: []string{"Price", "Amount"}, Type: typ("decimal(15,2)"), Nullable: true},
				{Name: "unit", From: []string{"Unit"}, Type: typ("string(3)"), Values: map[string]string{"PC": "PCE", "KG": "KGM"}},
				{Name: "deliver_from", From: []string{"From"}, Type: typ("date"), Nullable: true},
				{Name: "deliver_to", From: []string{"To"}, Type: typ("date"), Nullable: true, NotBefore: "deliver_from"},
			},
		}},
	}
}

// order writes a sales order item with the given lines (the JSON of the
// Items member, "" to leave it out).
func order(items string) []byte {
	s := `{"OrderNo":"SO1","Customer":"C1","ChangedAt":"2025-01-01T00:00:00Z"`
	if items != "" {
		s += `,"Items":` + items
	}
	return []byte(s + "}")
}

// line writes one line of a sales order.
func line(no, quantity string) string {
	return `{"ItemNo":` + no + `,"Material":"M-1","Quantity":` + quantity + `,"Price":{"Amount":"12.5"},"Unit":"PC","From":"2025-01-01","To":null}`
}

func TestLines(t *testing.T) {
	s := mustCompile(t, salesOrders(t), entity.Source{Name: "SalesOrders"})
	rec, inv, ok, err := s.DecodeItem(order(`[` + line("10", `"1.5"`) + `, {"To":"2025-02-01","Unit":"KG","ItemNo":"20","Quantity":2,"Material":"X","From":"2025-01-31","Price":{"Amount":1e1}}]`))
	if err != nil || !ok {
		t.Fatalf("%v %+v", err, inv)
	}
	want := entity.Lines{
		{{I: 10}, {S: "M-1"}, {S: "1.500"}, {S: "12.50"}, {S: "PCE"}, {S: "2025-01-01"}, {Null: true}},
		{{I: 20}, {S: "X"}, {S: "2.000"}, {S: "10.00"}, {S: "KGM"}, {S: "2025-01-31"}, {S: "2025-02-01"}},
	}
	if len(rec.Children) != 1 || len(rec.Children[0]) != len(want) {
		t.Fatalf("children %+v", rec.Children)
	}
	for j, l := range want {
		if !slices.EqualFunc(rec.Children[0][j], l, sameValue) {
			t.Errorf("line %d: %+v, want %+v", j, rec.Children[0][j], l)
		}
	}
	if rec.ErpID != "SO1" || len(rec.Vals) != 2 || rec.Vals[1].S != "C1" {
		t.Errorf("record %+v", rec)
	}

	rec, _, ok, _ = s.DecodeItem(order(`[ ]`))
	if !ok || rec.Children == nil || rec.Children[0] == nil || len(rec.Children[0]) != 0 {
		t.Errorf("empty array: %v %#v", ok, rec.Children)
	}
}

func TestLinesInvalid(t *testing.T) {
	s := mustCompile(t, salesOrders(t), entity.Source{Name: "SalesOrders"})
	bad := func(no string) string {
		return `{"ItemNo":` + no + `,"Material":"M-1","Quantity":"1.2345","Unit":"PC"}`
	}
	for _, tc := range []struct{ items, reason string }{
		{"", "items (Items): missing"},
		{"null", "items (Items): null, want an array of lines"},
		{`{"0":{}}`, "items (Items): an object, want an array of lines"},
		{`"x"`, "items (Items): a string, want an array of lines"},
		{`[` + line("10", "1") + `, 7, [], null]`, "items[1]: a number, want an object; items[2]: an array, want an object; items[3]: null, want an object"},
		{`[` + line("10", "1") + `,` + line("20", "1") + `,` + line("30", "1") + `,` + bad("30") + `]`,
			`items[3] (item_no 30): quantity: 1.2345 has more fraction digits than decimal(13,3)`},
		{`[` + line("10", "1") + `,` + line("20", "1") + `,` + line("10", "2") + `]`, "items[2] (item_no 10): the same key as items[0]"},
		{`[` + line("10", "1") + `,` + line("10", "1") + `,` + line("10", "2") + `]`, "items[1] (item_no 10): the same key as items[0]; items[2] (item_no 10): the same key as items[0]"},
		{`[{"ItemNo":"x","Material":"m","Quantity":1,"Unit":"L","From":"2025-01-02","To":"2025-01-01"}]`,
			`items[0]: item_no: "x" is not an integer; items[0]: material: "m" does not match ^[A-Z0-9-]+$; items[0]: unit: "L" is not one of KG, PC; items[0]: deliver_to: before deliver_from`},
		{`[{"ItemNo":1,"Material":"M","Quantity":1,"Unit":"KG","Price":5,"From":"2025-01-02","To":"2025-01-01"}]`,
			`items[0] (item_no 1): price: Price is not an object; items[0] (item_no 1): deliver_to: before deliver_from`},
		{`[` + bad("1") + `,` + bad("2") + `,` + line("3", "1") + `,` + line("3", "1") + `,` + bad("5") + `,` + bad("6") + `]`,
			`items[0] (item_no 1): quantity: 1.2345 has more fraction digits than decimal(13,3); items[1] (item_no 2): quantity: 1.2345 has more fraction digits than decimal(13,3); ` +
				`items[3] (item_no 3): the same key as items[2]; items (Items): 2 more lines do not fit`},
	} {
		_, inv, ok, err := s.DecodeItem(order(tc.items))
		if err != nil || ok || inv.Reason != tc.reason {
			t.Errorf("%s: %v %v\n got %q\nwant %q", tc.items, err, ok, inv.Reason, tc.reason)
		}
		if inv.ErpID != "SO1" || inv.UpdatedAt.IsZero() || inv.Version == 0 || string(inv.Raw) != string(order(tc.items)) {
			t.Errorf("%s: invalid %+v", tc.items, inv)
		}
	}
	// The header's own problems come first.
	_, inv, _, _ := s.DecodeItem([]byte(`{"OrderNo":"SO1","ChangedAt":"2025-01-01T00:00:00Z","Items":[7]}`))
	if inv.Reason != "customer: missing; items[0]: a number, want an object" {
		t.Errorf("%q", inv.Reason)
	}
}

// TestLinesStringKey: a string key compares as the child table's index
// does, byte for byte: "A", "a" and "A " are three keys.
func TestLinesStringKey(t *testing.T) {
	e := &entity.Entity{Name: "e", Key: []string{"id"}, UpdatedAt: []string{"u"}, Columns: []entity.Column{{Name: "id", Type: entity.Type{Kind: entity.Int64}}},
		Children: []*entity.Child{{Name: "parts", From: []string{"doc", "parts"}, Key: []string{"k", "n"}, Columns: []entity.Column{
			{Name: "k", From: []string{"k"}, Type: entity.Type{Kind: entity.String, Length: 5}},
			{Name: "n", From: []string{"n"}, Type: entity.Type{Kind: entity.Int32}},
		}}}}
	s := mustCompile(t, e, entity.Source{Name: "e"})
	for _, tc := range []struct{ item, reason string }{
		{`{"id":1,"u":"2025-01-01T00:00:00Z","doc":{"parts":[{"k":"A","n":1},{"k":"a","n":1},{"k":"A","n":2}]}}`, ""},
		{`{"id":1,"u":"2025-01-01T00:00:00Z","doc":{"parts":[{"k":"A","n":1},{"k":"A ","n":1},{"k":"a","n":1}]}}`, ""},
		{`{"id":1,"u":"2025-01-01T00:00:00Z","doc":{"parts":[{"k":"A ","n":1},{"k":"A ","n":1}]}}`, `parts[1] (k "A ", n 1): the same key as parts[0]`},
		{`{"id":1,"u":"2025-01-01T00:00:00Z","doc":null}`, "parts (doc.parts): missing"},
		{`{"id":1,"u":"2025-01-01T00:00:00Z","doc":[]}`, "parts (doc.parts): doc is not an object"},
		{`{"id":1,"u":"2025-01-01T00:00:00Z","doc":{"parts":[{"k":"","n":1}]}}`, "parts[0]: k: empty, in a key column"},
	} {
		rec, inv, ok, err := s.DecodeItem([]byte(tc.item))
		if err != nil || ok != (tc.reason == "") || inv.Reason != tc.reason {
			t.Errorf("%s: %v %v %q, want %q", tc.item, err, ok, inv.Reason, tc.reason)
		}
		if ok && len(rec.Children[0]) != 3 {
			t.Errorf("%s: %+v", tc.item, rec.Children)
		}
	}
	if p := s.Properties(); !slices.Equal(p, []string{"id", "u"}) {
		t.Errorf("properties %v", p)
	}
}

func TestCompileChildren(t *testing.T) {
	s := mustCompile(t, salesOrders(t), entity.Source{Name: "SalesOrders"})
	if p := s.Properties(); !slices.Equal(p, []string{"OrderNo", "Customer", "ChangedAt"}) {
		t.Errorf("properties %v", p)
	}
	ch := s.Children()
	if len(ch) != 1 || ch[0].Name != "items" || !slices.Equal(ch[0].From, []string{"Items"}) ||
		!slices.Equal(ch[0].Properties, []string{"ItemNo", "Material", "Quantity", "Price", "Unit", "From", "To"}) {
		t.Errorf("children %+v", ch)
	}
	if !s.Exact() {
		t.Error("a child's decimal column: not exact")
	}
	for _, tc := range []struct {
		edit func(e *entity.Entity)
		err  string
	}{
		{func(e *entity.Entity) { e.Children[0].From = []string{"Customer"} }, "child items: from Customer: a column, updated_at or version reads that property"},
		{func(e *entity.Entity) { e.Children[0].From = []string{"ChangedAt"} }, "child items: from ChangedAt: a column, updated_at or version reads that property"},
		{func(e *entity.Entity) {
			e.Columns = append(e.Columns, entity.Column{Name: "first", From: []string{"Items", "0"}, Type: entity.Type{Kind: entity.JSON}})
		}, "child items: from Items: a property inside the collection is read as a column"},
		{func(e *entity.Entity) {
			c := *e.Children[0]
			c.Name = "again"
			e.Children = append(e.Children, &c)
		}, "child again: from Items: another child reads that collection"},
		{func(e *entity.Entity) {
			c := *e.Children[0]
			c.Name, c.From = "inner", []string{"Items", "Inner"}
			e.Children = append(e.Children, &c)
		}, "child items: from Items: a property inside the collection is read as a column, updated_at, version or another child's"},
		{func(e *entity.Entity) { e.Children[0].Key = []string{"nope"} }, "child items: a key column is not declared"},
		{func(e *entity.Entity) { e.Children[0].Columns[0].Nullable = true }, "child items: key column item_no: a key column is neither nullable"},
		{func(e *entity.Entity) { e.Children[0].From = []string{"Items", ""} }, `child items: from "Items." has an empty name`},
	} {
		e := salesOrders(t)
		tc.edit(e)
		if _, err := Compile(e, entity.Source{Name: "SalesOrders"}); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%v, want %q", err, tc.err)
		}
	}
	// Without children: no Children, and the record's Children nil.
	e := salesOrders(t)
	e.Children = nil
	s = mustCompile(t, e, entity.Source{Name: "SalesOrders"})
	rec, _, ok, _ := s.DecodeItem(order(`[1]`))
	if !ok || rec.Children != nil || len(s.Children()) != 0 || s.Exact() {
		t.Errorf("%v %+v", ok, rec)
	}
}

// TestLinesPage: a page of documents through the spec's page reader and a
// REST shape whose records hold arrays.
func TestLinesPage(t *testing.T) {
	s := mustCompile(t, salesOrders(t), entity.Source{Name: "SalesOrders"})
	items := string(order(`[`+line("10", "1")+`,`+line("20", "2")+`]`)) + "," + string(order(`[`+line("10", "1")+`,`+line("10", "2")+`]`)) + "," + string(order(`[]`))
	p, err := decodePage([]byte(`{"data":[`+items+`],"next_cursor":null}`), nil, s)
	if err != nil || len(p.Records) != 2 || len(p.Invalid) != 1 || len(p.Records[0].Children[0]) != 2 || len(p.Records[1].Children[0]) != 0 {
		t.Fatalf("%v %+v", err, p)
	}
	if p.Records[0].Children[0][1][2].S != "2.000" || p.Invalid[0].Reason != "items[1] (item_no 10): the same key as items[0]" {
		t.Errorf("%+v %q", p.Records[0].Children, p.Invalid[0].Reason)
	}
	sh := DefaultShape()
	sh.Records, sh.Cursor = JSONPath{"result", "items"}, JSONPath{"result", "next"}
	p, err = sh.decodePage([]byte(`{"result":{"next":"c","items":[`+items+`],"other":[[1],{"a":[]}]}}`), nil, s)
	if err != nil || len(p.Records) != 2 || len(p.Invalid) != 1 || p.NextCursor != "c" || len(p.Records[0].Children[0]) != 2 {
		t.Fatalf("%v %+v", err, p)
	}
}

// BenchmarkDecodeDocumentPage decodes a page of 100 sales orders of 10
// lines each: compare its ns/line with BenchmarkDecodeTypedPage's
// ns/record.
func BenchmarkDecodeDocumentPage(b *testing.B) {
	s := mustCompile(b, salesOrders(b), entity.Source{Name: "SalesOrders"})
	items := make([]string, 100)
	for i := range items {
		lines := make([]string, 10)
		for j := range lines {
			lines[j] = line(strconv.Itoa(10*(j+1)), `"`+strconv.Itoa(i+j)+`.25"`)
		}
		items[i] = strings.Replace(string(order("["+strings.Join(lines, ",")+"]")), "SO1", "SO"+strconv.Itoa(i), 1)
	}
	body := []byte(`{"data":[` + strings.Join(items, ",") + `],"next_cursor":"x"}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		p, err := decodePage(body, nil, s)
		if err != nil || len(p.Records) != 100 {
			b.Fatal(err, p.Invalid)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/line")
}
