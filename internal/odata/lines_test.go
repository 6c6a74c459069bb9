package odata_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/odata"
)

// salesOrders is a document entity: its lines (items, read from the Items
// navigation property) have the only decimal column.
func salesOrders(t *testing.T) *entity.Entity {
	t.Helper()
	col := func(name, from, typ string) entity.Column {
		ty, err := entity.ParseType(typ)
		if err != nil {
			t.Fatal(err)
		}
		return entity.Column{Name: name, From: strings.Split(from, "."), Type: ty}
	}
	return &entity.Entity{
		Name: "sales_orders", Sources: []entity.Source{{Name: "SalesOrders"}},
		Key: []string{"order_no"}, UpdatedAt: []string{"ChangedAt"},
		Columns: []entity.Column{col("order_no", "OrderNo", "string(10)"), col("customer", "Customer", "string(10)")},
		Children: []*entity.Child{{Name: "items", From: []string{"Items"}, Key: []string{"item_no"}, Columns: []entity.Column{
			col("item_no", "ItemNo", "int32"), col("material", "Material", "string(40)"), col("quantity", "Quantity", "decimal(13,3)"),
		}}},
	}
}

// linesServer serves sales orders whose Items it cuts after two lines with
// a nested next link (relative, as SAP CAP writes links), the rest of the
// lines at /SalesOrders('<no>')/Items, two at a time. fail answers those
// follow-up requests with 503, or closes their connection (reset).
type linesServer struct {
	orders map[string][]string // order number: its lines' JSON
	counts map[string]string   // order number: its Items@odata.count, as written
	mu     sync.Mutex
	reqs   []*http.Request
	fail   string // "", "503" or "reset"
}

func line(no int, quantity string) string {
	return fmt.Sprintf(`{"ItemNo":%d,"Material":"M-%d","Quantity":%s}`, no, no, quantity)
}

// cut writes lines[from:] as a collection of at most two lines: the JSON
// of the array and the next link of the rest ("" when none).
func cut(lines []string, from int, order string) (string, string) {
	to := min(from+2, len(lines))
	next := ""
	if to < len(lines) {
		next = fmt.Sprintf("Items?$skiptoken=%d", to)
		if from == 0 {
			next = fmt.Sprintf("SalesOrders('%s')/Items?$skiptoken=%d", order, to)
		}
	}
	return "[" + strings.Join(lines[from:to], ",") + "]", next
}

