package erp

import (
	"bytes"
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

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/erpsync/erpsync/internal/ctxtime"
)

// OAuth configures the OAuth 2.0 client credentials grant (RFC 6749
// section 4.4): the client authenticates at TokenURL with its id and
// secret and sends the access token it gets as a bearer token.
type OAuth struct {
	// TokenURL is the token endpoint. Required.
	TokenURL string
	// ClientID and ClientSecret are the client's credentials, sent as HTTP
	// basic authentication or, when the endpoint refuses that, in the
	// form. Required. The secret never appears in errors.
	ClientID, ClientSecret string
	// Scopes are requested with the token. Defaults to none.
	Scopes []string
}

// Getter sends the GET requests of a source: authentication, a timeout
// per attempt, retries with backoff, the body cap, the shared rate and the
// hooks of Config. The REST Client and the OData source both read through
// one. It is safe for concurrent use.
type Getter struct {
	cfg      Config
	auth     string
	requests atomic.Int64
	retries  atomic.Int64
	// pause is when (Unix nanoseconds) the ERP's last 429 or Retry-After
	// lets requests go again: every request of the getter waits for it,
	// not only the one that was answered so (several fetchers share one
	// getter).
	pause atomic.Int64
}

// NewGetter returns a Getter for cfg; cfg.BaseURL and cfg.Mapping are not
// its business.
func NewGetter(cfg Config) (*Getter, error) {
	switch {
	case cfg.Timeout < 0, cfg.MinBackoff < 0, cfg.MaxBackoff < 0, cfg.MaxRetryAfter < 0, cfg.MaxBodyBytes < 0:
		return nil, errors.New("erp: negative duration or size in config")
	}
	if n := btoi(cfg.Token != "") + btoi(cfg.Username != "") + btoi(cfg.OAuth != nil); n > 1 {
		return nil, errors.New("erp: more than one authentication configured (token, basic, OAuth): want one")
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
	if cfg.OAuth != nil {
		o := cfg.OAuth
		if o.TokenURL == "" || o.ClientID == "" || o.ClientSecret == "" {
			return nil, errors.New("erp: OAuth needs a token URL, a client id and a client secret")
		}
		cc := clientcredentials.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret, TokenURL: o.TokenURL, Scopes: o.Scopes}
		// The token requests go through the same transport (TLS, proxy)
		// with the attempt timeout; the library caches the token and
		// fetches a new one shortly before it expires.
		tokenClient := &http.Client{Transport: cfg.HTTPClient.Transport, Timeout: cfg.Timeout}
		ctx := context.WithValue(context.Background(), oauth2.HTTPClient, tokenClient)
		hc := *cfg.HTTPClient
		hc.Transport = &oauth2.Transport{Source: cc.TokenSource(ctx), Base: cfg.HTTPClient.Transport}
		cfg.HTTPClient = &hc
	}
	if cfg.Hooks == nil {
		cfg.Hooks = &Hooks{}
	}
	c := &Getter{cfg: cfg}
	if cfg.Token != "" {
		c.auth = "Bearer " + cfg.Token
	}
	return c, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (c *Getter) oauthSecret() string {
	if c.cfg.OAuth == nil {
		return ""
	}
	return c.cfg.OAuth.ClientSecret
}

// Stats returns the getter's counters.
func (c *Getter) Stats() Stats {
	return Stats{Requests: c.requests.Load(), Retries: c.retries.Load()}
}

// attemptError is the failure of one attempt, with what decides a retry.
type attemptError struct {
	err        error
	reason     string        // for Hooks.Retry; "" when not worth a retry
	retryAfter time.Duration // from the answer; zero when none
	slowDown   bool          // a 429, or an answer with a Retry-After: the ERP asks every request to wait
}

// Get GETs the absolute URL u until decode accepts a 2xx body, retrying
// what is transient (see the package documentation). endpoint names the
// request for Hooks; errors call it by what it asks (request), whatever
// the entity.
func (c *Getter) Get(ctx context.Context, endpoint, u string, decode func(http.Header, []byte) error) error {
	return c.GetWith(ctx, endpoint, u, nil, decode)
}

// GetWith is Get with further request headers (they replace the defaults,
// Accept: application/json for one).
func (c *Getter) GetWith(ctx context.Context, endpoint, u string, header http.Header, decode func(http.Header, []byte) error) error {
	what := request(endpoint)
	for attempt := 1; ; attempt++ {
		if wait := time.Until(time.Unix(0, c.pause.Load())); wait > 0 && ctxtime.Sleep(ctx, wait) != nil {
			return fmt.Errorf("erp: %s: wait for the ERP's Retry-After: %w", what, ctx.Err())
		}
		if c.cfg.Limiter != nil {
			if err := c.cfg.Limiter.Wait(ctx); err != nil {
				return fmt.Errorf("erp: %s: wait for the rate limit: %w", what, err)
			}
		}
		c.requests.Add(1)
		start := time.Now()
		status, ae := c.attempt(ctx, u, header, decode)
		var err error
		if ae != nil {
			err = ae.err
		}
		c.cfg.Hooks.request(endpoint, status, time.Since(start), err)
		switch {
		case ae == nil:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("erp: %s: %w (after %d attempts, last: %v)", what, ctx.Err(), attempt, err)
		case ae.reason == "":
			return err
		case attempt > c.cfg.MaxRetries:
			return fmt.Errorf("erp: %s: giving up after %d attempts: %w", what, attempt, err)
		}
		wait := max(c.backoff(attempt), min(ae.retryAfter, c.cfg.MaxRetryAfter))
		if ae.slowDown {
			c.pauseFor(wait)
		}
		c.retries.Add(1)
		c.cfg.Hooks.retry(ae.reason, wait)
		if ctxtime.Sleep(ctx, wait) != nil {
			return fmt.Errorf("erp: %s: %w (after %d attempts, last: %v)", what, ctx.Err(), attempt, err)
		}
	}
}

// request is what an endpoint's request is called in errors: the
// endpoint names (EndpointPage, EndpointCount) are the built-in entity's,
// which a request for another entity's page is not.
func request(endpoint string) string {
	switch endpoint {
	case EndpointPage:
		return "page request"
	case EndpointCount:
		return "count request"
	}
	return endpoint
}

// pauseFor holds every request of the getter for d from now, unless an
// earlier answer holds them longer already.
func (c *Getter) pauseFor(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		cur := c.pause.Load()
		if cur >= until || c.pause.CompareAndSwap(cur, until) {
			return
		}
	}
}

