package capentity

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/captest"
	"github.com/erpsync/erpsync/internal/odata"
	"github.com/erpsync/erpsync/internal/proctest"
)

// mistakes is a file of SalesService entities with a mistake on each
// line the check names.
const mistakes = `erp:
  kind: odata
entities:
  - name: customers
    source: Customers
    key: [company, customer]
    updated_at: modifiedAt
    version: ChangeCounter
    columns:
      - {name: company,      from: CompanyCode,  type: string(4)}
      - {name: customer,     from: Customer,     type: string(10)}
      - {name: name,         from: CustomerName, type: string(40)}
      - {name: credit_limit, from: CreditLimit,  type: "decimal(14,2)", nullable: true}
      - {name: rating,       from: Rating,       type: int32, nullable: true}
      - {name: city,         from: Address.City, type: string(40), nullable: true}
      - {name: created,      from: createdAt,    type: datetime, nullable: true}
  - name: orders
    source: SalesOrderz
    key: [order_id]
    updated_at: modifiedAt
    columns:
      - {name: order_id, from: OrderID, type: string(10)}
`

// wantMistakes are the lines config check --online prints for mistakes
// at path: an error each but the warning of line 16.
func wantMistakes(path string) string {
	return strings.Join([]string{
		path + ":12: entity customers: column name string(40): from CustomerName, an Edm.String MaxLength 80: a value may be 80 characters, longer than the column's 40 (want string(80))",
		path + ":13: entity customers: column credit_limit decimal(14,2): from CreditLimit, an Edm.Decimal Precision 15 Scale 2: a value may have 13 digits before the point and 2 after, the column holds 12 and 2 (want decimal(15,2))",
		path + ":14: entity customers: column rating int32: from Rating, an Edm.Int64: int32 cannot hold its values (want int64)",
		path + ":15: entity customers: column city: from Address.City: the entity type SalesService.Customers has no property Address.City",
		path + ":16: warning: entity customers: column created datetime: from createdAt, an Edm.DateTimeOffset Precision 7: a value may have 7 fraction digits, the column keeps 3: a record whose value has a non-zero digit past the 3rd is quarantined, not cut",
		path + ":17: entity orders: entity set SalesOrderz: the service has no such entity set",
	}, "\n") + "\n"
}

// TestConfigCheckOnline runs erpsync config check --online with a file of
// mistakes against CAP's SalesService, through V4 and V2 (the $metadata
// of the service root with ?sap-client=100): one line each, FILE:LINE,
// exit 2; the same file corrected passes with exit 0 (the warning
// stays); an ERP that cannot be reached is exit 2 with a line that says
// so.
func TestConfigCheckOnline(t *testing.T) {
	t.Parallel()
	srv := captest.Start(t, captest.Options{Auth: true})
	for _, v := range captest.Versions {
		t.Run(v, func(t *testing.T) {
			e := proctest.New(t, bin, erpmock.Options{})
			e.ERPURL = srv.SalesURL
			if v == odata.Version2 {
				e.ERPURL = captest.V2(srv.SalesURL) + "?sap-client=100"
			}
			e.Extra = append(e.Extra, "ERPSYNC_ERP_USERNAME="+srv.User, "ERPSYNC_ERP_PASSWORD="+srv.Password)
			dir := t.TempDir()
			path := filepath.Join(dir, "mistakes.yaml")
			fixed := strings.NewReplacer("string(40)}", "string(80)}", "decimal(14,2)", "decimal(15,2)", "int32", "int64",
				"Address.City", "Address_City", "SalesOrderz", "SalesOrders").Replace(mistakes)
			good := filepath.Join(dir, "good.yaml")
			for p, text := range map[string]string{path: mistakes, good: fixed} {
				if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			ctx := context.Background()
			r := e.Run(ctx, "config", "check", "--online", "--config", path)
			_, lines, _ := strings.Cut(r.Stdout, "SalesOrderz, key order_id, columns order_id string(10)\n")
			if r.Code != 2 || lines != wantMistakes(path) || !strings.Contains(r.Stderr, path+": 5 mistakes against the service's $metadata") {
				t.Errorf("config check --online of the mistakes: exit %d, want 2; lines:\n%s\nwant:\n%s\nstderr: %s", r.Code, lines, wantMistakes(path), r.Stderr)
			}
			r = e.Run(ctx, "config", "check", "--online", "--config", good)
			if want := good + ":16: warning: entity customers: column created datetime"; r.Code != 0 || !strings.Contains(r.Stdout, want) || strings.Count(r.Stdout, good+":") != 1 {
				t.Errorf("config check --online of the file corrected: exit %d, want 0 and the warning alone: %s", r.Code, r.Out())
			}
			r = e.Run(ctx, "config", "check", "--online", "--config", good, "--erp-url", "http://127.0.0.1:1/odata/v4/sales/", "--erp-retries", "0")
			if want := "erpsync: " + good + ": cannot read the ERP's http://127.0.0.1:1/odata/v4/sales/$metadata: "; r.Code != 2 || !strings.HasPrefix(r.Stderr, want) {
				t.Errorf("config check --online of an ERP that is down: exit %d, want 2 and %q: %s", r.Code, want, r.Stderr)
			}
		})
	}
}
