package erp_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/erp"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// bundle is what a test works with: a mock and a client of it.
type bundle struct {
	mock   *erpmock.Mock
	client *erp.Client
	url    string

	mu       sync.Mutex
	retries  []string // reasons given to Hooks.Retry
	waits    []time.Duration
	statuses []int // statuses given to Hooks.Request
}

// setup starts a mock with opt and a fast-retrying client of it; cfg
// overrides the client's defaults where set.
func setup(t *testing.T, opt erpmock.Options, cfg erp.Config) *bundle {
	t.Helper()
	b := &bundle{mock: erpmock.New(opt)}
	srv := httptest.NewServer(b.mock)
	t.Cleanup(srv.Close)
	b.url = srv.URL
	cfg.BaseURL = srv.URL
	if cfg.Token == "" {
		cfg.Token = opt.Token
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff, cfg.MaxBackoff = time.Millisecond, 5*time.Millisecond
	}
	if cfg.MaxRetryAfter == 0 {
		cfg.MaxRetryAfter = 5 * time.Millisecond
	}
	if cfg.Hooks == nil {
		cfg.Hooks = &erp.Hooks{}
	}
	retry := cfg.Hooks.Retry
	cfg.Hooks.Retry = func(reason string, wait time.Duration) {
		b.mu.Lock()
		b.retries = append(b.retries, reason)
		b.waits = append(b.waits, wait)
		b.mu.Unlock()
		if retry != nil {
			retry(reason, wait)
		}
	}
	cfg.Hooks.Request = func(_ string, status int, _ time.Duration, _ error) {
		b.mu.Lock()
		b.statuses = append(b.statuses, status)
		b.mu.Unlock()
	}
	c, err := erp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.client = c
	return b
}

func (b *bundle) reasons() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.retries)
}

// feed is what a client gathered from paging the whole feed.
type feed struct {
	records []erp.Record
	invalid []erp.Invalid
	pages   int
}

// pageAll pages the window of q to the end.
func pageAll(t *testing.T, c *erp.Client, q erp.Query) feed {
	t.Helper()
	var f feed
	for {
		p, err := c.Page(context.Background(), q)
		if err != nil {
			t.Fatalf("page %d: %v", f.pages+1, err)
		}
		f.pages++
		f.records = append(f.records, p.Records...)
		f.invalid = append(f.invalid, p.Invalid...)
		if p.NextCursor == "" {
			return f
		}
		q.Cursor = p.NextCursor
	}
}

// latest keeps the highest version of each record, as a consumer does.
func latest(records []erp.Record) map[string]erp.Record {
	out := map[string]erp.Record{}
	for _, r := range records {
		if cur, ok := out[r.ErpID]; !ok || r.Version > cur.Version {
			out[r.ErpID] = r
		}
	}
	return out
}

// checkTruth compares what the client holds with the mock's truth.
func checkTruth(t *testing.T, m *erpmock.Mock, got map[string]erp.Record) {
	t.Helper()
	truth := m.Truth()
	if len(got) != len(truth) {
		t.Fatalf("%d records, truth has %d", len(got), len(truth))
	}
	for _, w := range truth {
		r := got[w.ErpID]
		if r.Version != w.Version || r.Status != w.Status || r.MemberID != w.MemberID || r.ProductCode != w.ProductCode ||
			!r.StartsAt.Equal(w.StartsAt) || !r.UpdatedAt.Equal(w.UpdatedAt) || (r.EndsAt == nil) != (w.EndsAt == nil) ||
			r.EndsAt != nil && !r.EndsAt.Equal(*w.EndsAt) {
			t.Fatalf("%s: got %+v, truth %+v", w.ErpID, r, w)
		}
	}
}

func TestPageEverything(t *testing.T) {
	b := setup(t, erpmock.Options{Records: 1000, Seed: 1, Token: "tok"}, erp.Config{})
	f := pageAll(t, b.client, erp.Query{Limit: 97})
	if len(f.records) != 1000 || f.pages != 11 || len(f.invalid) != 0 {
		t.Fatalf("%d records over %d pages, %d invalid", len(f.records), f.pages, len(f.invalid))
	}
	checkTruth(t, b.mock, latest(f.records))
	if s := b.client.Stats(); s.Requests != 11 || s.Retries != 0 {
		t.Errorf("stats %+v", s)
	}
	// The default page size is the server's.
	p, err := b.client.Page(context.Background(), erp.Query{})
	if err != nil || len(p.Records) != 500 {
		t.Errorf("default page: %v, %d records", err, len(p.Records))
	}
}

