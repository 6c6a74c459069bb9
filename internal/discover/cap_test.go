package discover_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/captest"
	"github.com/erpsync/erpsync/internal/discover"
	"github.com/erpsync/erpsync/internal/odata"
)

// TestCAP reads the live $metadata of the CAP test server's SalesService:
// the typed entities with their keys and types, modifiedAt the cursor,
// ChangeCounter the version, and the composition's lines a child of the
// orders (their own entity set commented out: no change time), through
// OData V4 and V2 alike.
func TestCAP(t *testing.T) {
	s := captest.Start(t, captest.Options{})
	// The same service through CAP's V2 adapter (EDMX 1.0, an Edm.DateTime
	// of sap:display-format "Date", an association to the lines) gives the
	// same file.
	for _, v := range captest.Versions {
		t.Run(v, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			root := s.SalesURL
			if v == odata.Version2 {
				root = captest.V2(root)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, root+"$metadata", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("GET $metadata: %d, %v", resp.StatusCode, err)
			}
			if edmx1 := strings.Contains(string(doc), `<edmx:Edmx Version="1.0"`); edmx1 != (v == odata.Version2) {
				t.Fatalf("%s: an EDMX 1.0 document: %v", root, edmx1)
			}
			// The URL the golden file holds, not the test server's port.
			out, err := discover.Config(doc, discover.Options{URL: "http://127.0.0.1:4004/odata/v4/sales/"})
			if err != nil {
				t.Fatal(err)
			}
			f := check(t, out)
			golden(t, "cap-sales.yaml", out)

			var names []string
			for _, e := range f.Entities {
				names = append(names, e.Name)
			}
			if !slices.Equal(names, []string{"customers", "sales_orders"}) {
				t.Fatalf("entities %v, want customers and sales_orders", names)
			}
			c, so := f.Entities[0], f.Entities[1]
			if c.Source != "Customers" || !slices.Equal(c.Key, []string{"company_code", "customer"}) || c.UpdatedAt != "modifiedAt" || c.Version != "ChangeCounter" {
				t.Errorf("customers: source %s, key %v, updated_at %s, version %s", c.Source, c.Key, c.UpdatedAt, c.Version)
			}
			types := map[string]string{}
			for _, col := range c.Columns {
				types[col.Name] = col.From + " " + col.Type
			}
			for name, want := range map[string]string{
				"company_code": "CompanyCode string(4)", "customer": "Customer string(10)", "customer_name": "CustomerName string(80)",
				"credit_limit": "CreditLimit decimal(15,2)", "is_blocked": "IsBlocked bool", "founded_on": "FoundedOn date",
				"rating": "Rating int64", "address_city": "Address_City string(40)", "created_at_erp": "createdAt datetime(6)",
			} {
				if types[name] != want {
					t.Errorf("customers.%s: %q, want %q", name, types[name], want)
				}
			}
			if so.Source != "SalesOrders" || !slices.Equal(so.Key, []string{"order_id"}) || so.UpdatedAt != "modifiedAt" || so.Version != "" {
				t.Errorf("sales_orders: source %s, key %v, updated_at %s, version %s", so.Source, so.Key, so.UpdatedAt, so.Version)
			}
			// Items is a composition (OnDelete Cascade): the orders' lines, keyed
			// by ItemNo within their order (up__OrderID holds the order's key).
			if len(so.Children) != 1 {
				t.Fatalf("sales_orders: children %+v, want items", so.Children)
			}
			items := so.Children[0]
			var cols []string
			for _, c := range items.Columns {
				cols = append(cols, c.Name+" "+c.From+" "+c.Type)
			}
			if items.Name != "items" || items.Table != "sales_orders_items" || items.From != "Items" || !slices.Equal(items.Key, []string{"item_no"}) ||
				strings.Join(cols, ", ") != "item_no ItemNo int32, material Material string(40), quantity Quantity decimal(13,3), net_amount NetAmount decimal(15,2)" {
				t.Errorf("sales_orders.items: %+v", items)
			}
			for _, want := range []string{"# SalesOrderItems: not synced as it is: no change timestamp"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("the output has no %q:\n%s", want, out)
				}
			}
		})
	}
}