// attempt sends one request and decodes its answer. It returns the HTTP
// status (0 without an answer) and, on failure, what to do about it.
func (c *Getter) attempt(ctx context.Context, u string, header http.Header, decode func(http.Header, []byte) error) (int, *attemptError) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodGet, u, nil)
	if err != nil {
		return 0, &attemptError{err: fmt.Errorf("erp: new request: %w", err)}
	}
	req.Header.Set("Accept", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	switch {
	case c.auth != "":
		req.Header.Set("Authorization", c.auth)
	case c.cfg.Username != "":
		req.SetBasicAuth(c.cfg.Username, c.cfg.Password)
	}
	res, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, c.transportError(ctx, err)
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
		return res.StatusCode, c.transportError(ctx, err)
	}
	if err := decode(res.Header, body); err != nil {
		if !looksJSON(body) {
			// An HTML page of a proxy or a login, not the feed: say who
			// answered what.
			err = fmt.Errorf("GET %s: status %d, Content-Type %q: %w: %q", redactedURL(res.Request.URL),
				res.StatusCode, res.Header.Get("Content-Type"), ErrNotJSON, snippet(c.redact(string(body))))
		}
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
func (c *Getter) transportError(ctx context.Context, err error) *attemptError {
	reason := "network"
	var cve *tls.CertificateVerificationError
	var re *oauth2.RetrieveError
	switch {
	case errors.As(err, &cve):
		reason = ""
	case errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 && re.Response.StatusCode != http.StatusTooManyRequests:
		// The token endpoint refused the client's credentials.
		msg := re.ErrorCode
		if re.ErrorDescription != "" {
			msg += ": " + re.ErrorDescription
		}
		if msg == "" {
			msg = errorMessage(re.Body)
		}
		return &attemptError{err: fmt.Errorf("%w: oauth token endpoint: status %d: %s", ErrUnauthorized, re.Response.StatusCode, c.redact(msg))}
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		reason = "timeout"
	case errors.Is(err, io.ErrUnexpectedEOF):
		reason = "truncated"
	}
	return &attemptError{err: fmt.Errorf("erp: %w", err), reason: reason}
}

// statusError turns a non-2xx answer into an error, retryable for 408,
// 429 and 5xx.
func (c *Getter) statusError(res *http.Response) *attemptError {
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	body := c.redact(errorMessage(b))
	switch code := res.StatusCode; {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return &attemptError{err: &RefusedError{Code: code, Body: body}}
	case code == http.StatusBadRequest:
		return &attemptError{err: fmt.Errorf("%w: %s", ErrBadRequest, body)}
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		after := retryAfter(res.Header.Get("Retry-After"), time.Now())
		return &attemptError{
			err:        &StatusError{Code: code, Body: body},
			reason:     "status " + strconv.Itoa(code),
			retryAfter: after,
			slowDown:   code == http.StatusTooManyRequests || after > 0,
		}
	default:
		return &attemptError{err: &StatusError{Code: code, Body: body, URL: redactedURL(res.Request.URL)}}
	}
}

// redactedURL is u without a password, for messages.
func redactedURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	return u.Redacted()
}

