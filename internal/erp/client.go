package erp

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/erpsync/erpsync/internal/ctxtime"
)

var (
	// ErrUnauthorized is a 401 or 403 answer. It is never retried.
	ErrUnauthorized = errors.New("erp: unauthorized")
	// ErrBadRequest is a 400 answer, or a query the client refuses to send.
	// It is never retried.
	ErrBadRequest = errors.New("erp: bad request")
	// ErrTooLarge is a response body over Config.MaxBodyBytes. It is never
	// retried.
	ErrTooLarge = errors.New("erp: response body too large")
)

// StatusError is a non-2xx answer other than 400, 401 and 403: the last one
// when retries ran out, or the first one when its status is not worth a
// retry (404, say).
type StatusError struct {
	Code int
	Body string // the start of the body, with the token blanked out
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("erp: status %d: %s", e.Code, e.Body)
}

// Record is one valid membership of the feed. Times are UTC.
type Record struct {
	ErpID       string
	MemberID    string
	ProductCode string
	Status      string // ACTIVE, SUSPENDED, CANCELLED or EXPIRED
	StartsAt    time.Time
	EndsAt      *time.Time // nil when the membership has no end
	Version     int64
	UpdatedAt   time.Time
}

// Invalid is an item of a page that breaks the schema.
type Invalid struct {
	ErpID     string          // as served when it was a string, else ""; may be unusable
	Reason    string          // every rule the item breaks, "; "-separated
	Raw       json.RawMessage // the item as served
	UpdatedAt time.Time       // zero when missing or unparseable
}

// Page is one page of the feed.
type Page struct {
	Records    []Record  // the valid items, in feed order
	Invalid    []Invalid // the invalid items, in feed order
	NextCursor string    // "" on the last page
	// ServedAt is the ERP's clock when it answered: the response's Date
	// header, or zero when it had none or an unreadable one.
	ServedAt time.Time
}

// Query selects a page.
type Query struct {
	Since  time.Time // inclusive lower bound on updated_at; zero means none
	Until  time.Time // exclusive upper bound on updated_at; zero means none
	Cursor string    // NextCursor of the previous page; "" for the first
	Limit  int       // 1 to 1000; zero leaves the server's default (500)
}

// Hooks observe the client, for metrics and logs. Either may be nil. They
// are called from the goroutine of the call and must not block.
type Hooks struct {
	// Request is called after every attempt with the endpoint
	// ("memberships" or "memberships/count"), the HTTP status (0 when no
	// answer came), the attempt's duration and its error (nil on success).
	Request func(endpoint string, status int, d time.Duration, err error)
	// Retry is called before waiting to retry, with why ("status 503",
	// "timeout", "truncated", "network", "decode") and how long the wait
	// is.
	Retry func(reason string, wait time.Duration)
}

// Config configures a Client.
type Config struct {
	// BaseURL is the ERP's absolute http or https URL; the API paths are
	// appended to it. Required.
	BaseURL string
	// Token is sent as "Authorization: Bearer <Token>" when non-empty. It
	// never appears in errors. Defaults to empty.
	Token string
	// Timeout bounds one attempt, from sending the request to reading the
	// whole body. Defaults to 10s.
	Timeout time.Duration
	// MaxRetries is how many times a failed attempt is retried. Defaults to
	// 6; negative means no retries.
	MaxRetries int
	// MinBackoff and MaxBackoff bound the exponential backoff between
	// attempts: a wait drawn uniformly from [0, min(MaxBackoff,
	// MinBackoff*2^(retry-1))] ("full jitter"). Default to 100ms and 10s.
	MinBackoff, MaxBackoff time.Duration
	// MaxRetryAfter caps the Retry-After of 429 and 503 answers. The wait
	// before a retry is the larger of the capped Retry-After and the
	// backoff. Defaults to 30s.
	MaxRetryAfter time.Duration
	// MaxBodyBytes caps a response body. Defaults to 32 MiB.
	MaxBodyBytes int64
	// HTTPClient sends the requests. Defaults to a client of its own with
	// keep-alive connections to the ERP.
	HTTPClient *http.Client
	// TLS is the TLS configuration of the default client's connections to
	// an https ERP (a custom CA, say). Ignored when HTTPClient is set.
	// Defaults to nil: the system's CAs.
	TLS *tls.Config
	// Hooks observe requests and retries. Defaults to nil.
	Hooks *Hooks
	// Limiter, when set, is waited on before every attempt, retries
	// included: a rate shared by every instance (see internal/ratelimit).
	Limiter Limiter
	// Shape describes an API shaped differently from the spec's. Defaults
	// to nil: the spec's API, read by a decoder written for it.
	Shape *Shape
}

// Limiter paces requests.
type Limiter interface {
	// Wait blocks until one request may be sent, or ctx ends.
	Wait(ctx context.Context) error
}

// Stats counts a client's work.
type Stats struct {
	Requests int64 // attempts sent
	Retries  int64 // attempts that were retries
}

