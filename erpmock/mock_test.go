package erpmock_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/erpsync/erpsync/erpmock"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var feedStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// setup starts a mock behind an httptest server.
func setup(t testing.TB, opt erpmock.Options) (*erpmock.Mock, string) {
	t.Helper()
	m := erpmock.New(opt)
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return m, srv.URL
}

// get sends a GET with optional header pairs and reads the whole answer.
func get(t testing.TB, u string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read %s: %v", u, err)
	}
	return res, body
}

// item is a served record, loosely decoded so invalid ones decode too.
type item struct {
	ErpID     string          `json:"erp_id"`
	MemberID  *string         `json:"member_id"`
	Status    string          `json:"status"`
	StartsAt  string          `json:"starts_at"`
	EndsAt    *string         `json:"ends_at"`
	Version   json.RawMessage `json:"version"`
	UpdatedAt string          `json:"updated_at"`
	raw       json.RawMessage
}

type page struct {
	Data       []json.RawMessage `json:"data"`
	NextCursor *string           `json:"next_cursor"`
	items      []item
}

func decodePage(t testing.TB, body []byte) page {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var p page
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("decode page: %v\n%s", err, body)
	}
	if p.Data == nil {
		t.Fatalf("page without data: %s", body)
	}
	for _, raw := range p.Data {
		var it item
		if err := json.Unmarshal(raw, &it); err != nil {
			t.Fatalf("decode item: %v\n%s", err, raw)
		}
		it.raw = raw
		p.items = append(p.items, it)
	}
	return p
}

func fetchPage(t testing.TB, base string, q url.Values, header ...string) page {
	t.Helper()
	res, body := get(t, base+"/api/v1/memberships?"+q.Encode(), header...)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	return decodePage(t, body)
}

// fetchAll pages through the window of q with page size limit.
func fetchAll(t testing.TB, base string, q url.Values, limit int) (items []item, pages int) {
	t.Helper()
	q.Set("limit", fmt.Sprint(limit))
	for {
		p := fetchPage(t, base, q)
		pages++
		if len(p.items) > limit+2 { // a duplicate and a stale copy may come on top
			t.Fatalf("page of %d items with limit %d", len(p.items), limit)
		}
		items = append(items, p.items...)
		if p.NextCursor == nil {
			return items, pages
		}
		if len(p.items) < limit {
			t.Fatalf("short page of %d items with a next_cursor", len(p.items))
		}
		q.Set("cursor", *p.NextCursor)
	}
}

func ids(items []item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ErpID
	}
	return out
}

func rfc(t time.Time) string { return t.Format(time.RFC3339Nano) }

func TestPagingCoversEveryRecordOnce(t *testing.T) {
	m, base := setup(t, erpmock.Options{Records: 1003, Seed: 7, Faults: erpmock.Faults{InvalidRate: 0.05}})
	want := make([]string, 0, 1003)
	for _, r := range m.Truth() {
		want = append(want, r.ErpID)
	}
	want = append(want, m.InvalidIDs()...)
	slices.Sort(want)
	if len(want) != 1003 {
		t.Fatalf("truth %d + invalid %d != 1003", len(m.Truth()), len(m.InvalidIDs()))
	}
	for _, limit := range []int{1, 3, 4, 7, 500, 1000} {
		got, pages := fetchAll(t, base, url.Values{}, limit)
		if wantPages := (1003 + limit - 1) / limit; pages != wantPages {
			t.Errorf("limit %d: %d pages, want %d", limit, pages, wantPages)
		}
		for i := 1; i < len(got); i++ {
			a, b := got[i-1], got[i]
			if a.UpdatedAt > b.UpdatedAt || a.UpdatedAt == b.UpdatedAt && a.ErpID >= b.ErpID {
				t.Fatalf("limit %d: %s@%s before %s@%s", limit, a.ErpID, a.UpdatedAt, b.ErpID, b.UpdatedAt)
			}
		}
		gotIDs := ids(got)
		slices.Sort(gotIDs)
		if !slices.Equal(gotIDs, want) {
			t.Fatalf("limit %d: %d ids, want the %d records once each", limit, len(gotIDs), len(want))
		}
	}
}

