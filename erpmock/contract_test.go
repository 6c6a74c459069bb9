package erpmock_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/erpsync/erpsync/api"
	"github.com/erpsync/erpsync/erpmock"
)

// contract is the ERP's OpenAPI document, ready to validate answers with.
type contract struct{ router routers.Router }

func loadContract(t testing.TB) contract {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.ERPOpenAPI)
	if err != nil {
		t.Fatalf("load api/erp-api.yaml: %v", err)
	}
	r, err := legacy.NewRouter(doc) // validates the document itself too
	if err != nil {
		t.Fatalf("api/erp-api.yaml: %v", err)
	}
	return contract{r}
}

// validate reports how the answer res (with its body) to res.Request breaks
// the contract: a status the operation does not list, a missing or
// malformed header, or a body that does not match its schema.
func (c contract) validate(t testing.TB, res *http.Response, body []byte) error {
	t.Helper()
	route, params, err := c.router.FindRoute(res.Request)
	if err != nil {
		t.Fatalf("%s: no operation of the contract: %v", res.Request.URL.Path, err)
	}
	return openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: res.Request, PathParams: params, Route: route},
		Status:                 res.StatusCode,
		Header:                 res.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
}

// conforms requests u and fails the test unless the answer has status want
// and keeps the contract. It returns the body.
func (c contract) conforms(t testing.TB, u string, want int, header ...string) []byte {
	t.Helper()
	res, body := get(t, u, header...)
	if res.StatusCode != want {
		t.Fatalf("GET %s: status %d, want %d: %s", u, res.StatusCode, want, body)
	}
	if err := c.validate(t, res, body); err != nil {
		t.Fatalf("GET %s: %d breaks the contract: %v\n%.300s", u, res.StatusCode, err, body)
	}
	return body
}