// looksJSON reports whether b starts, after white space, like a JSON
// object or array.
func looksJSON(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && (b[0] == '{' || b[0] == '[')
}

// snippet is the start of a body, white space folded, for one line.
func snippet(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return s
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
func (c *Getter) backoff(n int) time.Duration {
	ceiling := c.cfg.MinBackoff
	for i := 1; i < n && ceiling < c.cfg.MaxBackoff; i++ {
		ceiling = min(2*ceiling, c.cfg.MaxBackoff) // MaxBackoff < MaxInt64/2 in practice
	}
	if ceiling <= 0 {
		return 0
	}
	return rand.N(ceiling + 1)
}

// errorMessage is the message of an error body in one line: the "error"
// string of the REST API, "code: message" of an OData error
// ({"error":{"code":...,"message":...}}, V2's message an object whose
// "value" is the text), or the body itself, cut to 512 bytes.
func errorMessage(b []byte) string {
	body := string(b)
	var msg struct{ Error json.RawMessage }
	if json.Unmarshal(b, &msg) == nil && len(msg.Error) > 0 {
		var s string
		var odata struct {
			Code    any
			Message any
		}
		switch {
		case json.Unmarshal(msg.Error, &s) == nil && s != "":
			body = s
		case json.Unmarshal(msg.Error, &odata) == nil && odata.Message != nil:
			body = fmt.Sprint(odata.Message)
			if m, ok := odata.Message.(map[string]any); ok && m["value"] != nil {
				// OData V2 (SAP Gateway): {"lang":"en","value":"..."}.
				body = fmt.Sprint(m["value"])
			}
			if odata.Code != nil {
				body = fmt.Sprint(odata.Code) + ": " + body
			}
		}
	}
	limit := 512
	if isHTML(body) {
		// An HTML page (a web server's or a proxy's error page): its
		// text, briefly; the markup tells nothing.
		body, limit = "HTML page: "+htmlText(body), 120
	}
	body = strings.Join(strings.Fields(body), " ")
	if len(body) > limit {
		body = strings.ToValidUTF8(body[:limit], "") + "..."
	}
	return body
}

// isHTML reports whether body is an HTML document.
func isHTML(body string) bool {
	head := strings.ToLower(strings.TrimSpace(body[:min(len(body), 512)]))
	return strings.HasPrefix(head, "<!doctype html") || strings.HasPrefix(head, "<html") || strings.Contains(head, "<body")
}

// htmlText is the text of an HTML document: without its tags, its style
// and script elements.
func htmlText(body string) string {
	var b strings.Builder
	lower := strings.ToLower(body)
	for i := 0; i < len(body); {
		if body[i] != '<' {
			b.WriteByte(body[i])
			i++
			continue
		}
		for _, el := range []string{"script", "style"} {
			if strings.HasPrefix(lower[i:], "<"+el) {
				if end := strings.Index(lower[i:], "</"+el+">"); end >= 0 {
					i += end
				}
			}
		}
		end := strings.IndexByte(body[i:], '>')
		if end < 0 {
			break
		}
		b.WriteByte(' ')
		i += end + 1
	}
	return b.String()
}

// redact blanks the secrets of c's config out of s.
func (c *Getter) redact(s string) string {
	for _, sec := range []struct{ v, mask string }{
		{c.cfg.Token, "[token]"}, {c.cfg.Password, "[password]"}, {c.oauthSecret(), "[secret]"},
	} {
		if sec.v != "" {
			s = strings.ReplaceAll(s, sec.v, sec.mask)
		}
	}
	return s
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
