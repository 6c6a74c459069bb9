package odata_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/odata"
)

const metadataDoc = `<?xml version="1.0" encoding="utf-8"?>
<edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
 <edmx:DataServices>
  <Schema Namespace="Microsoft.NAV" Alias="NAV" xmlns="http://docs.oasis-open.org/odata/ns/edm">
   <EntityType Name="entity"><Property Name="systemModifiedAt" Type="Edm.DateTimeOffset"/></EntityType>
   <EntityType Name="membership" BaseType="NAV.entity">
    <Key><PropertyRef Name="id"/></Key>
    <Property Name="id" Type="%s" Nullable="false"/>
    <Property Name="number" Type="Edm.String"/>
   </EntityType>
   <EntityContainer Name="NAV">
    <EntitySet Name="memberships" EntityType="Microsoft.NAV.membership"/>
   </EntityContainer>
  </Schema>
 </edmx:DataServices>
</edmx:Edmx>`

// TestGuidKey pages an entity set keyed by id: a GUID-shaped key makes the
// source read $metadata once, from the nearest path above the entity set
// that serves it, and write the keyset literal unquoted for an Edm.Guid,
// quoted for an Edm.String.
func TestGuidKey(t *testing.T) {
	const bcMap = "erp_id=id,member_id=number,product_code=itemNumber,status=status,starts_at=startingDate,ends_at=endingDate,updated_at=systemModifiedAt,version="
	for _, c := range []struct{ typ, path, want string }{
		{"Edm.Guid", "/api/v1.0/memberships", "id gt 0f8fad5b-d9cb-469f-a165-70867728950e))"},
		{"Edm.String", "/api/v1.0/memberships", "id gt '0f8fad5b-d9cb-469f-a165-70867728950e'))"},
		// A navigation path: the set is not an entity set of the document.
		{"Edm.Guid", "/api/v1.0/companies(42)/memberships", "id gt 0f8fad5b-d9cb-469f-a165-70867728950e))"},
	} {
		t.Run(c.typ+c.path, func(t *testing.T) {
			var mu sync.Mutex
			var filters []string
			metadata := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				switch r.URL.Path {
				case "/api/v1.0/$metadata":
					metadata++
					w.Header().Set("Content-Type", "application/xml")
					fmt.Fprintf(w, metadataDoc, c.typ)
				case c.path:
					filters = append(filters, r.URL.Query().Get("$filter"))
					if len(filters) > 1 {
						fmt.Fprint(w, `{"value":[]}`)
						return
					}
					fmt.Fprint(w, `{"value":[{"id":"0f8fad5b-d9cb-469f-a165-70867728950e","number":"M1","itemNumber":"GYM","status":"ACTIVE",`+
						`"startingDate":"2024-01-01","endingDate":null,"systemModifiedAt":"2025-01-01T10:00:00.1234567Z"}]}`)
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			m, err := erp.ParseMapping(bcMap, "")
			if err != nil {
				t.Fatal(err)
			}
			s, err := odata.New(odata.Config{URL: srv.URL + c.path, Mapping: m})
			if err != nil {
				t.Fatal(err)
			}
			recs, pages := pageAll(t, s, erp.Query{})
			if len(recs) != 1 || pages != 2 {
				t.Fatalf("%d records in %d pages", len(recs), pages)
			}
			if !strings.HasSuffix(filters[1], c.want) || !strings.Contains(filters[1], "systemModifiedAt eq 2025-01-01T10:00:00.1234567Z") {
				t.Errorf("filter %q, want it to end with %q", filters[1], c.want)
			}
			if _, err := s.Page(context.Background(), erp.Query{}); err != nil {
				t.Fatal(err)
			}
			if metadata != 1 {
				t.Errorf("$metadata read %d times, want once", metadata)
			}
		})
	}
}

// guidSet serves an entity set keyed by an Edm.Guid id, two rows a page
// whatever $top asks, the way Business Central answers the keyset filter:
// a GUID compared with a quoted string is a 400. Its $metadata fails, in
// the way fail names, while down is set.
type guidSet struct {
	fail     string // "503", "truncated", "maintenance page" or "connection reset"
	mu       sync.Mutex
	down     bool
	rows     []row
	metadata int      // $metadata requests
	filters  []string // the $filter of each entity set request
}

var guidKeysetRe = regexp.MustCompile(`\(systemModifiedAt gt (\S+) or \(systemModifiedAt eq (\S+) and id gt ('?)([0-9a-f-]+)'?\)\)`)

func (g *guidSet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch r.URL.Path {
	case "/api/v1.0/$metadata":
		g.metadata++
		if !g.down {
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprintf(w, metadataDoc, "Edm.Guid")
			return
		}
		switch g.fail {
		case "503":
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"code":"503","message":"Service Unavailable"}}`)
		case "truncated":
			w.Header().Set("Content-Type", "application/xml")
			doc := fmt.Sprintf(metadataDoc, "Edm.Guid")
			fmt.Fprint(w, doc[:len(doc)/2])
		case "maintenance page":
			// A proxy's page, served 200, that is no CSDL document.
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<html><body>Down for maintenance</body></html>`)
		case "connection reset":
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}
	case "/api/v1.0/memberships":
		filter := r.URL.Query().Get("$filter")
		g.filters = append(g.filters, filter)
		rows := g.rows
		if m := guidKeysetRe.FindStringSubmatch(filter); m != nil {
			if m[3] != "" {
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, `{"error":{"code":"BadRequest","message":"Incompatible types Edm.Guid and Edm.String"}}`)
				return
			}
			at, _ := time.Parse(time.RFC3339Nano, m[1])
			rows = slices.DeleteFunc(slices.Clone(rows), func(x row) bool {
				return !(x.mod.After(at) || x.mod.Equal(at) && x.id > m[4])
			})
		}
		vals := []map[string]any{}
		for _, x := range rows[:min(2, len(rows))] {
			vals = append(vals, map[string]any{"id": x.id, "number": "N" + x.id[:8], "itemNumber": "GYM", "status": "ACTIVE",
				"startingDate": "2024-01-01", "endingDate": nil, "systemModifiedAt": x.mod.Format(time.RFC3339Nano)})
		}
		json.NewEncoder(w).Encode(map[string]any{"value": vals})
	default:
		http.NotFound(w, r)
	}
}

