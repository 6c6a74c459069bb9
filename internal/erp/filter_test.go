package erp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/erp"
)

// Config.Filter goes with every request, pages and counts, of the spec's
// API and of a shaped one; a filter named like a parameter erpsync sends
// is refused.
func TestFilterSentWithEveryRequest(t *testing.T) {
	m := erpmock.New(erpmock.Options{Records: 30, Seed: 1, Tenants: []string{"1000", "2000"}})
	var mu sync.Mutex
	var queries []url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.Query())
		mu.Unlock()
		m.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ctx := context.Background()
	shaped := erp.DefaultShape()
	shaped.Params.Since = "changedAfter"
	for _, shape := range []*erp.Shape{nil, &shaped} {
		queries = nil
		c, err := erp.New(erp.Config{BaseURL: srv.URL, Shape: shape, Filter: url.Values{"tenant": {"2000"}}})
		if err != nil {
			t.Fatal(err)
		}
		n, err := c.Count(ctx, time.Time{}, time.Time{})
		if err != nil || n != 15 {
			t.Fatalf("count %d, %v: want tenant 2000's 15", n, err)
		}
		var got int
		for q := (erp.Query{Limit: 4}); ; {
			p, err := c.Page(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			got += len(p.Records)
			if p.NextCursor == "" {
				break
			}
			q.Cursor = p.NextCursor
		}
		if got != 15 {
			t.Errorf("%d records, want tenant 2000's 15", got)
		}
		for _, q := range queries {
			if q.Get("tenant") != "2000" {
				t.Errorf("a request without the filter: %v", q)
			}
		}
	}
	for _, name := range []string{"limit", "cursor", "updated_since"} {
		if _, err := erp.New(erp.Config{BaseURL: srv.URL, Filter: url.Values{name: {"x"}}}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("filter %s: %v, want refused", name, err)
		}
	}
	if _, err := erp.New(erp.Config{BaseURL: srv.URL, Shape: &shaped, Filter: url.Values{"changedAfter": {"x"}}}); err == nil {
		t.Errorf("filter changedAfter of a shape that sends it: accepted")
	}
}
