package erp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/erp"
)

func TestParseParams(t *testing.T) {
	p, err := erp.ParseParams(" since=changedAfter, until=changedBefore,cursor=page_token,,")
	want := erp.DefaultParams
	want.Since, want.Until, want.Cursor = "changedAfter", "changedBefore", "page_token"
	if err != nil || p != want {
		t.Fatalf("got %+v, %v", p, err)
	}
	if p, err := erp.ParseParams(""); err != nil || p != erp.DefaultParams {
		t.Errorf("empty: %+v, %v", p, err)
	}
	for _, bad := range []string{"since", "after=x", "since=a,since=b", "limit=", "since=limit", "cursor=offset"} {
		if _, err := erp.ParseParams(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseJSONPathAndPaging(t *testing.T) {
	for in, want := range map[string]string{"data": "data", "result.items": "result.items", ".": ".", " a.b ": "a.b"} {
		if p, err := erp.ParseJSONPath(in); err != nil || p.String() != want {
			t.Errorf("ParseJSONPath(%q) = %v, %v", in, p, err)
		}
	}
	for _, bad := range []string{"", "a..b", ".a", "a."} {
		if _, err := erp.ParseJSONPath(bad); err == nil {
			t.Errorf("ParseJSONPath(%q) accepted", bad)
		}
	}
	if p, err := erp.ParsePaging("offset"); err != nil || p != erp.PagingOffset || p.String() != "offset" {
		t.Errorf("offset: %v, %v", p, err)
	}
	if _, err := erp.ParsePaging("page"); err == nil {
		t.Error("paging page accepted")
	}
}

func TestNewRefusesAShapeItCannotUse(t *testing.T) {
	mod := func(f func(*erp.Shape)) *erp.Shape { s := erp.DefaultShape(); f(&s); return &s }
	for name, s := range map[string]*erp.Shape{
		"path without slash": mod(func(s *erp.Shape) { s.Path = "v2/x" }),
		"path with a query":  mod(func(s *erp.Shape) { s.Path = "/v2/x?a=1" }),
		"no records path":    mod(func(s *erp.Shape) { s.Path = "/x"; s.Records = nil }),
		"overlapping paths":  mod(func(s *erp.Shape) { s.Records = erp.JSONPath{"r"}; s.Cursor = erp.JSONPath{"r", "next"} }),
		"count without path": mod(func(s *erp.Shape) { s.Count = nil }),
	} {
		if _, err := erp.New(erp.Config{BaseURL: "http://127.0.0.1:1", Shape: s}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// canned serves the bodies of its map by path, and records the queries.
type canned struct {
	mu      sync.Mutex
	bodies  map[string]string
	queries []string
}

func (c *canned) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.queries = append(c.queries, r.URL.Path+"?"+r.URL.RawQuery)
	body, ok := c.bodies[r.URL.Path]
	c.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(body))
}

const item = `{"erp_id":"M1","member_id":"U1","product_code":"P","status":"ACTIVE","starts_at":"2025-01-01T00:00:00Z","ends_at":null,"version":2,"updated_at":"2025-01-02T00:00:00Z"}`

func cannedClient(t *testing.T, bodies map[string]string, s erp.Shape) (*erp.Client, *canned) {
	t.Helper()
	h := &canned{bodies: bodies}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := erp.New(erp.Config{BaseURL: srv.URL, Shape: &s, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c, h
}

func TestShapedEnvelope(t *testing.T) {
	s := erp.DefaultShape()
	s.Path, s.CountPath = "/v2/changes", "/v2/count"
	s.Params, _ = erp.ParseParams("since=after,until=before,cursor=tok,limit=n")
	s.Records, s.Cursor, s.Count = erp.JSONPath{"result", "items"}, erp.JSONPath{"result", "next"}, erp.JSONPath{"result", "total"}
	c, h := cannedClient(t, map[string]string{
		"/v2/changes": `{"meta":{"x":[1,{"items":[]}]},"result":{"next":42,"items":[` + item + `,{"erp_id":"M2"},7]}}`,
		"/v2/count":   `{"result":{"other":{"total":1},"total":12}}`,
	}, s)
	since := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	p, err := c.Page(context.Background(), erp.Query{Since: since, Until: since.Add(time.Hour), Cursor: "abc", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Records) != 1 || p.Records[0].ErpID != "M1" || p.Records[0].Version != 2 || len(p.Invalid) != 2 || p.NextCursor != "42" {
		t.Fatalf("page %+v", p)
	}
	if !strings.Contains(p.Invalid[0].Reason, "member_id: missing") || p.Invalid[1].Reason != "item is not a JSON object" {
		t.Errorf("reasons %q, %q", p.Invalid[0].Reason, p.Invalid[1].Reason)
	}
	n, err := c.Count(context.Background(), since, time.Time{})
	if err != nil || n != 12 {
		t.Fatalf("count %d, %v", n, err)
	}
	want := []string{
		"/v2/changes?after=2025-01-01T00%3A00%3A00Z&before=2025-01-01T01%3A00%3A00Z&n=10&tok=abc",
		"/v2/count?after=2025-01-01T00%3A00%3A00Z",
	}
	if strings.Join(h.queries, " ") != strings.Join(want, " ") {
		t.Errorf("queries %q, want %q", h.queries, want)
	}
}

func TestShapedBodiesThatFail(t *testing.T) {
	s := erp.DefaultShape()
	s.Records, s.Cursor = erp.JSONPath{"result", "items"}, erp.JSONPath{"result", "next"}
	s.Count = erp.JSONPath{"n"}
	for body, want := range map[string]string{
		`{"result":{"next":null}}`:                  "no records array at result.items",
		`{"result":{"items":{},"next":null}}`:       "not an array",
		`{"result":{"items":[],"next":true}}`:       "neither a string, a number nor null",
		`{"result":{"items":[],"next":null}} extra`: "data after the document",
		`{"result":[]}`:                             "no records array",
	} {
		c, _ := cannedClient(t, map[string]string{"/api/v1/memberships": body, "/api/v1/memberships/count": `{"count":3}`}, s)
		if _, err := c.Page(context.Background(), erp.Query{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
		if _, err := c.Count(context.Background(), time.Time{}, time.Time{}); err == nil || !strings.Contains(err.Error(), "no count at n") {
			t.Errorf("count: %v", err)
		}
	}
	// A missing cursor is the last page.
	c, _ := cannedClient(t, map[string]string{"/api/v1/memberships": `{"result":{"items":[]}}`}, s)
	if p, err := c.Page(context.Background(), erp.Query{}); err != nil || p.NextCursor != "" {
		t.Errorf("no cursor: %+v, %v", p, err)
	}
}

func TestShapedOffsetPagingAndNoCount(t *testing.T) {
	s := erp.DefaultShape()
	s.Path, s.CountPath, s.Paging, s.Records = "/list", "", erp.PagingOffset, erp.JSONPath{}
	c, h := cannedClient(t, map[string]string{"/list": `[` + item + `,` + item + `]`}, s)
	p, err := c.Page(context.Background(), erp.Query{Limit: 2})
	if err != nil || len(p.Records) != 2 || p.NextCursor != "2" {
		t.Fatalf("full page: %+v, %v", p, err)
	}
	if p, err = c.Page(context.Background(), erp.Query{Limit: 3, Cursor: p.NextCursor}); err != nil || p.NextCursor != "" {
		t.Fatalf("short page: %+v, %v", p, err)
	}
	if _, err := c.Page(context.Background(), erp.Query{Cursor: "x"}); !errors.Is(err, erp.ErrBadRequest) {
		t.Errorf("bad offset: %v", err)
	}
	if _, err := c.Count(context.Background(), time.Time{}, time.Time{}); !errors.Is(err, erp.ErrNoCount) {
		t.Errorf("count: %v", err)
	}
	want := "/list?limit=2&offset=0 /list?limit=3&offset=2"
	if got := strings.Join(h.queries, " "); got != want {
		t.Errorf("queries %q, want %q", got, want)
	}
}

// v2Shape is the configuration of erpmock's FaceV2.
func v2Shape(t *testing.T, paging erp.Paging) (*erp.Shape, *erp.Mapping) {
	t.Helper()
	s := erp.DefaultShape()
	s.Path, s.CountPath, s.Paging = "/v2/members/changes", "/v2/members/count", paging
	var err error
	if s.Params, err = erp.ParseParams("since=changedAfter,until=changedBefore,cursor=page_token"); err != nil {
		t.Fatal(err)
	}
	s.Records, s.Cursor, s.Count = erp.JSONPath{"result", "items"}, erp.JSONPath{"result", "next"}, erp.JSONPath{"result", "total"}
	m, err := erp.ParseMapping("erp_id=id,member_id=customer,product_code=plan,status=state,starts_at=from,ends_at=to,version=rev,updated_at=modified",
		"active=ACTIVE,paused=SUSPENDED,cancelled=CANCELLED,expired=EXPIRED")
	if err != nil {
		t.Fatal(err)
	}
	return &s, m
}

func TestShapedSourceReadsFaceV2WithFaults(t *testing.T) {
	faults := erpmock.Faults{ErrorRate: 0.2, RateLimitRate: 0.1, TruncateRate: 0.05, DuplicateRate: 0.5, StaleRate: 0.5, InvalidRate: 0.02}
	for _, paging := range []erp.Paging{erp.PagingCursor, erp.PagingOffset} {
		t.Run(paging.String(), func(t *testing.T) {
			s, m := v2Shape(t, paging)
			b := setup(t, erpmock.Options{Records: 1500, Seed: 5, Face: erpmock.FaceV2, Faults: faults}, erp.Config{Shape: s, Mapping: m, MaxRetries: 30})
			f := pageAll(t, b.client, erp.Query{Limit: 100})
			checkTruth(t, b.mock, latest(f.records))
			if want := len(b.mock.InvalidIDs()); len(f.invalid) < want || want == 0 {
				t.Errorf("%d invalid items, want at least %d", len(f.invalid), want)
			}
			if !slices.ContainsFunc(f.invalid, func(i erp.Invalid) bool { return strings.Contains(i.Reason, `status (state): "pending"`) }) {
				t.Errorf("no invalid state among %d invalid items", len(f.invalid))
			}
			n, err := b.client.Count(context.Background(), time.Time{}, time.Time{})
			if err != nil || n != 1500 {
				t.Errorf("count %d, %v", n, err)
			}
			if len(b.reasons()) == 0 {
				t.Error("no retries under faults")
			}
		})
	}
}

func TestShapedSourceWithoutRevTakesTheVersionFromModified(t *testing.T) {
	s, _ := v2Shape(t, erp.PagingCursor)
	m, err := erp.ParseMapping("erp_id=id,member_id=customer,product_code=plan,status=state,starts_at=from,ends_at=to,version=,updated_at=modified",
		"active=ACTIVE,paused=SUSPENDED,cancelled=CANCELLED,expired=EXPIRED")
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, erpmock.Options{Records: 300, Seed: 6, Face: erpmock.FaceV2, NoRev: true}, erp.Config{Shape: s, Mapping: m})
	b.mock.Change(50)
	got := latest(pageAll(t, b.client, erp.Query{Limit: 64}).records)
	truth := b.mock.Truth()
	if len(got) != len(truth) {
		t.Fatalf("%d records, truth has %d", len(got), len(truth))
	}
	for _, w := range truth {
		if r := got[w.ErpID]; r.Version != w.UpdatedAt.UnixMicro() || r.Status != w.Status {
			t.Fatalf("%s: version %d status %s, want %d %s", w.ErpID, r.Version, r.Status, w.UpdatedAt.UnixMicro(), w.Status)
		}
	}
}
