package captest

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Order is one sales order of OrdersService as Start seeds it or a test
// creates it: a header and its lines. Decimals are exact text (TotalAmount
// with 2 decimals); a nil Note is null.
type Order struct {
	OrderNo, Company, Customer string
	// OrderDate is an Edm.Date, YYYY-MM-DD.
	OrderDate   string
	TotalAmount string
	Note        *string
	// ChangedAt and ChangeCounter are what the seed loads; the server
	// stamps them on every change.
	ChangedAt     time.Time
	ChangeCounter int
	Items         []OrderItem
}

// OrderItem is one line of an Order. Quantity is a Decimal(13,3),
// NetAmount a Decimal(15,2) and UnitPrice an exact decimal of up to 28
// digits, 8 of them after the point, served as a String; a nil Batch is
// null.
type OrderItem struct {
	ItemNo                         int
	Material                       string
	Quantity, NetAmount, UnitPrice string
	Batch                          *string
}

var materials = []string{"PUMP-100", "VALVE-7", "GASKET-1", "ÖL-FILTER", "BOLT-M8", "管-DN50", "Łożysko-6204"}

// SeedOrders returns the n orders Start loads into OrdersService for
// seed, in ChangedAt order. The same n and seed give the same orders.
// OrderNos ("SO" and 6 digits) are a permutation of 1..n, so their order is
// not the time order; every SeedTie consecutive orders share one
// ChangedAt, SeedStart + (i/SeedTie)·SeedStep. Each order has 5 to 20
// lines numbered 10, 20, ...; ChangeCounter is 1 to 3.
func SeedOrders(n int, seed int64) []Order {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6f7264657273))
	ids := rng.Perm(n)
	orders := make([]Order, n)
	for i := range orders {
		o := newOrder(rng, fmt.Sprintf("SO%06d", ids[i]+1), i)
		o.ChangedAt = SeedStart.Add(time.Duration(i/SeedTie) * SeedStep)
		o.ChangeCounter = 1 + i%3
		orders[i] = o
	}
	return orders
}

// NewOrder returns the i-th order a test creates, numbered no: 5 to 20
// lines drawn from i.
func NewOrder(no string, i int) Order {
	return newOrder(rand.New(rand.NewPCG(uint64(i), 0x6e6577)), no, i)
}

func newOrder(rng *rand.Rand, no string, i int) Order {
	o := Order{
		OrderNo:   no,
		Company:   []string{"1000", "2000"}[rng.IntN(2)],
		Customer:  fmt.Sprintf("C%04d", rng.IntN(500)),
		OrderDate: time.Date(2024, 1, 1+rng.IntN(700), 0, 0, 0, 0, time.UTC).Format(time.DateOnly),
	}
	if i%3 != 0 {
		note := fmt.Sprintf("Lieferung Nº %d – Straße %d", i, rng.IntN(100))
		o.Note = &note
	}
	for n := range 5 + rng.IntN(16) {
		o.Items = append(o.Items, newItem(rng, 10*(n+1)))
	}
	o.TotalAmount = total(o.Items)
	return o
}

// newItem returns a line numbered no with values drawn from rng: now and
// then at the edge of its type (Quantity 9999999999.999, a UnitPrice of 26
// digits, trailing zeros).
func newItem(rng *rand.Rand, no int) OrderItem {
	it := OrderItem{
		ItemNo:    no,
		Material:  materials[rng.IntN(len(materials))],
		Quantity:  fmt.Sprintf("%d.%03d", rng.IntN(100000), rng.IntN(1000)),
		NetAmount: fmt.Sprintf("%d.%02d", rng.Int64N(1_000_000_000), rng.IntN(100)),
		UnitPrice: fmt.Sprintf("%d.%08d", rng.Int64N(1_000_000_000_000_000_000), rng.Int64N(100_000_000)),
	}
	switch rng.IntN(8) {
	case 0:
		it.Quantity = "9999999999.999"
	case 1:
		it.UnitPrice = "99999999999999999999.99999999"
	case 2:
		it.UnitPrice, it.Quantity = "0.10000000", "0.100"
	}
	if rng.IntN(3) != 0 {
		batch := fmt.Sprintf("B%06d", rng.IntN(1_000_000))
		it.Batch = &batch
	}
	return it
}

// total returns the sum of items' NetAmount, with 2 decimals.
func total(items []OrderItem) string {
	var cents int64
	for _, it := range items {
		whole, frac, _ := strings.Cut(it.NetAmount, ".")
		w, _ := strconv.ParseInt(whole, 10, 64)
		f, _ := strconv.ParseInt((frac + "00")[:2], 10, 64)
		cents += w*100 + f
	}
	return fmt.Sprintf("%d.%02d", cents/100, cents%100)
}

// fields returns o as the JSON object of a POST: header and lines.
func (o Order) fields() map[string]any {
	items := make([]any, len(o.Items))
	for i, it := range o.Items {
		items[i] = it.fields()
	}
	return map[string]any{
		"OrderNo": o.OrderNo, "Company": o.Company, "Customer": o.Customer, "OrderDate": o.OrderDate,
		"TotalAmount": o.TotalAmount, "Note": o.Note, "Items": items,
	}
}

// fields returns the line as the JSON object of a POST or a deep PATCH.
func (it OrderItem) fields() map[string]any {
	return map[string]any{
		"ItemNo": it.ItemNo, "Material": it.Material, "Quantity": it.Quantity,
		"NetAmount": it.NetAmount, "UnitPrice": it.UnitPrice, "Batch": it.Batch,
	}
}

