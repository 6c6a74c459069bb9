package odata_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

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
