package captest_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/captest"
)

// These tests document the OData behaviour of CAP that erpsync's OData
// source relies on. Queries encode spaces as %20: CAP rejects '+'.

// groupTime is the LastChangeDateTime of seeded group g (records
// g*SeedTie to g*SeedTie+SeedTie-1).
func groupTime(g int) time.Time {
	return captest.SeedStart.Add(time.Duration(g) * captest.SeedStep)
}

func lit(t time.Time) string { return t.UTC().Format(captest.TimeLayout) }

func ids(recs []captest.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.MembershipID
	}
	return out
}

func sortedIDs(recs []captest.Record) []string {
	out := ids(recs)
	slices.Sort(out)
	return out
}

// byTimeAndID orders records as the keyset does: LastChangeDateTime, then
// MembershipID.
func byTimeAndID(a, b captest.Record) int {
	if c := a.LastChangeDateTime.Compare(b.LastChangeDateTime); c != 0 {
		return c
	}
	return strings.Compare(a.MembershipID, b.MembershipID)
}

func page(t *testing.T, s *captest.Server, rel string) captest.Page {
	t.Helper()
	p, err := s.Page(context.Background(), rel)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// raw sends a GET of rel (relative to the service root) with header
// (name, value pairs; an empty value is left out), without the server's
// credentials, and returns the response.
func raw(t *testing.T, s *captest.Server, rel string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", s.ServiceURL+rel, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] != "" {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func all(t *testing.T, es *captest.EntitySet) []captest.Record {
	t.Helper()
	recs, err := es.All(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestStartServesTheSeed(t *testing.T) {
	t.Parallel()
	const n = 20000
	start := time.Now()
	s := captest.Start(t, captest.Options{Records: n, Seed: 11, VersionedRecords: 100})
	t.Logf("%d records served after %v", n, time.Since(start).Round(time.Millisecond))

	want := captest.Seed(n, 11)
	slices.SortFunc(want, func(a, b captest.Record) int { return strings.Compare(a.MembershipID, b.MembershipID) })
	got := all(t, s.Memberships)
	if len(got) != n {
		t.Fatalf("All returned %d records, want %d", len(got), n)
	}
	for i := range want {
		if !sameRecord(got[i], want[i]) {
			t.Fatalf("record %d: got %+v, want %+v", i, got[i], want[i])
		}
	}

	wantV := captest.SeedVersioned(100, 11)
	slices.SortFunc(wantV, func(a, b captest.Record) int { return strings.Compare(a.MembershipID, b.MembershipID) })
	gotV := all(t, s.Versioned)
	if len(gotV) != len(wantV) {
		t.Fatalf("Versioned.All returned %d records, want %d", len(gotV), len(wantV))
	}
	for i := range wantV {
		if !sameRecord(gotV[i], wantV[i]) {
			t.Fatalf("versioned record %d: got %+v, want %+v", i, gotV[i], wantV[i])
		}
	}
}

func sameRecord(a, b captest.Record) bool {
	a.LastChangeDateTime, b.LastChangeDateTime = a.LastChangeDateTime.UTC(), b.LastChangeDateTime.UTC()
	return a == b
}

func TestSeedIsDeterministic(t *testing.T) {
	a, b, c := captest.Seed(500, 1), captest.Seed(500, 1), captest.Seed(500, 2)
	if !slices.Equal(a, b) {
		t.Fatal("Seed(500, 1) differs between two calls")
	}
	if slices.Equal(ids(a), ids(c)) {
		t.Fatal("Seed(500, 1) and Seed(500, 2) have the same ids")
	}
	statuses := map[string]int{}
	for i, r := range a {
		if !r.LastChangeDateTime.Equal(groupTime(i / captest.SeedTie)) {
			t.Fatalf("record %d: LastChangeDateTime %v, want %v", i, r.LastChangeDateTime, groupTime(i/captest.SeedTie))
		}
		statuses[r.LifecycleStatus]++
	}
	for _, st := range captest.Statuses {
		if statuses[st] == 0 {
			t.Errorf("no record is %s: %v", st, statuses)
		}
	}
	if slices.IsSorted(ids(a)) {
		t.Error("ids are in time order: the keyset tests need them not to be")
	}
}

// TestQueries runs the read-only queries on one server of 40 records (10
// groups of 4 sharing a LastChangeDateTime) with a page limit of 1000.
func TestQueries(t *testing.T) {
	t.Parallel()
	const n, seed = 40, 3
	s := captest.Start(t, captest.Options{Records: n, Seed: seed})
	seeded := captest.Seed(n, seed)
	x := groupTime(4) // records 16..19

	t.Run("FilterOnLastChangeDateTime", func(t *testing.T) {
		for _, c := range []struct {
			op   string
			want []captest.Record
		}{
			{"gt", seeded[20:]},
			{"ge", seeded[16:]},
			{"lt", seeded[:16]},
			{"le", seeded[:20]},
			{"eq", seeded[16:20]},
		} {
			p := page(t, s, "Memberships?$filter=LastChangeDateTime%20"+c.op+"%20"+lit(x))
			if got, want := sortedIDs(p.Value), sortedIDs(c.want); !slices.Equal(got, want) {
				t.Errorf("LastChangeDateTime %s %s: got %v, want %v", c.op, lit(x), got, want)
			}
		}
	})

	// The literal forms CAP takes for an Edm.DateTimeOffset in $filter.
	t.Run("DateTimeLiterals", func(t *testing.T) {
		ms := x.Format("2006-01-02T15:04:05.000") // 2025-01-01T00:00:04.052
		if ms != "2025-01-01T00:00:04.052" {
			t.Fatalf("group 4 is at %s: the literals below assume 2025-01-01T00:00:04.052", ms)
		}
		for _, c := range []struct {
			literal string
			want    []captest.Record // LastChangeDateTime ge literal
		}{
			{"2025-01-01T00:00:04.052Z", seeded[16:]},        // milliseconds, unquoted
			{"'2025-01-01T00:00:04.052Z'", seeded[16:]},      // quoted: accepted too
			{"2025-01-01T00:00:04.0520000Z", seeded[16:]},    // 7 digits (the metadata's Precision)
			{"2025-01-01T00:00:04.0521Z", seeded[16:]},       // below a millisecond: truncated to it
			{"2025-01-01T00:00:04.053Z", seeded[20:]},        // one millisecond later
			{"2025-01-01T00:00:04Z", seeded[16:]},            // whole seconds
			{"2025-01-01T01:00:04.052%2B01:00", seeded[16:]}, // an offset (+ escaped), compared in UTC
			{"2025-01-01T00:00:04.052%2B00:00", seeded[16:]}, // +00:00 like Z
			{"2024-12-31T23:59:59.999Z", seeded},             // before every record
			{"2025-01-01T00:00:10.130Z", seeded[40:]},        // group 10: after every record
		} {
			p := page(t, s, "Memberships?$filter=LastChangeDateTime%20ge%20"+c.literal)
			if got, want := sortedIDs(p.Value), sortedIDs(c.want); !slices.Equal(got, want) {
				t.Errorf("ge %s: got %d records %v, want %d %v", c.literal, len(got), got, len(want), want)
			}
		}
	})

	t.Run("KeysetPages", func(t *testing.T) {
		want := slices.Clone(seeded)
		slices.SortFunc(want, byTimeAndID)
		const top = 7 // pages end inside ties
		var got []captest.Record
		q := "Memberships?$orderby=LastChangeDateTime,MembershipID&$top=" + strconv.Itoa(top)
		p := page(t, s, q)
		for len(p.Value) > 0 {
			if len(p.Value) > top {
				t.Fatalf("$top=%d returned %d records", top, len(p.Value))
			}
			got = append(got, p.Value...)
			last := p.Value[len(p.Value)-1]
			x := lit(last.LastChangeDateTime)
			p = page(t, s, q+"&$filter=(LastChangeDateTime%20eq%20"+x+"%20and%20MembershipID%20gt%20'"+last.MembershipID+"')%20or%20LastChangeDateTime%20gt%20"+x)
		}
		if !slices.Equal(ids(got), ids(want)) {
			t.Fatalf("keyset pages gave\n%v\nwant\n%v", ids(got), ids(want))
		}
	})

	t.Run("OrderbyTopSelect", func(t *testing.T) {
		_, body := raw(t, s, "Memberships?$select=MembershipID,LastChangeDateTime&$orderby=LastChangeDateTime%20desc,MembershipID%20desc&$top=5")
		var p struct {
			Value []map[string]any `json:"value"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		want := slices.Clone(seeded)
		slices.SortFunc(want, func(a, b captest.Record) int { return -byTimeAndID(a, b) })
		want = want[:5]
		if len(p.Value) != 5 {
			t.Fatalf("$top=5 returned %d rows: %s", len(p.Value), body)
		}
		for i, row := range p.Value {
			keys := make([]string, 0, len(row))
			for k := range row {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if !slices.Equal(keys, []string{"LastChangeDateTime", "MembershipID"}) {
				t.Errorf("$select gave properties %v", keys)
			}
			if row["MembershipID"] != want[i].MembershipID || row["LastChangeDateTime"] != lit(want[i].LastChangeDateTime) {
				t.Errorf("row %d is %v, want %s at %s", i, row, want[i].MembershipID, lit(want[i].LastChangeDateTime))
			}
		}
	})

	t.Run("Count", func(t *testing.T) {
		p := page(t, s, "Memberships?$count=true&$top=3&$filter=LastChangeDateTime%20gt%20"+lit(x))
		if p.Count == nil || *p.Count != 20 || len(p.Value) != 3 {
			t.Errorf("$count=true&$top=3 with 20 matching: count %v, %d rows", p.Count, len(p.Value))
		}
		resp, body := raw(t, s, "Memberships/$count")
		if resp.StatusCode != 200 || string(body) != strconv.Itoa(n) {
			t.Errorf("/$count: %d %q, want 200 %q", resp.StatusCode, body, strconv.Itoa(n))
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			t.Errorf("/$count Content-Type %q, want text/plain", ct)
		}
		_, body = raw(t, s, "Memberships/$count?$filter=LastChangeDateTime%20lt%20"+lit(x))
		if string(body) != "16" {
			t.Errorf("/$count with a filter: %q, want 16", body)
		}
	})

	t.Run("EdmDate", func(t *testing.T) {
		_, body := raw(t, s, "Memberships?$select=MembershipID,ValidFrom,ValidTo")
		var p struct {
			Value []struct {
				MembershipID string
				ValidFrom    any
				ValidTo      any
			} `json:"value"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		byID := map[string]captest.Record{}
		for _, r := range seeded {
			byID[r.MembershipID] = r
		}
		nulls := 0
		for _, r := range p.Value {
			w := byID[r.MembershipID]
			if r.ValidFrom != w.ValidFrom {
				t.Errorf("%s: ValidFrom %#v, want %q", r.MembershipID, r.ValidFrom, w.ValidFrom)
			}
			switch {
			case w.ValidTo == "" && r.ValidTo != nil:
				t.Errorf("%s: ValidTo %#v, want null", r.MembershipID, r.ValidTo)
			case w.ValidTo == "":
				nulls++
			case r.ValidTo != w.ValidTo:
				t.Errorf("%s: ValidTo %#v, want %q", r.MembershipID, r.ValidTo, w.ValidTo)
			}
		}
		if nulls == 0 || nulls == n {
			t.Errorf("%d of %d ValidTo are null: the seed should mix both", nulls, n)
		}
		want := 0
		for _, r := range seeded {
			if r.ValidFrom >= "2022-01-01" {
				want++
			}
		}
		_, body = raw(t, s, "Memberships/$count?$filter=ValidFrom%20ge%202022-01-01")
		if string(body) != strconv.Itoa(want) {
			t.Errorf("ValidFrom ge 2022-01-01 counts %s, want %d", body, want)
		}
	})

	t.Run("ErrorBody", func(t *testing.T) {
		for _, q := range []string{
			"Memberships?$filter=LastChangeDateTime%20gt%20bad",
			"Memberships?$filter=LastChangeDateTime%20gt",
			"Memberships?$filter=LastChangeDateTime+gt+" + lit(x), // '+' for a space
			"Memberships?$top=3&",                                 // a trailing '&'
		} {
			resp, body := raw(t, s, q)
			var e struct {
				Error struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if resp.StatusCode != 400 {
				t.Errorf("%s: status %d, want 400: %s", q, resp.StatusCode, body)
				continue
			}
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Errorf("%s: body %s is not {\"error\":{\"code\",\"message\"}}", q, body)
			}
		}
		var he *captest.HTTPError
		if _, err := s.Page(context.Background(), "Memberships?$filter=nope"); !errors.As(err, &he) || he.Status != 400 {
			t.Errorf("Page of a bad filter: %v, want an *HTTPError with 400", err)
		}
	})
}

// TestNextLinkUnderPageLimit: CAP cuts every result at its page limit and
// adds a relative @odata.nextLink, whether or not $top asked for more; a
// page shorter than $top is not the end.
func TestNextLinkUnderPageLimit(t *testing.T) {
	t.Parallel()
	const n, limit = 35, 10
	s := captest.Start(t, captest.Options{Records: n, Seed: 5, PageLimit: limit})
	for _, q := range []string{
		"Memberships?$orderby=LastChangeDateTime,MembershipID",
		"Memberships?$orderby=LastChangeDateTime,MembershipID&$top=1000",
	} {
		_, body := raw(t, s, q)
		var first struct {
			Value    []json.RawMessage `json:"value"`
			NextLink string            `json:"@odata.nextLink"`
		}
		if err := json.Unmarshal(body, &first); err != nil {
			t.Fatal(err)
		}
		if len(first.Value) != limit || !strings.HasPrefix(first.NextLink, "Memberships?") {
			t.Fatalf("%s: first page %d rows, nextLink %q; want %d rows and a relative Memberships?... link", q, len(first.Value), first.NextLink, limit)
		}
		var got []captest.Record
		pages := 0
		for next := q; next != ""; pages++ {
			p := page(t, s, next)
			if len(p.Value) > limit {
				t.Fatalf("a page of %d rows over the limit %d", len(p.Value), limit)
			}
			got = append(got, p.Value...)
			next = p.NextLink
		}
		want := captest.Seed(n, 5)
		slices.SortFunc(want, byTimeAndID)
		if pages != 4 || !slices.Equal(ids(got), ids(want)) {
			t.Errorf("%s: %d pages gave %v, want 4 pages of %v", q, pages, ids(got), ids(want))
		}
	}
	_, body := raw(t, s, "Memberships", "Prefer", "odata.maxpagesize=3")
	var pref captest.Page
	if err := json.Unmarshal(body, &pref); err != nil || len(pref.Value) != limit {
		t.Errorf("Prefer: odata.maxpagesize=3: %d rows (%v), want the server's %d", len(pref.Value), err, limit)
	}

	p := page(t, s, "Memberships?$top=15")
	if len(p.Value) != limit || p.NextLink == "" {
		t.Fatalf("$top=15 over a limit of 10: %d rows, nextLink %q", len(p.Value), p.NextLink)
	}
	if p = page(t, s, p.NextLink); len(p.Value) != 5 || p.NextLink != "" {
		t.Errorf("the rest of $top=15: %d rows, nextLink %q; want 5 and none", len(p.Value), p.NextLink)
	}
}

// TestPagingUnderChange: with CAP's default offset paging, a record
// changed during a paged read makes a later one get skipped; with
// ReliablePaging the nextLink carries the last row's keys and none is.
func TestPagingUnderChange(t *testing.T) {
	t.Parallel()
	for _, reliable := range []bool{false, true} {
		t.Run("reliable="+strconv.FormatBool(reliable), func(t *testing.T) {
			const n, limit = 30, 10
			s := captest.Start(t, captest.Options{Records: n, Seed: 9, PageLimit: limit, ReliablePaging: reliable})
			ctx := context.Background()
			p := page(t, s, "Memberships?$orderby=LastChangeDateTime,MembershipID")
			seen := map[string]bool{}
			for i, r := range p.Value {
				seen[r.MembershipID] = true
				if i == 0 {
					if _, err := s.Memberships.Patch(ctx, r.MembershipID, map[string]any{"LifecycleStatus": "suspended"}); err != nil {
						t.Fatal(err)
					}
				}
			}
			for next := p.NextLink; next != ""; next = p.NextLink {
				p = page(t, s, next)
				for _, r := range p.Value {
					seen[r.MembershipID] = true
				}
			}
			missed := 0
			for _, r := range captest.Seed(n, 9) {
				if !seen[r.MembershipID] {
					missed++
				}
			}
			if want := map[bool]int{false: 1, true: 0}[reliable]; missed != want {
				t.Errorf("ReliablePaging %v: %d records missed, want %d", reliable, missed, want)
			}
		})
	}
}

// TestReliablePagingToken: CAP adds the key to a reliable token's
// $orderby, so ties are not skipped; but when $select leaves out an
// $orderby property it falls back to an offset token without a word.
func TestReliablePagingToken(t *testing.T) {
	t.Parallel()
	const n, limit = 30, 10
	s := captest.Start(t, captest.Options{Records: n, Seed: 2, PageLimit: limit, ReliablePaging: true})
	var got []captest.Record
	for next := "Memberships?$orderby=LastChangeDateTime"; next != ""; {
		p := page(t, s, next)
		got = append(got, p.Value...)
		next = p.NextLink
	}
	if want := captest.Seed(n, 2); !slices.Equal(sortedIDs(got), sortedIDs(want)) {
		t.Errorf("reliable paging by LastChangeDateTime alone (ties at page ends) gave %v", ids(got))
	}
	for _, c := range []struct {
		query  string
		offset bool
	}{
		{"Memberships?$orderby=LastChangeDateTime&$select=MembershipID,LastChangeDateTime", false},
		{"Memberships?$orderby=LastChangeDateTime&$select=MembershipID", true},
	} {
		p := page(t, s, c.query)
		offset := strings.HasSuffix(p.NextLink, "skiptoken="+strconv.Itoa(limit))
		if p.NextLink == "" || offset != c.offset {
			t.Errorf("%s: nextLink %q; want an offset token: %v", c.query, p.NextLink, c.offset)
		}
	}
}

func TestBasicAuth(t *testing.T) {
	t.Parallel()
	s := captest.Start(t, captest.Options{Records: 3, Auth: true})
	if s.User == "" || s.Password == "" {
		t.Fatalf("Auth: true gave user %q, password %q", s.User, s.Password)
	}
	basic := func(user, password string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	}
	for _, c := range []struct {
		name, authorization string
		status              int
	}{
		{"none", "", 401},
		{"wrong password", basic(s.User, s.Password+"x"), 401},
		{"unknown user", basic("alice", s.Password), 401},
		{"bearer", "Bearer " + s.Password, 401},
		{"right", basic(s.User, s.Password), 200},
	} {
		resp, body := raw(t, s, "Memberships", "Authorization", c.authorization)
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, resp.StatusCode, c.status, body)
		}
		if c.status == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic") {
			t.Errorf("%s: WWW-Authenticate %q, want Basic", c.name, resp.Header.Get("WWW-Authenticate"))
		}
	}
	if got := all(t, s.Memberships); len(got) != 3 {
		t.Errorf("All with the credentials: %d records, want 3", len(got))
	}
}

func TestBearerAuth(t *testing.T) {
	t.Parallel()
	s := captest.Start(t, captest.Options{Records: 3, Token: "tok-123"})
	for _, c := range []struct {
		name, authorization string
		status              int
	}{
		{"none", "", 401},
		{"wrong token", "Bearer tok-124", 401},
		{"basic", "Basic ZXJwc3luYzplcnBzeW5j", 401},
		{"right", "Bearer tok-123", 200},
	} {
		resp, _ := raw(t, s, "Memberships", "Authorization", c.authorization)
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.status)
		}
	}
	if got := all(t, s.Memberships); len(got) != 3 {
		t.Errorf("All with the token: %d records, want 3", len(got))
	}
}