// writeOrdersCSV writes the headers of orders as CAP's seed file of
// SalesOrders.
func writeOrdersCSV(w io.Writer, orders []Order) error {
	rows := [][]string{{"OrderNo", "Company", "Customer", "OrderDate", "TotalAmount", "Note", "ChangedAt", "ChangeCounter"}}
	for _, o := range orders {
		rows = append(rows, []string{o.OrderNo, o.Company, o.Customer, o.OrderDate, o.TotalAmount, deref(o.Note),
			o.ChangedAt.UTC().Format(TimeLayout), strconv.Itoa(o.ChangeCounter)})
	}
	return writeRows(w, rows)
}

// writeItemsCSV writes the lines of orders as CAP's seed file of
// SalesOrderItems.
func writeItemsCSV(w io.Writer, orders []Order) error {
	rows := [][]string{{"up__OrderNo", "ItemNo", "Material", "Quantity", "NetAmount", "UnitPrice", "Batch"}}
	for _, o := range orders {
		for _, it := range o.Items {
			rows = append(rows, []string{o.OrderNo, strconv.Itoa(it.ItemNo), it.Material, it.Quantity, it.NetAmount, it.UnitPrice, deref(it.Batch)})
		}
	}
	return writeRows(w, rows)
}

func writeRows(w io.Writer, rows [][]string) error {
	cw := csv.NewWriter(w)
	cw.Comma = ';'
	if err := cw.WriteAll(rows); err != nil {
		return err
	}
	return cw.Error()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// OrderSet is OrdersService's SalesOrders: documents whose lines (Items, a
// composition) are read with $expand and written only through their
// order. Every change stamps the order's ChangedAt and adds one to its
// ChangeCounter, a change of the lines alone too.
type OrderSet struct {
	*TypedSet
}

// Documents returns every order with its lines, ordered by OrderNo, the
// lines of each by ItemNo: the reference a test compares synced header
// and line tables with. Call it when nothing changes (see TypedSet.All).
func (o *OrderSet) Documents(ctx context.Context) ([]Object, error) {
	return o.All(ctx, "$expand=Items($orderby=ItemNo)&$orderby=OrderNo")
}

// Document returns the order numbered no with its lines, ordered by
// ItemNo.
func (o *OrderSet) Document(ctx context.Context, no string) (Object, error) {
	return o.Get(ctx, Key{"OrderNo": no}, "Items($orderby=ItemNo)")
}

// Create POSTs order with its lines (a deep insert) and returns it as
// stored, with its lines.
func (o *OrderSet) Create(ctx context.Context, order Order) (Object, error) {
	if _, err := o.Post(ctx, order.fields()); err != nil {
		return nil, err
	}
	return o.Document(ctx, order.OrderNo)
}

// Revise makes the i-th change to the order numbered no, in one deep PATCH
// of the header with its whole Items array, and returns the order as
// stored after it, with its lines. Drawn from i, the change deletes a line
// (most of the time; every 17th change all of them), changes another's
// quantity, amount and batch, adds a line numbered past the highest, and
// sets the header's Note and TotalAmount (the new lines' sum).
func (o *OrderSet) Revise(ctx context.Context, no string, i int) (Object, error) {
	cur, err := o.Document(ctx, no)
	if err != nil {
		return nil, err
	}
	items, err := orderItems(cur)
	if err != nil {
		return nil, fmt.Errorf("captest: order %s: %w", no, err)
	}
	rng := rand.New(rand.NewPCG(uint64(i), 0x726576697365))
	switch {
	case i%17 == 16:
		items = nil
	case len(items) > 1 && i%4 != 3:
		items = slices.Delete(items, i%len(items), i%len(items)+1)
	}
	if len(items) > 0 {
		c := &items[(i*7)%len(items)]
		fresh := newItem(rng, c.ItemNo)
		c.Quantity, c.NetAmount, c.Batch = fresh.Quantity, fresh.NetAmount, fresh.Batch
	}
	if i%17 != 16 && (i%3 != 2 || len(items) == 0) {
		last := 0
		for _, it := range items {
			last = max(last, it.ItemNo)
		}
		items = append(items, newItem(rng, last+10))
	}
	lines := make([]any, len(items))
	for j, it := range items {
		lines[j] = it.fields()
	}
	var note any
	if i%4 != 0 {
		note = fmt.Sprintf("Änderung %d", i)
	}
	if _, err := o.Patch(ctx, Key{"OrderNo": no}, map[string]any{"Note": note, "TotalAmount": total(items), "Items": lines}); err != nil {
		return nil, err
	}
	return o.Document(ctx, no)
}

// Lines returns the lines of an order read with its Items expanded.
func Lines(order Object) ([]Object, error) {
	raw, ok := order["Items"].([]any)
	if !ok {
		return nil, fmt.Errorf("captest: order %v has no expanded Items", order["OrderNo"])
	}
	out := make([]Object, len(raw))
	for i, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("captest: order %v: line %d is a %T", order["OrderNo"], i, r)
		}
		out[i] = m
	}
	return out, nil
}

// orderItems returns the lines of an order read with its Items expanded.
func orderItems(order Object) ([]OrderItem, error) {
	lines, err := Lines(order)
	if err != nil {
		return nil, err
	}
	items := make([]OrderItem, len(lines))
	for i, l := range lines {
		b, err := json.Marshal(l)
		if err != nil {
			return nil, err
		}
		if err := decodeExact(b, &items[i]); err != nil {
			return nil, fmt.Errorf("line %d: %w", i, err)
		}
	}
	return items, nil
}