// pageAll pages the whole feed from base with limit, checking every page
// against the contract, and returns the number of pages.
func (c contract) pageAll(t testing.TB, base string, limit int) int {
	t.Helper()
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	for pages := 1; ; pages++ {
		body := c.conforms(t, base+"/api/v1/memberships?"+q.Encode(), http.StatusOK)
		p := decodePage(t, body)
		if p.NextCursor == nil {
			return pages
		}
		if pages > 10000 {
			t.Fatal("more than 10000 pages")
		}
		q.Set("cursor", *p.NextCursor)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestContractPages pages the feed under every fault switch that keeps the
// contract (the transient errors are answers the contract lists) and checks
// every answer against api/erp-api.yaml.
func TestContractPages(t *testing.T) {
	c := loadContract(t)
	for _, tc := range []struct {
		name   string
		faults erpmock.Faults
	}{
		{"none", erpmock.Faults{}},
		{"latency", erpmock.Faults{Latency: time.Millisecond}},
		{"duplicates", erpmock.Faults{DuplicateRate: 1}},
		{"stale replays", erpmock.Faults{StaleRate: 1}},
		{"changes while paging", erpmock.Faults{ChangeRate: 5}},
		{"short hangs", erpmock.Faults{HangRate: 1, Hang: time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, base := setup(t, erpmock.Options{Records: 1003, Seed: 5, Faults: tc.faults})
			if pages := c.pageAll(t, base, 100); pages < 11 {
				t.Errorf("%d pages of 100 for 1003 records", pages)
			}
			since := url.QueryEscape(rfc(feedStart.Add(10 * time.Millisecond)))
			until := url.QueryEscape(rfc(feedStart.Add(20 * time.Millisecond)))
			c.conforms(t, base+"/api/v1/memberships?updated_since="+since+"&updated_until="+until, http.StatusOK)
			c.conforms(t, base+"/api/v1/memberships/count", http.StatusOK)
			c.conforms(t, base+"/api/v1/memberships/count?updated_since="+since+"&updated_until="+until, http.StatusOK)
		})
	}
	t.Run("empty feed", func(t *testing.T) {
		_, base := setup(t, erpmock.Options{})
		if p := decodePage(t, c.conforms(t, base+"/api/v1/memberships", http.StatusOK)); len(p.items) != 0 || p.NextCursor != nil {
			t.Errorf("empty feed: %d items, next_cursor %v", len(p.items), p.NextCursor)
		}
		c.conforms(t, base+"/api/v1/memberships/count", http.StatusOK)
	})
}

// TestContractErrors checks the error answers: 400, 401, 429 (both kinds)
// and the injected 5xx.
func TestContractErrors(t *testing.T) {
	c := loadContract(t)
	t.Run("400", func(t *testing.T) {
		_, base := setup(t, erpmock.Options{Records: 10})
		for _, q := range []string{"limit=0", "limit=ten", "updated_since=yesterday", "cursor=%21%21"} {
			c.conforms(t, base+"/api/v1/memberships?"+q, http.StatusBadRequest)
		}
		c.conforms(t, base+"/api/v1/memberships/count?updated_until=x", http.StatusBadRequest)
	})
	t.Run("401", func(t *testing.T) {
		_, base := setup(t, erpmock.Options{Records: 10, Token: "s3cret"})
		c.conforms(t, base+"/api/v1/memberships", http.StatusUnauthorized)
		c.conforms(t, base+"/api/v1/memberships/count", http.StatusUnauthorized, "Authorization", "Bearer wrong")
		c.conforms(t, base+"/api/v1/memberships", http.StatusOK, "Authorization", "Bearer s3cret")
	})
	t.Run("429 injected", func(t *testing.T) {
		_, base := setup(t, erpmock.Options{Records: 10, Faults: erpmock.Faults{RateLimitRate: 1, RetryAfter: 2}})
		c.conforms(t, base+"/api/v1/memberships", http.StatusTooManyRequests)
		c.conforms(t, base+"/api/v1/memberships/count", http.StatusTooManyRequests)
	})
	t.Run("429 over max rate", func(t *testing.T) {
		_, base := setup(t, erpmock.Options{Records: 10, Faults: erpmock.Faults{MaxRate: 1}})
		c.conforms(t, base+"/api/v1/memberships", http.StatusOK)
		c.conforms(t, base+"/api/v1/memberships", http.StatusTooManyRequests)
	})
	t.Run("5xx", func(t *testing.T) {
		_, base := setup(t, erpmock.Options{Records: 10, Faults: erpmock.Faults{ErrorRate: 1}})
		seen := map[int]bool{}
		for i := 0; i < 200 && len(seen) < 4; i++ {
			res, body := get(t, base+"/api/v1/memberships")
			if err := c.validate(t, res, body); err != nil {
				t.Fatalf("%d breaks the contract: %v\n%s", res.StatusCode, err, body)
			}
			seen[res.StatusCode] = true
		}
		for _, code := range []int{500, 502, 503, 504} {
			if !seen[code] {
				t.Errorf("no %d in 200 requests: saw %v", code, seen)
			}
		}
	})
}

// TestContractCatchesDrift shows that the check bites: answers that break
// the document fail it, each with an error that names what broke.
func TestContractCatchesDrift(t *testing.T) {
	c := loadContract(t)
	for _, tc := range []struct {
		name string
		opt  erpmock.Options
		// wrap changes the mock's answer; nil serves it as it is.
		wrap func(h http.Header, body []byte) []byte
		want string
	}{
		{"page without next_cursor", erpmock.Options{Records: 10}, func(_ http.Header, body []byte) []byte {
			var p map[string]json.RawMessage
			if err := json.Unmarshal(body, &p); err != nil {
				panic(err)
			}
			delete(p, "next_cursor")
			return mustJSON(p)
		}, "next_cursor"},
		{"answer without Date", erpmock.Options{Records: 10}, func(h http.Header, body []byte) []byte {
			h["Date"] = nil // net/http then sends none
			return body
		}, `"Date" missing`},
		{"updated_at not RFC 3339", erpmock.Options{Records: 10}, func(_ http.Header, body []byte) []byte {
			return bytes.Replace(body, []byte(`"updated_at":"2025-01-01T`), []byte(`"updated_at":"2025-01-01 `), 1)
		}, "updated_at"},
		// Invalid records are input the consumer must quarantine: the
		// contract's schema is what makes them invalid.
		{"invalid records", erpmock.Options{Records: 50, Seed: 2, Faults: erpmock.Faults{InvalidRate: 1}}, nil, "data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h http.Handler = erpmock.New(tc.opt)
			if tc.wrap != nil {
				h = rewrite(h, tc.wrap)
			}
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			res, body := get(t, srv.URL+"/api/v1/memberships")
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", res.StatusCode, body)
			}
			err := c.validate(t, res, body)
			if err == nil {
				t.Fatalf("an answer that breaks the contract passed:\n%.300s", body)
			}
			t.Logf("caught: %v", err)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}
}

// rewrite serves h's answers with their body passed through f, which may
// also change the headers.
func rewrite(h http.Handler, f func(http.Header, []byte) []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		body := f(w.Header(), rec.Body.Bytes())
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}

func TestServesOpenAPI(t *testing.T) {
	_, base := setup(t, erpmock.Options{Records: 1, Token: "s3cret", Faults: erpmock.Faults{ErrorRate: 1}})
	res, body := get(t, base+"/openapi.yaml")
	if res.StatusCode != http.StatusOK || !bytes.Equal(body, api.ERPOpenAPI) {
		t.Fatalf("GET /openapi.yaml: %d, %d bytes, want 200 and the %d bytes of api/erp-api.yaml", res.StatusCode, len(body), len(api.ERPOpenAPI))
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/yaml" {
		t.Errorf("Content-Type %q", ct)
	}
	if _, err := openapi3.NewLoader().LoadFromData(body); err != nil {
		t.Errorf("the served document does not load: %v", err)
	}
}