// TestChanges: PATCH and POST stamp LastChangeDateTime with the server's
// clock (and bump ChangeCounter), DELETE removes the row.
func TestChanges(t *testing.T) {
	t.Parallel()
	const n = 12
	s := captest.Start(t, captest.Options{Records: n, VersionedRecords: n, Seed: 4, Auth: true})
	ctx := context.Background()
	seeded := captest.Seed(n, 4)
	newest := seeded[n-1].LastChangeDateTime

	before := time.Now().Add(-time.Second) // the server's clock is this machine's
	id := seeded[0].MembershipID
	r, err := s.Memberships.Patch(ctx, id, map[string]any{
		"LifecycleStatus": "cancelled", "ValidTo": "2026-06-30",
		"LastChangeDateTime": "2020-01-01T00:00:00Z", // ignored: the server stamps it
	})
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now().Add(time.Second)
	if r.LifecycleStatus != "cancelled" || r.ValidTo != "2026-06-30" || r.LastChangeDateTime.Before(before) || r.LastChangeDateTime.After(after) {
		t.Fatalf("PATCH returned %+v; want cancelled, ValidTo 2026-06-30, LastChangeDateTime between %v and %v", r, before, after)
	}
	if g, err := s.Memberships.Get(ctx, id); err != nil || !sameRecord(g, r) {
		t.Fatalf("Get after PATCH: %+v, %v; want %+v", g, err, r)
	}
	p := page(t, s, "Memberships?$filter=LastChangeDateTime%20gt%20"+lit(newest))
	if !slices.Equal(ids(p.Value), []string{id}) {
		t.Errorf("gt the newest seeded time after one PATCH: %v, want [%s]", ids(p.Value), id)
	}
	r2, err := s.Memberships.Patch(ctx, id, map[string]any{"ValidTo": nil})
	if err != nil {
		t.Fatal(err)
	}
	if r2.ValidTo != "" || r2.LastChangeDateTime.Before(r.LastChangeDateTime) {
		t.Errorf("second PATCH: %+v; want ValidTo null and LastChangeDateTime not before %v", r2, r.LastChangeDateTime)
	}

	v, err := s.Versioned.Patch(ctx, id, map[string]any{"Product": "SPA", "ChangeCounter": 99})
	if err != nil {
		t.Fatal(err)
	}
	if want := captest.SeedVersioned(n, 4)[0].ChangeCounter + 1; v.ChangeCounter != want || v.Product != "SPA" {
		t.Errorf("versioned PATCH: %+v; want ChangeCounter %d (99 in the body ignored), Product SPA", v, want)
	}

	if err := s.Memberships.Delete(ctx, seeded[1].MembershipID); err != nil {
		t.Fatal(err)
	}
	var he *captest.HTTPError
	if _, err := s.Memberships.Get(ctx, seeded[1].MembershipID); !errors.As(err, &he) || he.Status != 404 {
		t.Errorf("Get after DELETE: %v, want 404", err)
	}
	if err := s.Memberships.Delete(ctx, seeded[1].MembershipID); !errors.As(err, &he) || he.Status != 404 {
		t.Errorf("second DELETE: %v, want 404", err)
	}

	created := captest.Record{MembershipID: "NEW-1", BusinessPartner: "1000000001", Product: "POOL", LifecycleStatus: "active", ValidFrom: "2026-01-01"}
	c, err := s.Memberships.Post(ctx, created)
	if err != nil {
		t.Fatal(err)
	}
	if c.MembershipID != "NEW-1" || c.ValidTo != "" || !c.LastChangeDateTime.After(newest) {
		t.Errorf("POST returned %+v", c)
	}
	cv, err := s.Versioned.Post(ctx, created)
	if err != nil || cv.ChangeCounter != 1 {
		t.Errorf("versioned POST: %+v, %v; want ChangeCounter 1", cv, err)
	}
	// An existing key is refused, though with 500 and SQLite's message
	// (UNIQUE constraint failed) under the sql.js driver, not 409.
	if _, err := s.Memberships.Post(ctx, created); !errors.As(err, &he) || he.Status < 400 {
		t.Errorf("POST of an existing key: %v, want an error status", err)
	}

	got := all(t, s.Memberships)
	if len(got) != n {
		t.Fatalf("after a DELETE and a POST: %d records, want %d", len(got), n)
	}
	want := map[string]bool{}
	for _, r := range seeded[2:] {
		want[r.MembershipID] = true
	}
	want[id], want["NEW-1"] = true, true
	for _, r := range got {
		if !want[r.MembershipID] {
			t.Errorf("All has %s", r.MembershipID)
		}
	}
}