func TestTruthMatchesFeed(t *testing.T) {
	m, base := setup(t, erpmock.Options{Records: 301, Seed: 3, Faults: erpmock.Faults{InvalidRate: 0.1}})
	got, _ := fetchAll(t, base, url.Values{}, 100)
	byID := map[string]json.RawMessage{}
	for _, it := range got {
		byID[it.ErpID] = it.raw
	}
	truth := m.Truth()
	if !slices.IsSortedFunc(truth, func(a, b erpmock.Record) int { return strings.Compare(a.ErpID, b.ErpID) }) {
		t.Error("Truth not sorted by erp_id")
	}
	for _, want := range truth {
		var r erpmock.Record
		if err := json.Unmarshal(byID[want.ErpID], &r); err != nil {
			t.Fatalf("%s: %v", want.ErpID, err)
		}
		if !r.StartsAt.Equal(want.StartsAt) || !r.UpdatedAt.Equal(want.UpdatedAt) || r.Version != want.Version ||
			r.Status != want.Status || r.MemberID != want.MemberID || r.ProductCode != want.ProductCode ||
			(r.EndsAt == nil) != (want.EndsAt == nil) || r.EndsAt != nil && !r.EndsAt.Equal(*want.EndsAt) {
			t.Fatalf("%s: served %+v, truth %+v", want.ErpID, r, want)
		}
		if want.Version < 1 || want.Version > 3 {
			t.Errorf("%s: initial version %d", want.ErpID, want.Version)
		}
	}
}

func TestRecordFormat(t *testing.T) {
	m, base := setup(t, erpmock.Options{Records: 8, Seed: 1})
	p := fetchPage(t, base, url.Values{})
	if len(p.items) != 8 || p.NextCursor != nil {
		t.Fatalf("%d items, next_cursor %v", len(p.items), p.NextCursor)
	}
	for i, it := range p.items {
		if want := fmt.Sprintf("M%07d", i+1); it.ErpID != want {
			t.Errorf("item %d: erp_id %s, want %s", i, it.ErpID, want)
		}
		want := rfc(feedStart.Add(time.Duration(i/4) * time.Millisecond))
		if ua, _ := time.Parse(time.RFC3339Nano, it.UpdatedAt); rfc(ua) != want {
			t.Errorf("item %d: updated_at %s, want %s", i, it.UpdatedAt, want)
		}
		// RFC 3339, UTC, milliseconds.
		if len(it.UpdatedAt) != len("2025-01-01T00:00:00.000Z") || !strings.HasSuffix(it.StartsAt, "Z") {
			t.Errorf("item %d: times %q %q", i, it.UpdatedAt, it.StartsAt)
		}
	}
	if got := m.Truth(); len(got) != 8 {
		t.Errorf("truth: %d records", len(got))
	}
}

func TestWindow(t *testing.T) {
	_, base := setup(t, erpmock.Options{Records: 200, Seed: 1})
	at := func(d time.Duration) string { return rfc(feedStart.Add(d)) }
	cases := []struct {
		since, until string
		first, n     int // first record index (0-based) and count
	}{
		{at(10 * time.Millisecond), at(20 * time.Millisecond), 40, 40},
		{at(10*time.Millisecond + 500*time.Microsecond), "", 44, 156},
		{"", at(19*time.Millisecond + 500*time.Microsecond), 0, 80},
		{at(49 * time.Millisecond), at(49 * time.Millisecond), 0, 0},
		{at(30 * time.Millisecond), at(20 * time.Millisecond), 0, 0},
		{"2025-01-01T09:00:00.010+09:00", "", 40, 160},
		{at(time.Hour), "", 0, 0},
	}
	for _, c := range cases {
		q := url.Values{}
		if c.since != "" {
			q.Set("updated_since", c.since)
		}
		if c.until != "" {
			q.Set("updated_until", c.until)
		}
		res, body := get(t, base+"/api/v1/memberships/count?"+q.Encode())
		if want := fmt.Sprintf("{\"count\":%d}\n", c.n); res.StatusCode != 200 || string(body) != want {
			t.Errorf("count %v: %d %s, want %s", q, res.StatusCode, body, want)
		}
		got, _ := fetchAll(t, base, q, 7)
		if len(got) != c.n {
			t.Errorf("window %v: %d records, want %d", q, len(got), c.n)
			continue
		}
		for k, it := range got {
			if want := fmt.Sprintf("M%07d", c.first+k+1); it.ErpID != want {
				t.Errorf("window %v: record %d is %s, want %s", q, k, it.ErpID, want)
				break
			}
		}
	}
}

func TestBadRequests(t *testing.T) {
	_, base := setup(t, erpmock.Options{Records: 10})
	for _, q := range []string{
		"limit=0", "limit=1001", "limit=ten", "limit=", "limit=5&limit=6",
		"updated_since=yesterday", "updated_until=2025-01-01", "updated_since=",
		"cursor=%21%21", "cursor=e30", // e30 is {} in base64
	} {
		res, body := get(t, base+"/api/v1/memberships?"+q)
		var e struct{ Error string }
		if res.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Error == "" {
			t.Errorf("%s: %d %s, want 400 with a JSON error", q, res.StatusCode, body)
		}
	}
	res, _ := get(t, base+"/api/v1/memberships/count?updated_since=x")
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("count with a bad updated_since: %d", res.StatusCode)
	}
}

