package odata_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/odata"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	capMap    = "erp_id=MembershipID,member_id=BusinessPartner,product_code=Product,status=LifecycleStatus,starts_at=ValidFrom,ends_at=ValidTo,updated_at=LastChangeDateTime,version="
	capStatus = "active=ACTIVE,suspended=SUSPENDED,cancelled=CANCELLED,expired=EXPIRED"
)

var base = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// row is one entity of the fake entity set.
type row struct {
	id  string
	mod time.Time
	raw map[string]any // overrides of the JSON served
}

func (r row) json() map[string]any {
	m := map[string]any{"MembershipID": r.id, "BusinessPartner": "BP" + r.id, "Product": "GYM", "LifecycleStatus": "active",
		"ValidFrom": "2024-03-01", "ValidTo": nil, "LastChangeDateTime": r.mod.Format("2006-01-02T15:04:05.000Z")}
	for k, v := range r.raw {
		m[k] = v
	}
	return m
}

// fakeSet serves rows the way SAP CAP does for the queries the source
// sends: the keyset $filter, $orderby LastChangeDateTime,MembershipID,
// $top capped at limit with a nextLink, and offset next links.
type fakeSet struct {
	t     *testing.T
	limit int
	mu    sync.Mutex
	rows  []row
	reqs  []*http.Request
	// hide, when set, takes rows out of a page after it was cut to size,
	// as a server that applies row-level security late does (a page can
	// come back empty with a next link), and the next links keep the
	// request's query.
	hide func(row) bool
}

var (
	geRe     = regexp.MustCompile(`LastChangeDateTime ge (\S+)`)
	ltRe     = regexp.MustCompile(`LastChangeDateTime lt (\S+)`)
	keysetRe = regexp.MustCompile(`\(LastChangeDateTime gt (\S+) or \(LastChangeDateTime eq (\S+) and MembershipID gt '((?:[^']|'')*)'\)\)`)
)