// TestKeysWithQuotes: a key with a quote or a space is reachable (the
// quote doubled, the space escaped).
func TestKeysWithQuotes(t *testing.T) {
	t.Parallel()
	s := captest.Start(t, captest.Options{})
	ctx := context.Background()
	id := "O'Brien 1/2"
	if _, err := s.Memberships.Post(ctx, captest.Record{MembershipID: id, BusinessPartner: "1", Product: "SPA", LifecycleStatus: "active", ValidFrom: "2026-01-01"}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Memberships.Patch(ctx, id, map[string]any{"Product": "POOL"}); err != nil || r.MembershipID != id {
		t.Fatalf("PATCH %q: %+v, %v", id, r, err)
	}
	if err := s.Memberships.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := all(t, s.Memberships); len(got) != 0 {
		t.Errorf("after DELETE: %v", ids(got))
	}
}

// fatalRecorder is a testing.TB whose Fatal records the message and ends
// the goroutine, as testing's does.
type fatalRecorder struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func TestStartWithoutNodeModulesFails(t *testing.T) {
	project := t.TempDir()
	if err := os.WriteFile(filepath.Join(project, "package.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		captest.Start(f, captest.Options{Project: project})
	}()
	<-done
	if !strings.Contains(f.msg, "make cap-deps") || strings.Contains(f.msg, "\n") {
		t.Errorf("Start without node_modules failed with %q, want one line naming `make cap-deps`", f.msg)
	}
}