func TestToken(t *testing.T) {
	m, base := setup(t, erpmock.Options{Records: 5, Token: "s3cret"})
	for _, h := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "s3cret"}} {
		res, body := get(t, base+"/api/v1/memberships", h...)
		var e struct{ Error string }
		if res.StatusCode != http.StatusUnauthorized || json.Unmarshal(body, &e) != nil || e.Error == "" {
			t.Errorf("header %v: %d %s, want 401 with a JSON error", h, res.StatusCode, body)
		}
		if strings.Contains(string(body), "s3cret") {
			t.Errorf("the 401 body shows the token: %s", body)
		}
	}
	if p := fetchPage(t, base, url.Values{}, "Authorization", "Bearer s3cret"); len(p.items) != 5 {
		t.Errorf("%d items with the token", len(p.items))
	}
	if res, _ := get(t, base+"/admin/stats"); res.StatusCode != http.StatusOK {
		t.Errorf("admin without token: %d", res.StatusCode)
	}
	if s := m.Stats(); s.Statuses[401] != 3 || s.Statuses[200] != 1 || m.Requests() != 4 {
		t.Errorf("stats %+v, requests %d", s, m.Requests())
	}
}

func TestDeterministic(t *testing.T) {
	opt := erpmock.Options{Records: 500, Seed: 42, Faults: erpmock.Faults{InvalidRate: 0.1}}
	m1, b1 := setup(t, opt)
	m2, b2 := setup(t, opt)
	_, p1 := get(t, b1+"/api/v1/memberships?limit=1000")
	_, p2 := get(t, b2+"/api/v1/memberships?limit=1000")
	if !bytes.Equal(p1, p2) {
		t.Error("same seed, different pages")
	}
	if !slices.Equal(m1.InvalidIDs(), m2.InvalidIDs()) || fmt.Sprint(m1.Truth()) != fmt.Sprint(m2.Truth()) {
		t.Error("same seed, different truth")
	}
	opt.Seed = 43
	_, b3 := setup(t, opt)
	if _, p3 := get(t, b3+"/api/v1/memberships?limit=1000"); bytes.Equal(p1, p3) {
		t.Error("different seeds, same page")
	}
}

func TestChangeMovesRecordToEnd(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	m, base := setup(t, erpmock.Options{Records: 40, Seed: 5, Clock: func() time.Time { return now }})
	before := map[string]erpmock.Record{}
	for _, r := range m.Truth() {
		before[r.ErpID] = r
	}
	changed := m.Change(3)
	again := m.Change(2) // same clock: must still be newer
	if len(changed) != 3 || len(again) != 2 {
		t.Fatalf("changed %v, %v", changed, again)
	}
	after := map[string]erpmock.Record{}
	for _, r := range m.Truth() {
		after[r.ErpID] = r
	}
	for _, id := range changed {
		if a, b := after[id], before[id]; a.Version <= b.Version || !a.UpdatedAt.After(b.UpdatedAt) {
			t.Errorf("%s: %+v after %+v", id, a, b)
		}
	}
	got, _ := fetchAll(t, base, url.Values{}, 6)
	if len(got) != 40 {
		t.Fatalf("%d records after changes, want 40", len(got))
	}
	wantUA := map[string]string{}
	for _, id := range changed {
		wantUA[id] = rfc(now)
	}
	for _, id := range again {
		wantUA[id] = rfc(now.Add(time.Millisecond))
	}
	for _, it := range got[40-len(wantUA):] {
		if ua, _ := time.Parse(time.RFC3339Nano, it.UpdatedAt); wantUA[it.ErpID] != rfc(ua) {
			t.Errorf("tail: %s@%s, want the changed records at the clock %v", it.ErpID, it.UpdatedAt, wantUA)
		}
	}
	if _, body := get(t, base+"/api/v1/memberships/count"); string(body) != "{\"count\":40}\n" {
		t.Errorf("count after changes: %s", body)
	}
}

// TestChangesWhilePaging changes records on every page request: a client
// that pages to the end sees every record, sees changed ones again with a
// higher version, and ends up with the truth.
func TestChangesWhilePaging(t *testing.T) {
	m, base := setup(t, erpmock.Options{Records: 300, Seed: 9, Faults: erpmock.Faults{ChangeRate: 3}})
	got, pages := fetchAll(t, base, url.Values{}, 10)
	latest := map[string]int64{}
	seen := map[string]int{}
	for _, it := range got {
		var v int64
		if err := json.Unmarshal(it.Version, &v); err != nil {
			t.Fatal(err)
		}
		if v <= latest[it.ErpID] {
			t.Errorf("%s: version %d after %d", it.ErpID, v, latest[it.ErpID])
		}
		latest[it.ErpID] = v
		seen[it.ErpID]++
	}
	again := 0
	for _, n := range seen {
		if n > 1 {
			again++
		}
	}
	truth := m.Truth()
	if len(truth) != 300 || len(latest) != 300 || again == 0 {
		t.Fatalf("%d records seen, %d of them again, truth %d", len(latest), again, len(truth))
	}
	for _, r := range truth {
		if latest[r.ErpID] != r.Version {
			t.Errorf("%s: last seen version %d, truth %d", r.ErpID, latest[r.ErpID], r.Version)
		}
	}
	if s := m.Stats(); s.Changed != int64(3*pages) {
		t.Errorf("changed %d over %d pages", s.Changed, pages)
	}
}