func TestWindowAndCount(t *testing.T) {
	b := setup(t, erpmock.Options{Records: 400, Seed: 1}, erp.Config{})
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	since, until := start.Add(10*time.Millisecond), start.Add(30*time.Millisecond)
	n, err := b.client.Count(context.Background(), since, until)
	if err != nil || n != 80 {
		t.Fatalf("count: %d, %v", n, err)
	}
	if n, err := b.client.Count(context.Background(), time.Time{}, time.Time{}); err != nil || n != 400 {
		t.Errorf("count of all: %d, %v", n, err)
	}
	// A non-UTC bound means the same instant.
	tokyo := time.FixedZone("JST", 9*3600)
	f := pageAll(t, b.client, erp.Query{Since: since.In(tokyo), Until: until, Limit: 7})
	if len(f.records) != 80 || f.records[0].ErpID != "M0000041" || f.records[79].ErpID != "M0000120" {
		t.Errorf("window: %d records", len(f.records))
	}
}

func TestServerErrorsRetried(t *testing.T) {
	b := setup(t, erpmock.Options{Records: 300, Seed: 2, Faults: erpmock.Faults{ErrorRate: 0.4}}, erp.Config{MaxRetries: 20})
	f := pageAll(t, b.client, erp.Query{Limit: 50})
	checkTruth(t, b.mock, latest(f.records))
	s := b.client.Stats()
	if s.Retries == 0 || s.Requests != int64(f.pages)+s.Retries || b.mock.Requests() != s.Requests {
		t.Errorf("stats %+v over %d pages; mock saw %d", s, f.pages, b.mock.Requests())
	}
	for _, r := range b.reasons() {
		if !slices.Contains([]string{"status 500", "status 502", "status 503", "status 504"}, r) {
			t.Errorf("retry reason %q", r)
		}
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	var b *bundle
	// The first answer is a 429 with Retry-After: 1; the hook turns the
	// fault off before the client waits.
	b = setup(t, erpmock.Options{Records: 10, Faults: erpmock.Faults{RateLimitRate: 1, RetryAfter: 1}},
		erp.Config{MaxRetryAfter: 30 * time.Second, Hooks: &erp.Hooks{Retry: func(string, time.Duration) {
			b.mock.SetFaults(erpmock.Faults{})
		}}})
	start := time.Now()
	p, err := b.client.Page(context.Background(), erp.Query{})
	took := time.Since(start)
	if err != nil || len(p.Records) != 10 {
		t.Fatalf("%v, %+v", err, p)
	}
	if took < time.Second || took > 3*time.Second || b.waits[0] != time.Second || b.retries[0] != "status 429" {
		t.Errorf("took %v, waits %v, reasons %v; want one wait of Retry-After 1s", took, b.waits, b.retries)
	}

	// MaxRetryAfter caps it.
	b = setup(t, erpmock.Options{Records: 10, Faults: erpmock.Faults{RateLimitRate: 1, RetryAfter: 5}},
		erp.Config{MaxRetryAfter: 50 * time.Millisecond, Hooks: &erp.Hooks{Retry: func(string, time.Duration) {
			b.mock.SetFaults(erpmock.Faults{})
		}}})
	start = time.Now()
	if _, err := b.client.Page(context.Background(), erp.Query{}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 50*time.Millisecond || took > time.Second {
		t.Errorf("took %v with Retry-After 5s capped at 50ms", took)
	}
}

// A 429 with Retry-After answered to one request holds every request of
// the client, as the fetchers of a run share one: a request started
// meanwhile reaches the ERP only once the wait is over.
func TestRetryAfterHoldsEveryRequest(t *testing.T) {
	var (
		b       *bundle
		once    sync.Once
		asked   time.Time // when the ERP said to wait
		sibling = make(chan time.Time, 1)
	)
	b = setup(t, erpmock.Options{Records: 10, Faults: erpmock.Faults{RateLimitRate: 1, RetryAfter: 1}},
		erp.Config{MaxRetryAfter: 30 * time.Second, Hooks: &erp.Hooks{Retry: func(string, time.Duration) {
			once.Do(func() {
				asked = time.Now()
				b.mock.SetFaults(erpmock.Faults{})
				go func() {
					if _, err := b.client.Count(context.Background(), time.Time{}, time.Time{}); err != nil {
						t.Error(err)
					}
					sibling <- time.Now()
				}()
			})
		}}})
	if _, err := b.client.Page(context.Background(), erp.Query{}); err != nil {
		t.Fatal(err)
	}
	done := <-sibling
	if held := done.Sub(asked); held < time.Second-10*time.Millisecond {
		t.Fatalf("a request started while the ERP's Retry-After of 1s ran went through after %s: not held", held)
	}
	if st := b.mock.Stats(); st.Statuses[429] != 1 {
		t.Fatalf("%d answers 429, want the first only", st.Statuses[429])
	}
}

func TestRetryAfterOn503(t *testing.T) {
	var b *bundle
	b = setup(t, erpmock.Options{Records: 10, Faults: erpmock.Faults{ErrorRate: 1, RetryAfter: 2}},
		erp.Config{MaxRetryAfter: 80 * time.Millisecond, MaxRetries: 30})
	_, _ = b.client.Page(context.Background(), erp.Query{}) // fails: every answer is a 5xx
	for i, r := range b.retries {
		if r == "status 503" && b.waits[i] != 80*time.Millisecond {
			t.Errorf("503 with Retry-After 2s (cap 80ms): waited %v", b.waits[i])
		}
		if r != "status 503" && b.waits[i] > 5*time.Millisecond {
			t.Errorf("%s without Retry-After: waited %v, want the backoff", r, b.waits[i])
		}
	}
	if !slices.Contains(b.retries, "status 503") {
		t.Errorf("no 503 in %v", b.retries)
	}
}

func TestTruncatedBodyRetried(t *testing.T) {
	var b *bundle
	b = setup(t, erpmock.Options{Records: 50, Faults: erpmock.Faults{TruncateRate: 1}},
		erp.Config{Hooks: &erp.Hooks{Retry: func(string, time.Duration) { b.mock.SetFaults(erpmock.Faults{}) }}})
	p, err := b.client.Page(context.Background(), erp.Query{})
	if err != nil || len(p.Records) != 50 {
		t.Fatalf("%v %+v", err, p)
	}
	if got := b.reasons(); !slices.Equal(got, []string{"truncated"}) {
		t.Errorf("retry reasons %v", got)
	}
	b.mock.SetFaults(erpmock.Faults{TruncateRate: 0.5})
	checkTruth(t, b.mock, latest(pageAll(t, b.client, erp.Query{Limit: 5}).records))
}

func TestHungResponseTimesOut(t *testing.T) {
	b := setup(t, erpmock.Options{Records: 20, Faults: erpmock.Faults{HangRate: 1}},
		erp.Config{Timeout: 100 * time.Millisecond, MaxRetries: 1})
	start := time.Now()
	_, err := b.client.Page(context.Background(), erp.Query{})
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "2 attempts") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want a timeout after 2 attempts", err)
	}
	if took < 200*time.Millisecond || took > 2*time.Second {
		t.Errorf("gave up after %v, want two 100ms attempts", took)
	}
	if got := b.reasons(); !slices.Equal(got, []string{"timeout"}) {
		t.Errorf("reasons %v", got)
	}
	b.mock.SetFaults(erpmock.Faults{HangRate: 0.3})
	b2, _ := erp.New(erp.Config{BaseURL: b.url, Timeout: 100 * time.Millisecond, MaxRetries: 20, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	checkTruth(t, b.mock, latest(pageAll(t, b2, erp.Query{Limit: 4}).records))
}

func TestDuplicatesAndStale(t *testing.T) {
	b := setup(t, erpmock.Options{Records: 200, Seed: 5, Faults: erpmock.Faults{DuplicateRate: 1, StaleRate: 1}}, erp.Config{})
	f := pageAll(t, b.client, erp.Query{Limit: 20})
	if len(f.records) != 200+2*f.pages {
		t.Errorf("%d records over %d pages, want 200 and a duplicate and a stale copy a page", len(f.records), f.pages)
	}
	var older int
	seen := map[string]int64{}
	for _, r := range f.records {
		if v, ok := seen[r.ErpID]; ok && r.Version < v {
			older++
		}
		seen[r.ErpID] = max(seen[r.ErpID], r.Version)
	}
	if older != f.pages {
		t.Errorf("%d older versions after newer ones, want %d", older, f.pages)
	}
	checkTruth(t, b.mock, latest(f.records))
}

func TestInvalidRecords(t *testing.T) {
	b := setup(t, erpmock.Options{Records: 500, Seed: 6, Faults: erpmock.Faults{InvalidRate: 0.1}}, erp.Config{})
	f := pageAll(t, b.client, erp.Query{Limit: 100})
	checkTruth(t, b.mock, latest(f.records))
	var ids []string
	kinds := map[string]int{}
	for _, inv := range f.invalid {
		ids = append(ids, inv.ErpID)
		if inv.Reason == "" || len(inv.Raw) == 0 || inv.UpdatedAt.IsZero() {
			t.Errorf("invalid item %+v", inv)
		}
		kinds[strings.SplitN(inv.Reason, ":", 2)[0]]++
	}
	if want := b.mock.InvalidIDs(); !slices.Equal(ids, want) {
		t.Errorf("invalid ids %v, want %v", ids, want)
	}
	for _, k := range []string{"erp_id", "member_id", "status", "starts_at", "ends_at", "version"} {
		if kinds[k] == 0 {
			t.Errorf("no invalid record with a bad %s: %v", k, kinds)
		}
	}
}

func TestChangesWhilePaging(t *testing.T) {
	b := setup(t, erpmock.Options{Records: 300, Seed: 7, Faults: erpmock.Faults{ChangeRate: 2}}, erp.Config{})
	f := pageAll(t, b.client, erp.Query{Limit: 25})
	if len(f.records) <= 300 {
		t.Errorf("%d records: changed ones did not come again", len(f.records))
	}
	checkTruth(t, b.mock, latest(f.records))
}

func TestUnauthorized(t *testing.T) {
	b := setup(t, erpmock.Options{Records: 5, Token: "right"}, erp.Config{Token: "wrong-secret"})
	_, err := b.client.Page(context.Background(), erp.Query{})
	if !errors.Is(err, erp.ErrUnauthorized) || b.mock.Requests() != 1 {
		t.Fatalf("%v after %d requests, want ErrUnauthorized at once", err, b.mock.Requests())
	}
	if strings.Contains(err.Error(), "wrong-secret") {
		t.Errorf("error shows the token: %v", err)
	}
	if _, err := b.client.Count(context.Background(), time.Time{}, time.Time{}); !errors.Is(err, erp.ErrUnauthorized) {
		t.Errorf("count: %v", err)
	}
	c, _ := erp.New(erp.Config{BaseURL: b.url})
	if _, err := c.Page(context.Background(), erp.Query{}); !errors.Is(err, erp.ErrUnauthorized) {
		t.Errorf("without token: %v", err)
	}
}

func TestBadRequest(t *testing.T) {
	b := setup(t, erpmock.Options{Records: 5}, erp.Config{})
	for _, q := range []erp.Query{{Limit: 1001}, {Limit: -1}} {
		if _, err := b.client.Page(context.Background(), q); !errors.Is(err, erp.ErrBadRequest) {
			t.Errorf("%+v: %v", q, err)
		}
	}
	if b.mock.Requests() != 0 {
		t.Errorf("sent %d requests for queries out of range", b.mock.Requests())
	}
	_, err := b.client.Page(context.Background(), erp.Query{Cursor: "not-a-cursor"})
	if !errors.Is(err, erp.ErrBadRequest) || !strings.Contains(err.Error(), "cursor") || b.mock.Requests() != 1 {
		t.Errorf("%v after %d requests, want ErrBadRequest without retry", err, b.mock.Requests())
	}
}

func TestNotFoundNotRetried(t *testing.T) {
	b := setup(t, erpmock.Options{Records: 5}, erp.Config{})
	c, _ := erp.New(erp.Config{BaseURL: b.url + "/wrong/prefix/"})
	_, err := c.Page(context.Background(), erp.Query{})
	var se *erp.StatusError
	if !errors.As(err, &se) || se.Code != 404 || c.Stats().Requests != 1 {
		t.Errorf("%v after %d requests, want a 404 StatusError at once", err, c.Stats().Requests)
	}
}

func TestRetriesExhausted(t *testing.T) {
	b := setup(t, erpmock.Options{Records: 5, Token: "s3cr3t", Faults: erpmock.Faults{ErrorRate: 1}}, erp.Config{MaxRetries: 2})
	_, err := b.client.Page(context.Background(), erp.Query{})
	var se *erp.StatusError
	if !errors.As(err, &se) || se.Code < 500 || !strings.Contains(err.Error(), "giving up after 3 attempts") {
		t.Fatalf("%v, want a 5xx StatusError after 3 attempts", err)
	}
	if b.mock.Requests() != 3 || b.client.Stats().Retries != 2 || len(b.statuses) != 3 || b.statuses[0] < 500 {
		t.Errorf("mock saw %d requests, client %+v, statuses %v", b.mock.Requests(), b.client.Stats(), b.statuses)
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("error shows the token: %v", err)
	}
	// Negative MaxRetries: one attempt.
	c, _ := erp.New(erp.Config{BaseURL: b.url, Token: "s3cr3t", MaxRetries: -1})
	if _, err := c.Count(context.Background(), time.Time{}, time.Time{}); err == nil || c.Stats().Requests != 1 {
		t.Errorf("%v after %d requests", err, c.Stats().Requests)
	}
}

func TestContextCancelStopsRetrying(t *testing.T) {
	b := setup(t, erpmock.Options{Records: 5, Faults: erpmock.Faults{ErrorRate: 1}},
		erp.Config{MinBackoff: 40 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, MaxRetries: 1000})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.client.Page(ctx, erp.Query{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v, want the context's error", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("returned %v after the context ended", took-150*time.Millisecond)
	}
	n := b.mock.Requests()
	time.Sleep(100 * time.Millisecond)
	if b.mock.Requests() != n || n > 100 {
		t.Errorf("%d requests, then %d: retries went on", n, b.mock.Requests())
	}
	// Cancelled during a hung attempt.
	b.mock.SetFaults(erpmock.Faults{HangRate: 1})
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := b.client.Page(ctx, erp.Query{}); !errors.Is(err, context.Canceled) {
		t.Errorf("%v, want context.Canceled", err)
	}
}

func TestTooLarge(t *testing.T) {
	b := setup(t, erpmock.Options{Records: 100}, erp.Config{MaxBodyBytes: 1000})
	_, err := b.client.Page(context.Background(), erp.Query{})
	if !errors.Is(err, erp.ErrTooLarge) || b.mock.Requests() != 1 {
		t.Errorf("%v after %d requests, want ErrTooLarge at once", err, b.mock.Requests())
	}
}

func TestMaxRate(t *testing.T) {
	// A shared rate of 20/s: four clients at once get 429s and retry after
	// Retry-After (capped for the test) until their pages come.
	b := setup(t, erpmock.Options{Records: 200, Faults: erpmock.Faults{MaxRate: 20}},
		erp.Config{MaxRetries: 100, MaxRetryAfter: 20 * time.Millisecond})
	t.Run("clients", func(t *testing.T) {
		for range 4 {
			t.Run("", func(t *testing.T) {
				t.Parallel()
				checkTruth(t, b.mock, latest(pageAll(t, b.client, erp.Query{Limit: 20}).records))
			})
		}
	})
	if got := b.mock.Stats().Statuses[429]; got == 0 {
		t.Error("no 429 at 20 requests/s")
	}
}

func TestNew(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8090", "ftp://x", "http://", "/api", "http://x?a=1", "http://x/#f"} {
		if _, err := erp.New(erp.Config{BaseURL: u}); err == nil {
			t.Errorf("BaseURL %q accepted", u)
		}
	}
	for _, cfg := range []erp.Config{
		{BaseURL: "http://x", Timeout: -1},
		{BaseURL: "http://x", MinBackoff: time.Second, MaxBackoff: time.Millisecond},
	} {
		if _, err := erp.New(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	if _, err := erp.New(erp.Config{BaseURL: "https://erp.example.com/base/"}); err != nil {
		t.Error(err)
	}
}

// BenchmarkClientPage reads 500-record pages from an in-process erpmock
// over loopback HTTP: request, transfer, decoding and validation.
func BenchmarkClientPage(b *testing.B) {
	srv := httptest.NewServer(erpmock.New(erpmock.Options{Records: 100_000, Seed: 1}))
	defer srv.Close()
	c, err := erp.New(erp.Config{BaseURL: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	q := erp.Query{Limit: 500}
	for b.Loop() {
		p, err := c.Page(context.Background(), q)
		if err != nil || len(p.Records) != 500 {
			b.Fatal(err)
		}
		q.Cursor = p.NextCursor
	}
}

// countingLimiter admits n requests, then fails.
type countingLimiter struct {
	mu    sync.Mutex
	waits int
	n     int
}

func (l *countingLimiter) Wait(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waits++
	if l.waits > l.n {
		return errors.New("limiter closed")
	}
	return ctx.Err()
}

func TestLimiterPacesEveryAttempt(t *testing.T) {
	var b *bundle
	lim := &countingLimiter{n: 3}
	b = setup(t, erpmock.Options{Records: 5, Faults: erpmock.Faults{ErrorRate: 1}}, erp.Config{Limiter: lim,
		Hooks: &erp.Hooks{Retry: func(string, time.Duration) {
			if b.client.Stats().Retries == 2 {
				b.mock.SetFaults(erpmock.Faults{})
			}
		}}})
	if _, err := b.client.Page(context.Background(), erp.Query{}); err != nil {
		t.Fatal(err)
	}
	if lim.waits != 3 || b.mock.Requests() != 3 {
		t.Errorf("%d waits for %d requests, want one per attempt", lim.waits, b.mock.Requests())
	}
	if _, err := b.client.Page(context.Background(), erp.Query{}); err == nil || b.mock.Requests() != 3 {
		t.Errorf("%v after %d requests: a failed Wait must not send", err, b.mock.Requests())
	}
}

// TestInvalidNewerThan places invalid copies of one record against each
// other as the store's quarantine marks do: by version when both have
// one, else by updated_at when both have one, else a versioned copy
// first, and an undated copy without a version after a dated one.
func TestInvalidNewerThan(t *testing.T) {
	t1, t2 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		inv, old erp.Invalid
		want     bool
	}{
		{"higher version, earlier updated_at", erp.Invalid{Version: 5, UpdatedAt: t1}, erp.Invalid{Version: 4, UpdatedAt: t2}, true},
		{"same version", erp.Invalid{Version: 4, UpdatedAt: t2}, erp.Invalid{Version: 4, UpdatedAt: t1}, false},
		{"no version, later than a versioned copy", erp.Invalid{UpdatedAt: t2}, erp.Invalid{Version: 9, UpdatedAt: t1}, true},
		{"versioned, earlier than a copy without a version", erp.Invalid{Version: 9, UpdatedAt: t1}, erp.Invalid{UpdatedAt: t2}, false},
		{"versioned without updated_at, against one without a version", erp.Invalid{Version: 1}, erp.Invalid{UpdatedAt: t2}, true},
		{"without a version, against one without updated_at", erp.Invalid{UpdatedAt: t2}, erp.Invalid{Version: 1}, false},
		{"undated without a version, against a dated one", erp.Invalid{}, erp.Invalid{UpdatedAt: t1}, true},
		{"dated, against an undated one without a version", erp.Invalid{UpdatedAt: t2}, erp.Invalid{}, false},
		{"two undated", erp.Invalid{}, erp.Invalid{}, false},
		{"undated without a version, against a versioned one", erp.Invalid{}, erp.Invalid{Version: 1}, false},
	} {
		if got := c.inv.NewerThan(c.old); got != c.want {
			t.Errorf("%s: %+v newer than %+v: %t, want %t", c.name, c.inv, c.old, got, c.want)
		}
	}
}
