package capentity

import (
	"context"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/captest"
)

// TestSourceWhoseConstantCannotBeFiltered: two sources of the entity set
// Customers whose constant company is read from a property CAP's
// $metadata does not declare (CompanyKey): neither could be filtered on
// it, so each would read both companies' records and store them under its
// own. Every command that reads the ERP refuses the file, exit 2, with
// the file's line of the source, the property and the entity set, and
// writes no row.
func TestSourceWhoseConstantCannotBeFiltered(t *testing.T) {
	t.Parallel()
	e := setup(t, captest.Options{PageLimit: 20})
	e.post("1000", 0, 5)
	e.post("2000", 0, 5)
	file := e.write("unfiltered.yaml", strings.Replace(companies, "{name: company,      from: CompanyCode,", "{name: company,      from: CompanyKey,", 1))
	e.use(file)
	want := file + ":6: entity customers: odata: the source's constant cannot be filtered on: source Customers sets company to \"1000\" and shares the entity set with other sources, but $metadata declares no property CompanyKey on Customers"
	for _, args := range [][]string{{"run"}, {"backfill", "--since", "2000-01-01T00:00:00Z"}, {"verify"}, {"reconcile"}} {
		r := e.Run(context.Background(), e.cfg(args...)...)
		if r.Code != 2 || !strings.Contains(r.Stderr, want) {
			t.Errorf("%v: exit %d, want 2 and %q:\n%s", args, r.Code, want, r.Out())
		}
	}
	if n := e.Count("SELECT COUNT(*) FROM %s", "customers"); n != 0 {
		t.Errorf("%d rows written", n)
	}
}
