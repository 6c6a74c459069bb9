package erpmock_test

import (
	"encoding/json"
	"net/url"
	"strconv"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
)

// With Tenants, tenant=T serves T's records only, on the pages and the
// counts of the spec's and the typed face, each item carrying its tenant;
// a tenant not listed gets none, and another parameter filters nothing.
func TestTenants(t *testing.T) {
	tenants := []string{"A/B", "A", "x y"}
	_, base := setup(t, erpmock.Options{Records: 101, Seed: 3, Tenants: tenants})
	count := func(path string, q url.Values) int {
		_, body := get(t, base+path+"/count?"+q.Encode())
		var c struct{ Count int }
		if err := json.Unmarshal(body, &c); err != nil {
			t.Fatalf("count %s: %v", body, err)
		}
		return c.Count
	}
	read := func(path string, q url.Values) map[string]string {
		got := map[string]string{} // erp_id or region+no: tenant
		q.Set("limit", "7")
		for {
			p := fetchRaw(t, base+path+"?"+q.Encode())
			for _, raw := range p.Data {
				var it struct {
					ErpID  string `json:"erp_id"`
					Region string `json:"region"`
					No     int64  `json:"no"`
					Tenant string `json:"tenant"`
				}
				if err := json.Unmarshal(raw, &it); err != nil {
					t.Fatal(err)
				}
				id := it.ErpID + it.Region + strconv.FormatInt(it.No, 10)
				got[id] = it.Tenant
			}
			if p.NextCursor == nil || *p.NextCursor == "" {
				return got
			}
			q.Set("cursor", *p.NextCursor)
		}
	}
	for _, path := range []string{"/api/v1/memberships", erpmock.ContractsPath} {
		all := read(path, url.Values{})
		if len(all) != 101 || count(path, url.Values{}) != 101 {
			t.Fatalf("%s without tenant: %d records, count %d, want 101", path, len(all), count(path, url.Values{}))
		}
		sum := 0
		for i, tn := range tenants {
			q := url.Values{"tenant": {tn}}
			got := read(path, q)
			want := 101/3 + map[bool]int{true: 1}[i < 101%3]
			if len(got) != want || count(path, url.Values{"tenant": {tn}}) != want {
				t.Errorf("%s tenant %q: %d records, count %d, want %d", path, tn, len(got), count(path, url.Values{"tenant": {tn}}), want)
			}
			for id, g := range got {
				if g != tn || all[id] != tn {
					t.Errorf("%s tenant %q served %s of tenant %q", path, tn, id, g)
				}
			}
			sum += len(got)
		}
		if sum != 101 {
			t.Errorf("%s: the tenants hold %d records, want 101", path, sum)
		}
		if n := len(read(path, url.Values{"tenant": {"B"}})); n != 0 || count(path, url.Values{"tenant": {"B"}}) != 0 {
			t.Errorf("%s: tenant B, not listed: %d records", path, n)
		}
		if n := len(read(path, url.Values{"company": {"A"}})); n != 101 {
			t.Errorf("%s: company=A, a parameter the mock does not know: %d records, want all 101", path, n)
		}
	}
}
