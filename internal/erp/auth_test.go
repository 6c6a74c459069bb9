package erp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/erp"
)

// get GETs u with g and returns the body.
func get(g *erp.Getter, u string) (string, error) {
	var body string
	err := g.Get(context.Background(), "test", u, func(_ http.Header, b []byte) error {
		body = string(b)
		return nil
	})
	return body, err
}

func fastGetter(t *testing.T, cfg erp.Config) *erp.Getter {
	t.Helper()
	cfg.MinBackoff, cfg.MaxBackoff = time.Millisecond, 2*time.Millisecond
	g, err := erp.NewGetter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestBasicAuth(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if u, p, ok := r.BasicAuth(); !ok || u != "erpsync" || p != "open sesame" {
			w.Header().Set("WWW-Authenticate", "Basic")
			w.WriteHeader(http.StatusUnauthorized)
			// A server that echoes what it got must not leak it.
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": "401", "message": "bad password " + p}})
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	if body, err := get(fastGetter(t, erp.Config{Username: "erpsync", Password: "open sesame"}), srv.URL); err != nil || body != "ok" {
		t.Fatalf("%q %v", body, err)
	}
	requests.Store(0)
	_, err := get(fastGetter(t, erp.Config{Username: "erpsync", Password: "wrong-pw"}), srv.URL)
	if !errors.Is(err, erp.ErrUnauthorized) || requests.Load() != 1 {
		t.Fatalf("%v after %d requests, want ErrUnauthorized at once", err, requests.Load())
	}
	if want := "erp: unauthorized: status 401: 401: bad password [password]"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if _, err := erp.NewGetter(erp.Config{Username: "u", Token: "t"}); err == nil {
		t.Error("basic and bearer at once accepted")
	}
}

func TestODataErrorBody(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		switch r.URL.Path {
		case "/400":
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":{"code":"400","message":"Property 'Nope' not found\n  in type 'Memberships'","target":"Nope"}}`))
		case "/403":
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"error":{"code":"403","message":"Forbidden"}}`))
		case "/502":
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte(`{"error":{"code":502,"message":"upstream\r\ndown"}}`))
		}
	}))
	defer srv.Close()
	g := fastGetter(t, erp.Config{MaxRetries: 2})
	for _, c := range []struct {
		path, want string
		is         error
		requests   int64
	}{
		{"/400", "erp: bad request: 400: Property 'Nope' not found in type 'Memberships'", erp.ErrBadRequest, 1},
		{"/403", "erp: unauthorized: status 403: 403: Forbidden", erp.ErrUnauthorized, 1},
		{"/502", "erp: test: giving up after 3 attempts: erp: status 502: 502: upstream down", nil, 3},
	} {
		requests.Store(0)
		_, err := get(g, srv.URL+c.path)
		if err == nil || err.Error() != c.want || c.is != nil && !errors.Is(err, c.is) || requests.Load() != c.requests {
			t.Errorf("%s: %v after %d requests, want %q after %d", c.path, err, requests.Load(), c.want, c.requests)
		}
	}
}

// tokenEndpoint is an OAuth 2.0 token endpoint for the client credentials
// grant that counts its requests and checks their form.
type tokenEndpoint struct {
	t         *testing.T
	id, sec   string
	scope     string
	expiresIn int
	issued    atomic.Int64
}

func (e *tokenEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost {
		e.t.Errorf("token request %s: %v", r.Method, err)
	}
	id, sec, ok := r.BasicAuth()
	if !ok {
		id, sec = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	w.Header().Set("Content-Type", "application/json")
	if g := r.PostForm.Get("grant_type"); g != "client_credentials" {
		e.t.Errorf("grant_type %q", g)
	}
	if s := r.PostForm.Get("scope"); s != e.scope {
		e.t.Errorf("scope %q, want %q", s, e.scope)
	}
	if id != e.id || sec != e.sec {
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":"invalid_client","error_description":"client ` + id + ` with secret ` + sec + ` is unknown"}`))
		return
	}
	n := e.issued.Add(1)
	json.NewEncoder(w).Encode(map[string]any{"access_token": "tok-" + string(rune('0'+n%10)), "token_type": "Bearer", "expires_in": e.expiresIn})
}

