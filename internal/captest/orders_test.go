package captest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/captest"
)

// lineText shows an order's lines as "ItemNo=Quantity/NetAmount/UnitPrice/Batch"
// strings, in the order served.
func lineText(t *testing.T, order captest.Object) []string {
	t.Helper()
	lines, err := captest.Lines(order)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = fmt.Sprintf("%v=%v/%v/%v/%v", l["ItemNo"], l["Quantity"], l["NetAmount"], l["UnitPrice"], l["Batch"])
	}
	return out
}

// seedText is lineText of a seeded order.
func seedText(o captest.Order) []string {
	out := make([]string, len(o.Items))
	for i, it := range o.Items {
		batch := "<nil>"
		if it.Batch != nil {
			batch = *it.Batch
		}
		out[i] = fmt.Sprintf("%d=%s/%s/%s/%s", it.ItemNo, it.Quantity, it.NetAmount, it.UnitPrice, batch)
	}
	return out
}

// TestOrders documents OrdersService's documents: with a page limit of 3,
// $expand=Items still brings every line of an order (CAP limits the
// top-level collection only, with no nested nextLink), while an $expand
// with its own $top cuts the lines short silently; decimals are exact
// text; a deep PATCH (Revise) inserts, updates and deletes lines in one
// request, stamps ChangedAt and bumps ChangeCounter; an empty Items array
// deletes every line; a deep POST creates an order with its lines and a
// DELETE takes them with it.
func TestOrders(t *testing.T) {
	t.Parallel()
	const n = 40
	s := captest.Start(t, captest.Options{Orders: n, Seed: 5, PageLimit: 3, ReliablePaging: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	seed := captest.SeedOrders(n, 5)
	slices.SortFunc(seed, func(a, b captest.Order) int { return strings.Compare(a.OrderNo, b.OrderNo) })
	docs, err := s.Orders.Documents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != n {
		t.Fatalf("%d orders, want %d", len(docs), n)
	}
	for i, d := range docs {
		o := seed[i]
		if d["OrderNo"] != o.OrderNo || d["TotalAmount"] != o.TotalAmount || d["ChangeCounter"] != json.Number(fmt.Sprint(o.ChangeCounter)) {
			t.Errorf("order %d: %v %v %v, want %s %s %d", i, d["OrderNo"], d["TotalAmount"], d["ChangeCounter"], o.OrderNo, o.TotalAmount, o.ChangeCounter)
		}
		if got, want := lineText(t, d), seedText(o); !slices.Equal(got, want) {
			t.Errorf("order %s: lines %v, want %v", o.OrderNo, got, want)
		}
	}

	t.Run("expand and the page limit", func(t *testing.T) {
		p, err := s.Page(ctx, s.OrdersURL+"SalesOrders?$expand=Items&$orderby=OrderNo")
		if err != nil {
			t.Fatal(err)
		}
		if p.NextLink == "" {
			t.Error("the first page of 3 orders has no nextLink")
		}
		b, err := s.Orders.All(ctx, "$expand=Items($select=ItemNo)&$orderby=OrderNo&$top=3")
		if err != nil {
			t.Fatal(err)
		}
		long := 0
		for i, o := range b {
			if n := len(lineText(t, o)); n != len(seed[i].Items) {
				t.Errorf("order %s: %d lines in one page of 3 orders, want all %d", seed[i].OrderNo, n, len(seed[i].Items))
			} else if n > 3 {
				long++
			}
			for k := range o {
				if strings.Contains(k, "@odata") {
					t.Errorf("order %s carries %s", seed[i].OrderNo, k)
				}
			}
		}
		if long == 0 {
			t.Error("no order of more than 3 lines: the check proved nothing")
		}
		cut, err := s.Orders.All(ctx, "$expand=Items($top=2)&$orderby=OrderNo&$top=1")
		if err != nil {
			t.Fatal(err)
		}
		if n := len(lineText(t, cut[0])); n != 2 {
			t.Errorf("$expand=Items($top=2): %d lines, want 2 (cut short, with no nextLink)", n)
		}
	})

	t.Run("deep patch", func(t *testing.T) {
		no := seed[0].OrderNo
		before, err := s.Orders.Document(ctx, no)
		if err != nil {
			t.Fatal(err)
		}
		after, err := s.Orders.Revise(ctx, no, 1) // deletes line 1, changes one, adds one
		if err != nil {
			t.Fatal(err)
		}
		was, now := lineText(t, before), lineText(t, after)
		if len(now) != len(was) {
			t.Errorf("lines %v after revision 1 of %v: want one deleted and one added", now, was)
		}
		if slices.Contains(now, was[1]) {
			t.Errorf("line %s is still there", was[1])
		}
		added := now[len(now)-1]
		if slices.Contains(was, added) {
			t.Errorf("no line added: %v", now)
		}
		changed := 0
		for _, l := range now {
			if !slices.Contains(was, l) {
				changed++
			}
		}
		if changed != 2 {
			t.Errorf("%d lines new or changed, want 2: %v, was %v", changed, now, was)
		}
		if after["ChangeCounter"] != json.Number(fmt.Sprint(seed[0].ChangeCounter+1)) || !(after["ChangedAt"].(string) > before["ChangedAt"].(string)) {
			t.Errorf("ChangeCounter %v, ChangedAt %v (was %v, %v): want one more and later", after["ChangeCounter"], after["ChangedAt"], before["ChangeCounter"], before["ChangedAt"])
		}
		emptied, err := s.Orders.Revise(ctx, no, 16)
		if err != nil {
			t.Fatal(err)
		}
		if l := lineText(t, emptied); len(l) != 0 || emptied["TotalAmount"] != "0.00" {
			t.Errorf("after revision 16: lines %v, total %v; want none and 0.00", l, emptied["TotalAmount"])
		}
	})

	t.Run("create and delete", func(t *testing.T) {
		o := captest.NewOrder("SN000001", 3)
		got, err := s.Orders.Create(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if l, want := lineText(t, got), seedText(o); !slices.Equal(l, want) || got["ChangeCounter"] != json.Number("1") {
			t.Errorf("created: lines %v, ChangeCounter %v; want %v and 1", l, got["ChangeCounter"], want)
		}
		if err := s.Orders.Delete(ctx, captest.Key{"OrderNo": "SN000001"}); err != nil {
			t.Fatal(err)
		}
		var he *captest.HTTPError
		if _, err := s.Orders.Document(ctx, "SN000001"); !errors.As(err, &he) || he.Status != 404 {
			t.Errorf("after the DELETE: err = %v, want a 404", err)
		}
	})
}
