package captest_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/captest"
)

// TestSales documents the typed entities of SalesService: Int64 past 2^53
// and Decimal padded to its scale come exact as strings, a structured
// element comes flattened, a PATCH stamps modifiedAt and bumps
// ChangeCounter, and a PATCH of an order's Items replaces its lines.
func TestSales(t *testing.T) {
	s := captest.Start(t, captest.Options{Auth: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c1 := captest.Key{"CompanyCode": "1000", "Customer": "C0001"}

	t.Run("seed", func(t *testing.T) {
		all, err := s.Customers.All(ctx, "$orderby=CompanyCode,Customer")
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != captest.SalesCustomerCount {
			t.Fatalf("%d customers, want %d", len(all), captest.SalesCustomerCount)
		}
		c, c2 := all[0], all[1]
		if c["Rating"] != captest.SalesBigRating || c["CreditLimit"] != "250000.00" || c2["CreditLimit"] != "1234.50" {
			t.Errorf("Rating %v, CreditLimits %v and %v: want %s, 250000.00 and 1234.50 as exact strings", c["Rating"], c["CreditLimit"], c2["CreditLimit"], captest.SalesBigRating)
		}
		if c["IsBlocked"] != false || c2["IsBlocked"] != true || c["FoundedOn"] != "1987-04-01" || c2["FoundedOn"] != nil {
			t.Errorf("IsBlocked %v/%v, FoundedOn %v/%v: want false/true, 1987-04-01/null", c["IsBlocked"], c2["IsBlocked"], c["FoundedOn"], c2["FoundedOn"])
		}
		if c["Address_City"] != "Stuttgart" || c["ChangeCounter"] != json.Number("1") {
			t.Errorf("Address_City %v, ChangeCounter %v: want Stuttgart (flattened) and 1", c["Address_City"], c["ChangeCounter"])
		}
		orders, err := s.SalesOrders.All(ctx, "$expand=Items&$orderby=OrderID")
		if err != nil {
			t.Fatal(err)
		}
		if len(orders) != captest.SalesOrderCount {
			t.Fatalf("%d orders, want %d", len(orders), captest.SalesOrderCount)
		}
		items, _ := orders[0]["Items"].([]any)
		if len(items) != 2 || items[0].(map[string]any)["Quantity"] != "2.000" {
			t.Errorf("SO0001 items %v: want 2 lines, the first of quantity 2.000", items)
		}
	})

	t.Run("patch", func(t *testing.T) {
		before, err := s.Customers.Get(ctx, c1, "")
		if err != nil {
			t.Fatal(err)
		}
		const rating = "9007199254740995"
		after, err := s.Customers.Patch(ctx, c1, map[string]any{"Rating": rating, "CreditLimit": "12345678901.25", "Address_City": "Ulm"})
		if err != nil {
			t.Fatal(err)
		}
		if after["Rating"] != rating || after["CreditLimit"] != "12345678901.25" || after["Address_City"] != "Ulm" {
			t.Errorf("after the PATCH: Rating %v, CreditLimit %v, City %v", after["Rating"], after["CreditLimit"], after["Address_City"])
		}
		if after["ChangeCounter"] != json.Number("2") || !(after["modifiedAt"].(string) > before["modifiedAt"].(string)) {
			t.Errorf("ChangeCounter %v, modifiedAt %v (was %v): want 2 and a later time", after["ChangeCounter"], after["modifiedAt"], before["modifiedAt"])
		}
		// Decimal scale is enforced.
		var he *captest.HTTPError
		if _, err := s.Customers.Patch(ctx, c1, map[string]any{"CreditLimit": "1.234"}); !errors.As(err, &he) || he.Status != 400 {
			t.Errorf("CreditLimit 1.234 into Decimal(15,2): err = %v, want a 400", err)
		}
	})

	t.Run("lines", func(t *testing.T) {
		so := captest.Key{"OrderID": "SO0001"}
		before, err := s.SalesOrders.Get(ctx, so, "Items")
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.SalesOrders.Patch(ctx, so, map[string]any{"Items": []any{
			map[string]any{"ItemNo": 20, "Material": "VALVE-7", "Quantity": "6.000", "NetAmount": "600.30"},
			map[string]any{"ItemNo": 30, "Material": "GASKET-1", "Quantity": "1.000"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		after, err := s.SalesOrders.Get(ctx, so, "Items")
		if err != nil {
			t.Fatal(err)
		}
		items, _ := after["Items"].([]any)
		var got []string
		for _, it := range items {
			m := it.(map[string]any)
			got = append(got, string(m["ItemNo"].(json.Number))+"="+m["Quantity"].(string))
		}
		if len(got) != 2 || got[0] != "20=6.000" || got[1] != "30=1.000" {
			t.Errorf("lines after the PATCH: %v, want 20=6.000 and 30=1.000 (line 10 deleted)", got)
		}
		if !(after["modifiedAt"].(string) > before["modifiedAt"].(string)) {
			t.Errorf("modifiedAt %v, was %v: a PATCH of the lines alone stamps the order", after["modifiedAt"], before["modifiedAt"])
		}
	})

	t.Run("post and delete", func(t *testing.T) {
		k := captest.Key{"CompanyCode": "3000", "Customer": "C0009"}
		c, err := s.Customers.Post(ctx, map[string]any{"CompanyCode": "3000", "Customer": "C0009", "CustomerName": "Neu", "Rating": "-9223372036854775808"})
		if err != nil {
			t.Fatal(err)
		}
		if c["Rating"] != "-9223372036854775808" || c["ChangeCounter"] != json.Number("1") {
			t.Errorf("posted: Rating %v, ChangeCounter %v", c["Rating"], c["ChangeCounter"])
		}
		if err := s.Customers.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
		var he *captest.HTTPError
		if _, err := s.Customers.Get(ctx, k, ""); !errors.As(err, &he) || he.Status != 404 {
			t.Errorf("after the DELETE: err = %v, want a 404", err)
		}
	})
}