// Client reads the ERP membership feed. It is safe for concurrent use.
type Client struct {
	cfg      Config
	base     string
	auth     string
	shape    *Shape // nil: the spec's API
	requests atomic.Int64
	retries  atomic.Int64
}

// Endpoint names, as Hooks.Request reports them.
const (
	endpointPage  = "memberships"
	endpointCount = "memberships/count"
)

// New returns a client for cfg.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("erp: base URL %q: want an absolute http or https URL", cfg.BaseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("erp: base URL %q: no query or fragment allowed", cfg.BaseURL)
	}
	switch {
	case cfg.Timeout < 0, cfg.MinBackoff < 0, cfg.MaxBackoff < 0, cfg.MaxRetryAfter < 0, cfg.MaxBodyBytes < 0:
		return nil, errors.New("erp: negative duration or size in config")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 6
	}
	cfg.MaxRetries = max(cfg.MaxRetries, 0)
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 10 * time.Second
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		return nil, errors.New("erp: MaxBackoff below MinBackoff")
	}
	if cfg.MaxRetryAfter == 0 {
		cfg.MaxRetryAfter = 30 * time.Second
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 32 << 20
	}
	if cfg.HTTPClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		if cfg.TLS != nil {
			t.TLSClientConfig = cfg.TLS.Clone()
		}
		cfg.HTTPClient = &http.Client{Transport: t}
	}
	if cfg.Hooks == nil {
		cfg.Hooks = &Hooks{}
	}
	c := &Client{cfg: cfg, base: strings.TrimRight(u.String(), "/")}
	if sh := cfg.Shape; sh != nil && !sh.spec() {
		if err := sh.check(); err != nil {
			return nil, err
		}
		cp := *sh
		c.shape = &cp
	}
	if cfg.Token != "" {
		c.auth = "Bearer " + cfg.Token
	}
	return c, nil
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	return Stats{Requests: c.requests.Load(), Retries: c.retries.Load()}
}

// Page reads one page of the feed. Invalid items are in Page.Invalid and do
// not fail the page.
func (c *Client) Page(ctx context.Context, q Query) (*Page, error) {
	if q.Limit < 0 || q.Limit > 1000 {
		return nil, fmt.Errorf("%w: limit %d not in [1, 1000]", ErrBadRequest, q.Limit)
	}
	if c.shape != nil {
		return c.shapedPage(ctx, q)
	}
	v := DefaultParams.window(q.Since, q.Until)
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var p *Page
	err := c.call(ctx, endpointPage, "/api/v1/memberships", v, func(h http.Header, body []byte) (err error) {
		if p, err = decodePage(body); err == nil {
			p.ServedAt = ServedAt(h)
		}
		return err
	})
	return p, err
}

// Count returns how many records the feed holds in [since, until); zero
// times leave a bound open. It returns ErrNoCount when Config.Shape has no
// count endpoint.
func (c *Client) Count(ctx context.Context, since, until time.Time) (int64, error) {
	if c.shape != nil {
		return c.shapedCount(ctx, since, until)
	}
	var n int64
	err := c.call(ctx, endpointCount, "/api/v1/memberships/count", DefaultParams.window(since, until), func(_ http.Header, body []byte) (err error) {
		n, err = decodeCount(body)
		return err
	})
	return n, err
}

// ServedAt reads the ERP's clock from a response's Date header; zero when
// the header is missing or unreadable.
func ServedAt(h http.Header) time.Time {
	t, err := http.ParseTime(h.Get("Date"))
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// attemptError is the failure of one attempt, with what decides a retry.
type attemptError struct {
	err        error
	reason     string        // for Hooks.Retry; "" when not worth a retry
	retryAfter time.Duration // from the answer; zero when none
}

// call GETs path until decode accepts a 2xx body, retrying what is
// transient.
func (c *Client) call(ctx context.Context, endpoint, path string, query url.Values, decode func(http.Header, []byte) error) error {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	for attempt := 1; ; attempt++ {
		if c.cfg.Limiter != nil {
			if err := c.cfg.Limiter.Wait(ctx); err != nil {
				return fmt.Errorf("erp: %s: wait for the rate limit: %w", endpoint, err)
			}
		}
		c.requests.Add(1)
		start := time.Now()
		status, ae := c.attempt(ctx, u, decode)
		var err error
		if ae != nil {
			err = ae.err
		}
		c.cfg.Hooks.request(endpoint, status, time.Since(start), err)
		switch {
		case ae == nil:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("erp: %s: %w (after %d attempts, last: %v)", endpoint, ctx.Err(), attempt, err)
		case ae.reason == "":
			return err
		case attempt > c.cfg.MaxRetries:
			return fmt.Errorf("erp: %s: giving up after %d attempts: %w", endpoint, attempt, err)
		}
		wait := max(c.backoff(attempt), min(ae.retryAfter, c.cfg.MaxRetryAfter))
		c.retries.Add(1)
		c.cfg.Hooks.retry(ae.reason, wait)
		if ctxtime.Sleep(ctx, wait) != nil {
			return fmt.Errorf("erp: %s: %w (after %d attempts, last: %v)", endpoint, ctx.Err(), attempt, err)
		}
	}
}

// attempt sends one request and decodes its answer. It returns the HTTP
// status (0 without an answer) and, on failure, what to do about it.
func (c *Client) attempt(ctx context.Context, u string, decode func(http.Header, []byte) error) (int, *attemptError) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodGet, u, nil)
	if err != nil {
		return 0, &attemptError{err: fmt.Errorf("erp: new request: %w", err)}
	}
	req.Header.Set("Accept", "application/json")
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	res, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, transportError(ctx, err)
	}
	defer res.Body.Close()

	if res.StatusCode < 200 || res.StatusCode > 299 {
		return res.StatusCode, c.statusError(res)
	}
	if res.ContentLength > c.cfg.MaxBodyBytes {
		return res.StatusCode, &attemptError{err: fmt.Errorf("%w: Content-Length %d over %d", ErrTooLarge, res.ContentLength, c.cfg.MaxBodyBytes)}
	}
	body, err := readBody(res.Body, res.ContentLength, c.cfg.MaxBodyBytes)
	switch {
	case errors.Is(err, ErrTooLarge):
		return res.StatusCode, &attemptError{err: err}
	case err != nil:
		return res.StatusCode, transportError(ctx, err)
	}
	if err := decode(res.Header, body); err != nil {
		return res.StatusCode, &attemptError{err: fmt.Errorf("erp: %w", err), reason: "decode"}
	}
	return res.StatusCode, nil
}

