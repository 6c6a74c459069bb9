package erp

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
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
	// ErrNotJSON is an answer that is not JSON at all (a proxy's or a
	// login's HTML page): the server answered, but not as the feed.
	ErrNotJSON = errors.New("not JSON")
)

// StatusError is a non-2xx answer other than 400, 401 and 403: the last one
// when retries ran out, or the first one when its status is not worth a
// retry (404, say).
type StatusError struct {
	Code int
	Body string // the start of the body, with the token blanked out
	URL  string // the URL asked, without a password
}

func (e *StatusError) Error() string {
	if e.URL != "" {
		return fmt.Sprintf("erp: GET %s: status %d: %s", e.URL, e.Code, e.Body)
	}
	return fmt.Sprintf("erp: status %d: %s", e.Code, e.Body)
}

// RefusedError is a 401 or 403 answer: ErrUnauthorized, with its status,
// so that a caller can tell a refused identity (401) from a refused
// authorization (403).
type RefusedError struct {
	Code int
	Body string // the start of the body, with the token blanked out
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s: status %d: %s", ErrUnauthorized, e.Code, e.Body)
}

// Unwrap returns ErrUnauthorized.
func (e *RefusedError) Unwrap() error { return ErrUnauthorized }

// Record is one valid record of the feed: a membership (its own fields),
// or a record of a Schema's entity (Vals). Times are UTC.
type Record struct {
	ErpID       string
	MemberID    string
	ProductCode string
	Status      string // ACTIVE, SUSPENDED, CANCELLED or EXPIRED
	StartsAt    time.Time
	EndsAt      *time.Time // nil when the membership has no end
	Version     int64
	UpdatedAt   time.Time
	// Vals are the values of a Schema's record, in the order of the
	// entity's columns, key columns included; ErpID is then the key text
	// (entity.KeyText) and the membership fields are empty. Nil for a
	// membership.
	Vals []entity.Value
	// Children are the lines of a document, one entity.Lines per child of
	// the entity (entity.Entity.Children), in that order; nil for an
	// entity without children. A record is read whole or not at all: a
	// record whose lines could not all be read is not a Record.
	Children []entity.Lines
}

// Invalid is an item of a page that breaks the schema.
type Invalid struct {
	ErpID     string          // as served when it was a string, else ""; may be unusable
	Reason    string          // every rule the item breaks, "; "-separated
	Raw       json.RawMessage // the item as served
	UpdatedAt time.Time       // zero when missing or unparseable
	// Version is the item's version, read as a valid record's would be
	// (updated_at in microseconds when the source has no version); 0 when
	// missing or unreadable.
	Version int64
}

// NewerThan reports whether inv is a newer copy of its record than old:
// a higher version when both have one; else, when both have an
// updated_at, a later one; else a versioned copy beats an unversioned
// one, and of two copies with neither, or with only an updated_at, an
// undated copy counts as the newest. The store's marks place copies the
// same way (store.Current.Marks).
func (inv Invalid) NewerThan(old Invalid) bool {
	switch {
	case inv.Version > 0 && old.Version > 0:
		return inv.Version > old.Version
	case !inv.UpdatedAt.IsZero() && !old.UpdatedAt.IsZero():
		return inv.UpdatedAt.After(old.UpdatedAt)
	case inv.Version > 0 || old.Version > 0:
		return inv.Version > old.Version
	}
	return inv.UpdatedAt.IsZero() && !old.UpdatedAt.IsZero()
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
	// Username and Password, when Username is non-empty, are sent as HTTP
	// basic authentication. The password never appears in errors.
	// Defaults to empty.
	Username, Password string
	// OAuth, when set, authenticates every request with an OAuth 2.0
	// access token of the client credentials grant, fetched from its token
	// endpoint, cached and renewed before it expires. Defaults to nil.
	OAuth *OAuth
	// Mapping names the properties the feed serves the fields under and
	// translates its status values. Defaults to nil: the API's own names.
	Mapping *Mapping
	// Schema, when set, decodes the feed's items as records of its entity
	// instead of memberships; Mapping must then be nil. Defaults to nil.
	Schema *Schema
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
	// Shape describes a REST API shaped differently from the spec's: its
	// endpoints, parameter names, paging and envelope. Defaults to nil:
	// the spec's API, read by a decoder written for it.
	Shape *Shape
	// Filter holds query parameters sent with every request, pages and
	// counts alike: what selects one source's records of an endpoint that
	// serves several (company=1000). None may be named like a parameter
	// of the Shape. The API must apply them: a record it serves anyway
	// whose property holds another value than the column the Schema's
	// source sets is invalid (see Compile). Defaults to none.
	Filter url.Values
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
	g      *Getter
	base   string
	m      *Mapping
	s      *Schema    // nil: memberships
	shape  *Shape     // nil: the spec's API
	filter url.Values // sent with every request
}

// Endpoint names, as Hooks.Request reports them, for the REST API and
// for the OData source alike.
const (
	EndpointPage  = "memberships"
	EndpointCount = "memberships/count"
)

// New returns a client for cfg.
func New(cfg Config) (*Client, error) {
	u, err := ParseURL("base URL", cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if cfg.Mapping != nil && cfg.Schema != nil {
		return nil, errors.New("erp: a Mapping or a Schema, not both")
	}
	g, err := NewGetter(cfg)
	if err != nil {
		return nil, err
	}
	c := &Client{g: g, base: strings.TrimRight(u.String(), "/"), m: cfg.Mapping, s: cfg.Schema}
	if sh := cfg.Shape; sh != nil && !sh.spec() {
		if err := sh.check(); err != nil {
			return nil, err
		}
		cp := *sh
		c.shape = &cp
	}
	names := DefaultParams
	if c.shape != nil {
		names = c.shape.Params
	}
	for k := range cfg.Filter {
		for _, n := range []string{names.Since, names.Until, names.Cursor, names.Limit, names.Offset} {
			if k == n {
				return nil, fmt.Errorf("erp: filter parameter %q: erpsync sends it for its paging and windows: want another name", k)
			}
		}
	}
	c.filter = maps.Clone(cfg.Filter)
	return c, nil
}

// ParseURL parses the address of an ERP resource: an absolute http or
// https URL without a query or fragment. what names it in errors.
func ParseURL(what, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("erp: %s %q: want an absolute http or https URL", what, raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("erp: %s %q: no query or fragment allowed", what, raw)
	}
	return u, nil
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats { return c.g.Stats() }

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
	err := c.get(ctx, EndpointPage, "/api/v1/memberships", v, func(h http.Header, body []byte) (err error) {
		if p, err = decodePage(body, c.m, c.s); err == nil {
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
	err := c.get(ctx, EndpointCount, "/api/v1/memberships/count", DefaultParams.window(since, until), func(_ http.Header, body []byte) (err error) {
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

// get GETs path with query.
func (c *Client) get(ctx context.Context, endpoint, path string, query url.Values, decode func(http.Header, []byte) error) error {
	u := c.base + path
	if len(c.filter) > 0 {
		q := make(url.Values, len(query)+len(c.filter))
		maps.Copy(q, query)
		maps.Copy(q, c.filter)
		query = q
	}
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	return c.g.Get(ctx, endpoint, u, decode)
}