func (f *linesServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	fail := f.fail
	f.mu.Unlock()
	if order, ok := strings.CutPrefix(r.URL.Path, "/odata/SalesOrders('"); ok {
		switch fail {
		case "503":
			http.Error(w, `{"error":{"message":"busy"}}`, http.StatusServiceUnavailable)
			return
		case "reset":
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		order = strings.TrimSuffix(order, "')/Items")
		var from int
		fmt.Sscan(r.URL.Query().Get("$skiptoken"), &from)
		items, next := cut(f.orders[order], from, order)
		if next != "" {
			next = `,"@odata.nextLink":"` + next + `"`
		}
		fmt.Fprintf(w, `{"value":%s%s}`, items, next)
		return
	}
	if strings.Contains(r.URL.Query().Get("$filter"), " gt ") {
		fmt.Fprint(w, `{"value":[]}`)
		return
	}
	var out []string
	for _, order := range []string{"SO1", "SO2", "SO3"} {
		items, next := cut(f.orders[order], 0, order)
		item := fmt.Sprintf(`{"OrderNo":"%s","Customer":"C1","ChangedAt":"2025-01-01T00:00:00.000Z","Items":%s`, order, items)
		if next != "" {
			item += `,"Items@odata.nextLink":"` + next + `"`
		}
		if c, ok := f.counts[order]; ok {
			item += `,"Items@odata.count":` + c
		}
		out = append(out, item+"}")
	}
	fmt.Fprintf(w, `{"value":[%s]}`, strings.Join(out, ","))
}

// TestLinesExpanded: the request of a document entity ($expand of the
// lines' properties, exact numbers asked for a child's decimal), nested
// next links followed to the end of a collection, a count above the lines
// that came, and a follow-up request that fails failing the page.
func TestLinesExpanded(t *testing.T) {
	f := &linesServer{
		orders: map[string][]string{
			"SO1": {line(10, `"1.5"`), line(20, `"2"`), line(30, `"3"`), line(40, `"4"`), line(50, `"5.125"`)},
			"SO2": {line(10, `"1"`)},
			"SO3": {line(10, `"1"`), line(20, `"2"`), line(10, `"3"`)},
		},
		counts: map[string]string{"SO1": "5", "SO2": `"3"`},
	}
	srv := httptest.NewServer(f)
	defer srv.Close()
	e := salesOrders(t)
	s, err := odata.New(odata.Config{URL: srv.URL + "/odata/SalesOrders", Schema: compile(t, e, e.Sources[0]),
		HTTP: erp.Config{MaxRetries: 1, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Page(context.Background(), erp.Query{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Records) != 1 || len(p.Invalid) != 2 || p.NextCursor == "" {
		t.Fatalf("%+v", p)
	}
	lines := p.Records[0].Children[0]
	var got []string
	for _, l := range lines {
		got = append(got, fmt.Sprintf("%d %s %s", l[0].I, l[1].S, l[2].S))
	}
	if want := "10 M-10 1.500|20 M-20 2.000|30 M-30 3.000|40 M-40 4.000|50 M-50 5.125"; strings.Join(got, "|") != want {
		t.Errorf("SO1's lines %q, want %q", strings.Join(got, "|"), want)
	}
	if inv := p.Invalid[0]; inv.ErpID != "SO2" || inv.Reason != "items (Items): the server counts 3 lines (Items@odata.count), 1 came" || inv.Version == 0 {
		t.Errorf("SO2: %+v", inv)
	}
	// SO3's third line came through a link: the record holds all three.
	if inv := p.Invalid[1]; inv.ErpID != "SO3" || inv.Reason != "items[2] (item_no 10): the same key as items[0]" ||
		strings.Contains(string(inv.Raw), "nextLink") || strings.Count(string(inv.Raw), "ItemNo") != 3 {
		t.Errorf("SO3: %+v %s", inv, inv.Raw)
	}

	f.mu.Lock()
	first := f.reqs[0]
	var follows []string
	for _, r := range f.reqs[1:] {
		follows = append(follows, r.URL.RequestURI())
		if r.Header.Get("Accept") != first.Header.Get("Accept") {
			t.Errorf("a follow-up request asks %q, the page %q", r.Header.Get("Accept"), first.Header.Get("Accept"))
		}
	}
	f.reqs = nil
	f.mu.Unlock()
	q := first.URL.Query()
	if q.Get("$select") != "OrderNo,Customer,ChangedAt" || q.Get("$expand") != "Items($select=ItemNo,Material,Quantity)" ||
		!strings.Contains(first.Header.Get("Accept"), "IEEE754Compatible=true") {
		t.Errorf("request %s, Accept %q", first.URL, first.Header.Get("Accept"))
	}
	if want := "/odata/SalesOrders('SO1')/Items?$skiptoken=2|/odata/SalesOrders('SO1')/Items?$skiptoken=4|/odata/SalesOrders('SO3')/Items?$skiptoken=2"; strings.Join(follows, "|") != want {
		t.Errorf("follow-ups %q, want %q", strings.Join(follows, "|"), want)
	}

	// A follow-up that fails fails the page: no half document, no cursor
	// past it.
	for _, fail := range []string{"503", "reset"} {
		f.mu.Lock()
		f.fail = fail
		f.mu.Unlock()
		p, err = s.Page(context.Background(), erp.Query{Limit: 10})
		if err == nil || p != nil || !strings.Contains(err.Error(), "follow Items@odata.nextLink") {
			t.Errorf("%s: %v %+v", fail, err, p)
		}
	}
}

// TestLinesDeepFrom: a child read through two navigation properties is
// refused when the source is made.
func TestLinesDeepFrom(t *testing.T) {
	e := salesOrders(t)
	e.Children[0].From = []string{"Header", "Items"}
	_, err := odata.New(odata.Config{URL: "http://127.0.0.1:1/SalesOrders", Schema: compile(t, e, e.Sources[0])})
	if err == nil || !strings.Contains(err.Error(), "child items: from Header.Items: a child's collection is one navigation property") {
		t.Errorf("%v", err)
	}
}