// transportError classifies an error of sending or reading: the attempt's
// own deadline is a timeout, a body cut short of its Content-Length is
// truncated, anything else a network error. Both are
// retried unless ctx itself has ended, which call checks. A server
// certificate that fails verification is not retried: a wrong CA or name
// does not heal.
func transportError(ctx context.Context, err error) *attemptError {
	reason := "network"
	var cve *tls.CertificateVerificationError
	switch {
	case errors.As(err, &cve):
		reason = ""
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		reason = "timeout"
	case errors.Is(err, io.ErrUnexpectedEOF):
		reason = "truncated"
	}
	return &attemptError{err: fmt.Errorf("erp: %w", err), reason: reason}
}

// statusError turns a non-2xx answer into an error, retryable for 408,
// 429 and 5xx.
func (c *Client) statusError(res *http.Response) *attemptError {
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	body := strings.TrimSpace(string(b))
	var msg struct{ Error string }
	if json.Unmarshal(b, &msg) == nil && msg.Error != "" {
		body = msg.Error
	}
	if len(body) > 512 {
		body = body[:512] + "..."
	}
	if c.cfg.Token != "" {
		body = strings.ReplaceAll(body, c.cfg.Token, "[token]")
	}
	switch code := res.StatusCode; {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return &attemptError{err: fmt.Errorf("%w: status %d: %s", ErrUnauthorized, code, body)}
	case code == http.StatusBadRequest:
		return &attemptError{err: fmt.Errorf("%w: %s", ErrBadRequest, body)}
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return &attemptError{
			err:        &StatusError{Code: code, Body: body},
			reason:     "status " + strconv.Itoa(code),
			retryAfter: retryAfter(res.Header.Get("Retry-After"), time.Now()),
		}
	default:
		return &attemptError{err: &StatusError{Code: code, Body: body}}
	}
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.ParseInt(h, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(min(s, 1<<30)) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// readBody reads at most limit bytes of r; more is ErrTooLarge. A body cut
// short of its Content-Length is io.ErrUnexpectedEOF, from net/http.
func readBody(r io.Reader, contentLength, limit int64) ([]byte, error) {
	size := int64(4 << 10)
	if contentLength >= 0 {
		size = contentLength + 1 // +1: room to see io.EOF without growing
	}
	b := make([]byte, 0, min(size, limit+1))
	lr := io.LimitReader(r, limit+1)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := lr.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if int64(len(b)) > limit {
			return nil, fmt.Errorf("%w: over %d bytes", ErrTooLarge, limit)
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// backoff draws the wait before retry number n (from 1) with full jitter.
func (c *Client) backoff(n int) time.Duration {
	ceiling := c.cfg.MinBackoff
	for i := 1; i < n && ceiling < c.cfg.MaxBackoff; i++ {
		ceiling = min(2*ceiling, c.cfg.MaxBackoff) // MaxBackoff < MaxInt64/2 in practice
	}
	if ceiling <= 0 {
		return 0
	}
	return rand.N(ceiling + 1)
}

func (h *Hooks) request(endpoint string, status int, d time.Duration, err error) {
	if h.Request != nil {
		h.Request(endpoint, status, d, err)
	}
}

func (h *Hooks) retry(reason string, wait time.Duration) {
	if h.Retry != nil {
		h.Retry(reason, wait)
	}
}