func TestOAuthClientCredentials(t *testing.T) {
	tokens := &tokenEndpoint{t: t, id: "erpsync-client", sec: "cl13nt-s3cret", scope: "https://api.example.com/.default erp.read", expiresIn: 3600}
	ts := httptest.NewServer(tokens)
	defer ts.Close()
	var mu sync.Mutex
	seen := map[string]int{}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		mu.Lock()
		seen[auth]++
		mu.Unlock()
		if !strings.HasPrefix(auth, "Bearer tok-") {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer api.Close()
	oauth := &erp.OAuth{TokenURL: ts.URL, ClientID: tokens.id, ClientSecret: tokens.sec, Scopes: []string{"https://api.example.com/.default", "erp.read"}}

	// One token for many concurrent requests: cached by the library.
	g := fastGetter(t, erp.Config{OAuth: oauth})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				if body, err := get(g, api.URL); err != nil || body != "ok" {
					t.Errorf("%q %v", body, err)
				}
			}
		})
	}
	wg.Wait()
	if n := tokens.issued.Load(); n != 1 || seen["Bearer tok-1"] != 40 {
		t.Errorf("%d tokens issued, requests by Authorization %v; want 1 token for 40 requests", n, seen)
	}

	// A token about to expire is renewed before use.
	tokens.expiresIn = 5 // inside the library's 10 s margin
	tokens.issued.Store(0)
	g = fastGetter(t, erp.Config{OAuth: oauth})
	for range 3 {
		if _, err := get(g, api.URL); err != nil {
			t.Fatal(err)
		}
	}
	if n := tokens.issued.Load(); n != 3 {
		t.Errorf("%d tokens issued for 3 requests with tokens expiring in 5 s, want 3", n)
	}

	// A wrong secret: unauthorized at once, the secret not in the error.
	tokens.issued.Store(0)
	bad := *oauth
	bad.ClientSecret = "wr0ng-s3cret"
	_, err := get(fastGetter(t, erp.Config{OAuth: &bad}), api.URL)
	if !errors.Is(err, erp.ErrUnauthorized) || !strings.Contains(err.Error(), "oauth token endpoint: status 401: invalid_client") {
		t.Fatalf("%v, want ErrUnauthorized from the token endpoint", err)
	}
	if strings.Contains(err.Error(), "wr0ng-s3cret") {
		t.Errorf("error shows the secret: %v", err)
	}
	if _, err := erp.NewGetter(erp.Config{OAuth: &erp.OAuth{TokenURL: ts.URL, ClientID: "x"}}); err == nil {
		t.Error("OAuth without a secret accepted")
	}
}

// TestMappedRESTFeed reads the REST feed through a mapping: a renamed
// field the feed does not serve makes every item invalid, naming the
// property; version= derives the version from updated_at.
func TestMappedRESTFeed(t *testing.T) {
	m, err := erp.ParseMapping("version=", "")
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, erpmock.Options{Records: 50, Seed: 3}, erp.Config{Mapping: m})
	f := pageAll(t, b.client, erp.Query{Limit: 20})
	if len(f.records) != 50 || len(f.invalid) != 0 {
		t.Fatalf("%d records, %d invalid", len(f.records), len(f.invalid))
	}
	for _, r := range f.records {
		if r.Version != r.UpdatedAt.UnixMicro() {
			t.Fatalf("%s: version %d, updated_at %v", r.ErpID, r.Version, r.UpdatedAt)
		}
	}
	if m, err = erp.ParseMapping("member_id=Customer", ""); err != nil {
		t.Fatal(err)
	}
	b = setup(t, erpmock.Options{Records: 5, Seed: 3}, erp.Config{Mapping: m})
	f = pageAll(t, b.client, erp.Query{})
	if len(f.records) != 0 || len(f.invalid) != 5 || f.invalid[0].Reason != "member_id (Customer): missing, want a string" {
		t.Fatalf("%d records, invalid %+v", len(f.records), f.invalid)
	}
}