// TestGuidKeyAfterMetadataFails reads an Edm.Guid-keyed entity set while
// its $metadata fails, in each way a read can fail: the page that needs
// the key's type fails with an error naming $metadata, and sends no
// guessed literal; once $metadata answers, the same page and every later
// one write the GUIDs unquoted, and the type is read once more, not once
// per page.
func TestGuidKeyAfterMetadataFails(t *testing.T) {
	const bcMap = "erp_id=id,member_id=number,product_code=itemNumber,status=status,starts_at=startingDate,ends_at=endingDate,updated_at=systemModifiedAt,version="
	for _, fail := range []string{"503", "truncated", "maintenance page", "connection reset"} {
		t.Run(fail, func(t *testing.T) {
			g := &guidSet{fail: fail, down: true}
			for i := range 7 {
				// Pairs share a systemModifiedAt: the key decides.
				g.rows = append(g.rows, row{id: fmt.Sprintf("%08x-d9cb-469f-a165-%012x", (i*7919)%10000, i), mod: base.Add(time.Duration(i/2) * time.Second)})
			}
			slices.SortFunc(g.rows, func(a, b row) int {
				if c := a.mod.Compare(b.mod); c != 0 {
					return c
				}
				return strings.Compare(a.id, b.id)
			})
			srv := httptest.NewServer(g)
			defer srv.Close()
			m, err := erp.ParseMapping(bcMap, "")
			if err != nil {
				t.Fatal(err)
			}
			s, err := odata.New(odata.Config{URL: srv.URL + "/api/v1.0/memberships", Mapping: m,
				HTTP: erp.Config{MaxRetries: 1, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			first, err := s.Page(ctx, erp.Query{Limit: 2})
			if err != nil || len(first.Records) != 2 {
				t.Fatalf("first page: %v", err)
			}
			// Two pages while $metadata fails, as two ticks of a schedule.
			for range 2 {
				_, err = s.Page(ctx, erp.Query{Limit: 2, Cursor: first.NextCursor})
				if err == nil || !strings.Contains(err.Error(), "$metadata") {
					t.Errorf("the second page while $metadata fails: %v, want an error naming $metadata", err)
				}
			}
			g.mu.Lock()
			sent, failedReads := len(g.filters), g.metadata
			g.down = false
			g.mu.Unlock()
			if sent != 1 {
				t.Errorf("%d entity set requests while $metadata failed, want 1 (no page with a guessed literal)", sent)
			}
			t.Logf("second page: %v", err)

			rest, _ := pageAll(t, s, erp.Query{Limit: 2, Cursor: first.NextCursor})
			if got := len(first.Records) + len(rest); got != len(g.rows) {
				t.Errorf("%d records after $metadata recovered, want %d", got, len(g.rows))
			}
			// Another pass, from the start.
			all, _ := pageAll(t, s, erp.Query{Limit: 2})
			if len(all) != len(g.rows) {
				t.Errorf("second pass: %d records, want %d", len(all), len(g.rows))
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			keyset := 0
			for _, f := range g.filters {
				if strings.Contains(f, "id gt") {
					keyset++
					if !guidKeysetRe.MatchString(f) || strings.Contains(f, "'") {
						t.Errorf("filter %q: want the GUID unquoted", f)
					}
				}
			}
			if keyset < 6 {
				t.Errorf("%d keyset filters in %q, want one a page after the first of each pass", keyset, g.filters)
			}
			if n := g.metadata - failedReads; n != 1 {
				t.Errorf("$metadata read %d times after it recovered, want once", n)
			}
		})
	}
}