func (f *fakeSet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, r)
	if strings.Contains(r.URL.RawQuery, "+") || strings.HasSuffix(r.URL.RawQuery, "&") {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"code":"400","message":"Malformed query"}}`)
		return
	}
	q := r.URL.Query()
	rows := slices.Clone(f.rows)
	slices.SortFunc(rows, func(a, b row) int {
		if c := a.mod.Compare(b.mod); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	filter := q.Get("$filter")
	parse := func(s string) time.Time {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			f.t.Errorf("literal %q: %v", s, err)
		}
		return t
	}
	rows = slices.DeleteFunc(rows, func(x row) bool {
		if m := geRe.FindStringSubmatch(filter); m != nil && x.mod.Before(parse(m[1])) {
			return true
		}
		if m := ltRe.FindStringSubmatch(filter); m != nil && !x.mod.Before(parse(m[1])) {
			return true
		}
		if m := keysetRe.FindStringSubmatch(filter); m != nil {
			t, k := parse(m[1]), strings.ReplaceAll(m[3], "''", "'")
			return !(x.mod.After(t) || x.mod.Equal(t) && x.id > k)
		}
		return false
	})
	if strings.HasSuffix(r.URL.Path, "/$count") {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, len(rows))
		return
	}
	skip, _ := strconv.Atoi(q.Get("$skiptoken"))
	rows = rows[min(skip, len(rows)):]
	n := f.limit
	if top := q.Get("$top"); top != "" {
		n, _ = strconv.Atoi(top)
		n = min(n, f.limit)
	}
	body := map[string]any{"@odata.context": "$metadata#Memberships"}
	if len(rows) > n {
		rows = rows[:n]
		body["@odata.nextLink"] = "Memberships?$skiptoken=" + strconv.Itoa(skip+n)
		if f.hide != nil {
			q.Set("$skiptoken", strconv.Itoa(skip+n))
			body["@odata.nextLink"] = "Memberships?" + strings.ReplaceAll(q.Encode(), "+", "%20")
		}
	}
	if f.hide != nil {
		rows = slices.DeleteFunc(rows, f.hide)
	}
	vals := []map[string]any{}
	for _, x := range rows {
		vals = append(vals, x.json())
	}
	body["value"] = vals
	json.NewEncoder(w).Encode(body)
}

func (f *fakeSet) requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

// setup starts a fake entity set of rows and a source of it.
func setup(t *testing.T, limit int, rows []row, cfg odata.Config) (*fakeSet, *odata.Source) {
	t.Helper()
	f := &fakeSet{t: t, limit: limit, rows: rows}
	srv := httptest.NewServer(http.StripPrefix("/odata/v4/erp", f))
	t.Cleanup(srv.Close)
	cfg.URL = srv.URL + "/odata/v4/erp/Memberships"
	if cfg.Mapping == nil {
		m, err := erp.ParseMapping(capMap, capStatus)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Mapping = m
	}
	cfg.HTTP.MinBackoff, cfg.HTTP.MaxBackoff = time.Millisecond, 2*time.Millisecond
	s, err := odata.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f, s
}

// rowsOf returns n rows in groups of 3 sharing a LastChangeDateTime, ids
// not in time order.
func rowsOf(n int) []row {
	var rows []row
	for i := range n {
		rows = append(rows, row{id: fmt.Sprintf("M%04d", (i*7919)%10000), mod: base.Add(time.Duration(i/3) * time.Millisecond)})
	}
	return rows
}

// pageAll reads every page of q and returns the records and the pages.
func pageAll(t *testing.T, s *odata.Source, q erp.Query) ([]erp.Record, int) {
	t.Helper()
	var all []erp.Record
	pages := 0
	for {
		p, err := s.Page(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		all = append(all, p.Records...)
		if p.NextCursor == "" {
			return all, pages
		}
		q.Cursor = p.NextCursor
		if pages > 1000 {
			t.Fatal("no end")
		}
	}
}

func ids(recs []erp.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.ErpID)
	}
	slices.Sort(out)
	return out
}

func TestKeysetPaging(t *testing.T) {
	rows := rowsOf(25)
	// The server caps pages at 7 rows although $top asks for 10: a short
	// page is not the end.
	f, s := setup(t, 7, rows, odata.Config{})
	recs, pages := pageAll(t, s, erp.Query{Limit: 10})
	var want []string
	for _, r := range rows {
		want = append(want, r.id)
	}
	slices.Sort(want)
	if got := ids(recs); !slices.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	if pages != 5 { // 7+7+7+4, then the empty page
		t.Errorf("%d pages, want 5", pages)
	}
	for i := 1; i < len(recs); i++ {
		a, b := recs[i-1], recs[i]
		if b.UpdatedAt.Before(a.UpdatedAt) || b.UpdatedAt.Equal(a.UpdatedAt) && b.ErpID < a.ErpID {
			t.Fatalf("out of order at %d: %v %v", i, a, b)
		}
	}
	r := recs[0]
	if r.Status != "ACTIVE" || r.Version != r.UpdatedAt.UnixMicro() || !r.StartsAt.Equal(time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)) || r.EndsAt != nil {
		t.Errorf("record %+v", r)
	}

	// A window: [base+2ms, base+5ms) holds rows 6..14.
	f.mu.Lock()
	f.reqs = nil
	f.mu.Unlock()
	recs, _ = pageAll(t, s, erp.Query{Since: base.Add(2 * time.Millisecond), Until: base.Add(5 * time.Millisecond), Limit: 4})
	if len(recs) != 9 {
		t.Errorf("%d records in the window, want 9", len(recs))
	}
	first := f.requests()[0].URL
	if first.Path != "/Memberships" {
		t.Errorf("path %s", first.Path)
	}
	// The exact query: %20 for spaces, no '+', no trailing '&', $select of
	// the mapped properties, the window, the order and $top.
	wantQ := "$select=MembershipID%2CBusinessPartner%2CProduct%2CLifecycleStatus%2CValidFrom%2CValidTo%2CLastChangeDateTime" +
		"&$filter=LastChangeDateTime%20ge%202025-01-01T00%3A00%3A00.002Z%20and%20LastChangeDateTime%20lt%202025-01-01T00%3A00%3A00.005Z" +
		"&$orderby=LastChangeDateTime%2CMembershipID&$top=4"
	if first.RawQuery != wantQ {
		t.Errorf("query\n%s\nwant\n%s", first.RawQuery, wantQ)
	}
	second := f.requests()[1].URL.Query().Get("$filter")
	if !keysetRe.MatchString(second) || !strings.HasPrefix(second, "LastChangeDateTime ge 2025-01-01T00:00:00.002Z and LastChangeDateTime lt 2025-01-01T00:00:00.005Z and (") {
		t.Errorf("second filter %q", second)
	}
}

func TestKeysetEscapesKeys(t *testing.T) {
	// Keys with a quote and a space are invalid erp_ids (quarantined), yet
	// the cursor must move past them with a well-formed literal.
	rows := []row{
		{id: "A'1", mod: base}, {id: "A'2 b", mod: base}, {id: "B1", mod: base}, {id: "C+1", mod: base.Add(time.Millisecond)}, {id: "D1", mod: base.Add(time.Millisecond)},
	}
	f, s := setup(t, 2, rows, odata.Config{})
	q := erp.Query{Limit: 2}
	var got []string
	for {
		p, err := s.Page(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Records {
			got = append(got, r.ErpID)
		}
		for _, inv := range p.Invalid {
			got = append(got, "invalid:"+inv.ErpID)
			if !strings.Contains(inv.Reason, "erp_id (MembershipID): character") {
				t.Errorf("reason %q", inv.Reason)
			}
		}
		if p.NextCursor == "" {
			break
		}
		q.Cursor = p.NextCursor
	}
	if want := []string{"invalid:A'1", "invalid:A'2 b", "B1", "invalid:C+1", "D1"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	var filters []string
	for _, r := range f.requests() {
		filters = append(filters, r.URL.Query().Get("$filter"))
		if strings.Contains(r.URL.RawQuery, "+") {
			t.Errorf("a '+' in %s", r.URL.RawQuery)
		}
	}
	if want := "(LastChangeDateTime gt 2025-01-01T00:00:00Z or (LastChangeDateTime eq 2025-01-01T00:00:00Z and MembershipID gt 'A''2 b'))"; filters[1] != want {
		t.Errorf("filter %q, want %q", filters[1], want)
	}
}

func TestServerPaging(t *testing.T) {
	rows := rowsOf(17)
	f, s := setup(t, 5, rows, odata.Config{Paging: odata.PagingServer})
	recs, pages := pageAll(t, s, erp.Query{Limit: 5, Since: base})
	if len(recs) != 17 || pages != 4 {
		t.Fatalf("%d records in %d pages, want 17 in 4", len(recs), pages)
	}
	reqs := f.requests()
	if q := reqs[0].URL.Query(); q.Has("$top") || reqs[0].Header.Get("Prefer") != "odata.maxpagesize=5" || q.Get("$filter") != "LastChangeDateTime ge 2025-01-01T00:00:00Z" {
		t.Errorf("first request %s, Prefer %q", reqs[0].URL, reqs[0].Header.Get("Prefer"))
	}
	// The relative next link resolved against the request URL.
	if u := reqs[1].URL; u.Path != "/Memberships" || u.RawQuery != "$skiptoken=5" {
		t.Errorf("second request %s", u)
	}
	if _, err := odata.New(odata.Config{URL: "http://x/Memberships", Paging: "offset"}); err == nil {
		t.Error("paging offset accepted")
	}
}

// TestServerPagingSkips shows the risk of server paging against an offset:
// a record that changes between two pages moves to the end, every later
// row moves back by one, and the row at the boundary is never served.
// Keyset paging serves every record.
func TestServerPagingSkips(t *testing.T) {
	for _, paging := range []string{odata.PagingServer, odata.PagingKeyset} {
		t.Run(paging, func(t *testing.T) {
			rows := rowsOf(10)
			f, s := setup(t, 4, rows, odata.Config{Paging: paging})
			p, err := s.Page(context.Background(), erp.Query{Limit: 4})
			if err != nil {
				t.Fatal(err)
			}
			seen := ids(p.Records)
			// The first record changes now.
			f.mu.Lock()
			for i := range f.rows {
				if f.rows[i].id == p.Records[0].ErpID {
					f.rows[i].mod = base.Add(time.Hour)
				}
			}
			f.mu.Unlock()
			rest, _ := pageAll(t, s, erp.Query{Limit: 4, Cursor: p.NextCursor})
			seen = append(seen, ids(rest)...)
			slices.Sort(seen)
			seen = slices.Compact(seen)
			switch {
			case paging == odata.PagingKeyset && len(seen) != 10:
				t.Errorf("keyset: %d distinct records, want 10", len(seen))
			case paging == odata.PagingServer && len(seen) != 9:
				t.Errorf("server paging over an offset: %d distinct records, want 9 (one skipped)", len(seen))
			}
		})
	}
}

func TestCount(t *testing.T) {
	f, s := setup(t, 5, rowsOf(30), odata.Config{})
	n, err := s.Count(context.Background(), time.Time{}, time.Time{})
	if err != nil || n != 30 {
		t.Fatalf("%d %v", n, err)
	}
	n, err = s.Count(context.Background(), base.Add(time.Millisecond), base.Add(3*time.Millisecond))
	if err != nil || n != 6 {
		t.Fatalf("%d %v, want 6", n, err)
	}
	r := f.requests()[1]
	if r.URL.Path != "/Memberships/$count" || r.Header.Get("Accept") != "text/plain" || strings.Contains(r.URL.RawQuery, "+") {
		t.Errorf("count request %s, Accept %q", r.URL, r.Header.Get("Accept"))
	}
}

func TestErrorsAndServedAt(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls[r.URL.Path]++
		n := calls[r.URL.Path]
		mu.Unlock()
		switch r.URL.Path {
		case "/Bad":
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"code":"400","message":"Property 'Nope' not found in type 'ErpService.Memberships'"}}`)
		case "/Locked/$count":
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"code":"401","message":"Unauthorized"}}`)
		case "/Flaky":
			if n == 1 {
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Date", "Wed, 01 Jan 2025 10:00:00 GMT")
			fmt.Fprint(w, `{"value":[]}`)
		case "/NoValue":
			fmt.Fprint(w, `{"error":"x"}`)
		case "/Stuck":
			// A server that ignores the keyset filter.
			fmt.Fprint(w, `{"value":[{"MembershipID":"M1","BusinessPartner":"B","Product":"P","LifecycleStatus":"active","ValidFrom":"2024-01-01","LastChangeDateTime":"2025-01-01T00:00:00Z"}]}`)
		case "/Unreadable":
			fmt.Fprint(w, `{"value":[{"MembershipID":7}]}`)
		}
	}))
	defer srv.Close()
	m, _ := erp.ParseMapping(capMap, capStatus)
	src := func(set string) *odata.Source {
		s, err := odata.New(odata.Config{URL: srv.URL + "/" + set, Mapping: m, HTTP: erp.Config{MaxRetries: 2, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := context.Background()
	_, err := src("Bad").Page(ctx, erp.Query{})
	if !errors.Is(err, erp.ErrBadRequest) || err.Error() != "erp: bad request: 400: Property 'Nope' not found in type 'ErpService.Memberships'" || calls["/Bad"] != 1 {
		t.Errorf("%v after %d calls", err, calls["/Bad"])
	}
	if _, err := src("Locked").Count(ctx, time.Time{}, time.Time{}); !errors.Is(err, erp.ErrUnauthorized) || calls["/Locked/$count"] != 1 {
		t.Errorf("%v after %d calls", err, calls["/Locked/$count"])
	}
	s := src("Flaky")
	p, err := s.Page(ctx, erp.Query{})
	if err != nil || p.NextCursor != "" || !p.ServedAt.Equal(time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)) || s.Stats() != (erp.Stats{Requests: 2, Retries: 1}) {
		t.Errorf("%v %+v %+v", err, p, s.Stats())
	}
	if _, err := src("NoValue").Page(ctx, erp.Query{}); err == nil || !strings.Contains(err.Error(), "no value array") {
		t.Errorf("%v", err)
	}
	stuck := src("Stuck")
	p, err = stuck.Page(ctx, erp.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stuck.Page(ctx, erp.Query{Cursor: p.NextCursor}); err == nil || !strings.Contains(err.Error(), "ends where it started") {
		t.Errorf("%v, want the stuck cursor found", err)
	}
	if _, err := src("Unreadable").Page(ctx, erp.Query{}); err == nil || !strings.Contains(err.Error(), "keyset paging cannot go on") {
		t.Errorf("%v", err)
	}
	// Neither is retried: they do not heal.
	if calls["/Stuck"] != 2 || calls["/Unreadable"] != 1 {
		t.Errorf("%d requests to /Stuck, %d to /Unreadable; want 2 and 1", calls["/Stuck"], calls["/Unreadable"])
	}
	if _, err := stuck.Page(ctx, erp.Query{Cursor: "garbage!"}); !errors.Is(err, erp.ErrBadRequest) {
		t.Errorf("%v", err)
	}
}

// TestEmptyPageWithNextLink reads a feed in which a server hides rows from
// a page after it cut the page to size: pages in the middle come back
// empty, each with an @odata.nextLink. Neither paging ends the pass there:
// it follows the link and reads every visible record.
func TestEmptyPageWithNextLink(t *testing.T) {
	for _, paging := range []string{odata.PagingKeyset, odata.PagingServer} {
		t.Run(paging, func(t *testing.T) {
			rows := rowsOf(25)
			hidden := map[string]bool{}
			var want []string
			for i, r := range rows {
				if i >= 5 && i < 15 { // the second and third pages of 5
					hidden[r.id] = true
					continue
				}
				want = append(want, r.id)
			}
			slices.Sort(want)
			f, s := setup(t, 5, rows, odata.Config{Paging: paging})
			f.hide = func(r row) bool { return hidden[r.id] }
			recs, _ := pageAll(t, s, erp.Query{Limit: 5})
			if got := ids(recs); !slices.Equal(got, want) {
				t.Errorf("%d records, want %d: %v", len(got), len(want), got)
			}
		})
	}
}

// TestEndlessEmptyPages: a server that answers page after page with no
// item and a next link fails the pass after 100 of them in a row, with an
// error that says so, under either paging.
func TestEndlessEmptyPages(t *testing.T) {
	for _, paging := range []string{odata.PagingKeyset, odata.PagingServer} {
		t.Run(paging, func(t *testing.T) {
			var mu sync.Mutex
			served := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				served++
				if served == 1 {
					fmt.Fprint(w, `{"value":[{"MembershipID":"M1","BusinessPartner":"B","Product":"P","LifecycleStatus":"active","ValidFrom":"2024-01-01","LastChangeDateTime":"2025-01-01T00:00:00Z"}],"@odata.nextLink":"Memberships?$skiptoken=1"}`)
					return
				}
				fmt.Fprintf(w, `{"value":[],"@odata.nextLink":"Memberships?$skiptoken=%d"}`, served)
			}))
			defer srv.Close()
			m, _ := erp.ParseMapping(capMap, capStatus)
			s, err := odata.New(odata.Config{URL: srv.URL + "/Memberships", Mapping: m, Paging: paging})
			if err != nil {
				t.Fatal(err)
			}
			q := erp.Query{Limit: 5}
			pages := 0
			for ; pages < 1000; pages++ {
				p, err := s.Page(context.Background(), q)
				if err != nil {
					if !strings.Contains(err.Error(), "100 pages in a row") || !strings.Contains(err.Error(), "@odata.nextLink") {
						t.Errorf("error %q, want it to say 100 pages in a row came with no item and an @odata.nextLink", err)
					}
					break
				}
				if p.NextCursor == "" {
					t.Fatalf("the pass ended after %d pages, without an error: the server never said the feed ended", pages+1)
				}
				q.Cursor = p.NextCursor
			}
			// The first page and the 100 empty ones: the 100th fails.
			if pages != 100 || served != 101 {
				t.Errorf("failed on page %d of %d served, want page 101", pages+1, served)
			}
		})
	}
}