// TestManyChanges changes more records than the feed holds, which
// compacts the index, and the feed still serves each record once.
func TestManyChanges(t *testing.T) {
	m, base := setup(t, erpmock.Options{Records: 100, Seed: 2})
	for range 30 {
		m.Change(7)
	}
	got, _ := fetchAll(t, base, url.Values{}, 9)
	gotIDs := ids(got)
	slices.Sort(gotIDs)
	if len(gotIDs) != 100 || slices.Compact(gotIDs)[99] != "M0000100" {
		t.Fatalf("%d records after 210 changes", len(got))
	}
	if _, body := get(t, base+"/api/v1/memberships/count"); string(body) != "{\"count\":100}\n" {
		t.Errorf("count: %s", body)
	}
	if got := m.Change(1000); len(got) != 100 {
		t.Errorf("Change(1000) on 100 records changed %d", len(got))
	}
}

func TestAdmin(t *testing.T) {
	m, base := setup(t, erpmock.Options{Records: 50, Seed: 1, Token: "t", Faults: erpmock.Faults{InvalidRate: 0.1}})
	do := func(method, path, body string) (int, []byte) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	code, body := do("PUT", "/admin/faults", `{"latency":"5ms","error_rate":0.25,"hang":"2s","invalid_rate":0.9}`)
	want := erpmock.Faults{Latency: 5 * time.Millisecond, ErrorRate: 0.25, Hang: 2 * time.Second, InvalidRate: 0.1}
	if code != 200 || m.Faults() != want {
		t.Fatalf("PUT: %d %s; faults %+v", code, body, m.Faults())
	}
	if code, _ := do("PATCH", "/admin/faults", `{"stale_rate":0.5}`); code != 200 || m.Faults().StaleRate != 0.5 || m.Faults().ErrorRate != 0.25 {
		t.Errorf("PATCH: %d, faults %+v", code, m.Faults())
	}
	if code, _ := do("PUT", "/admin/faults", `{"stale_rate":0.5}`); code != 200 || m.Faults().ErrorRate != 0 {
		t.Errorf("PUT does not replace: %+v", m.Faults())
	}
	for _, bad := range []string{`{"error_rate":2}`, `{"latency":"soon"}`, `{"nope":1}`, `[`} {
		if code, _ := do("PUT", "/admin/faults", bad); code != http.StatusBadRequest {
			t.Errorf("PUT %s: %d", bad, code)
		}
	}
	var f erpmock.Faults
	if code, body := do("GET", "/admin/faults", ""); code != 200 || json.Unmarshal(body, &f) != nil || f != m.Faults() {
		t.Errorf("GET faults: %d %s", code, body)
	}
	var changed struct{ Changed []string }
	if code, body := do("POST", "/admin/change?n=4", ""); code != 200 || json.Unmarshal(body, &changed) != nil || len(changed.Changed) != 4 {
		t.Errorf("change: %d %s", code, body)
	}
	var truth []erpmock.Record
	if code, body := do("GET", "/admin/truth", ""); code != 200 || json.Unmarshal(body, &truth) != nil {
		t.Fatalf("truth: %d %.200s", code, body)
	}
	if fmt.Sprint(truth) != fmt.Sprint(m.Truth()) {
		t.Errorf("admin truth differs from Truth")
	}
	var s erpmock.Stats
	if code, body := do("GET", "/admin/stats", ""); code != 200 || json.Unmarshal(body, &s) != nil || s.Changed != 4 || s.Records != 50 || s.Invalid != len(m.InvalidIDs()) {
		t.Errorf("stats: %d %s", code, body)
	}
	if m.Requests() != 0 {
		t.Errorf("admin requests counted as API requests: %d", m.Requests())
	}
}

func TestEmptyFeed(t *testing.T) {
	_, base := setup(t, erpmock.Options{})
	if _, body := get(t, base+"/api/v1/memberships"); string(body) != "{\"data\":[],\"next_cursor\":null}\n" {
		t.Errorf("empty feed: %s", body)
	}
	if _, body := get(t, base+"/admin/truth"); strings.TrimSpace(string(body)) != "[\n]" {
		t.Errorf("empty truth: %q", body)
	}
}
