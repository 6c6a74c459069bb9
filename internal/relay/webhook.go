package relay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/webhook"
)

// WebhookOptions are a webhook sink's settings.
type WebhookOptions struct {
	// Secret signs each body (see package webhook): headers
	// X-Erpsync-Timestamp and X-Erpsync-Signature.
	Secret []byte
	// Unsigned sends the POSTs without a signature; without it an empty
	// Secret is an error.
	Unsigned bool
	// Timeout bounds one POST. Defaults to 30s.
	Timeout time.Duration
	// Client sends the POSTs; it is used with redirects not followed.
	// Defaults to a client with Timeout.
	Client *http.Client
	// Now is the clock of the time-stamps. Defaults to time.Now.
	Now func() time.Time
}

// ErrUnsigned is NewWebhook's error for a webhook without a secret that
// is not declared unsigned.
var ErrUnsigned = errors.New("relay: a webhook without a secret (want a secret, or unsigned)")

// Webhook POSTs each batch as a JSON array of events.
type Webhook struct {
	url    string
	secret []byte
	client *http.Client
	now    func() time.Time
}

// NewWebhook returns the sink of the webhook at url. It never follows a
// redirect: a 3xx is a rejection.
func NewWebhook(url string, opt WebhookOptions) (*Webhook, error) {
	if len(opt.Secret) == 0 && !opt.Unsigned {
		return nil, ErrUnsigned
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 30 * time.Second
	}
	c := &http.Client{Timeout: opt.Timeout}
	if opt.Client != nil {
		cc := *opt.Client
		c = &cc
	}
	// A followed 301, 302 or 303 turns the POST into a GET without the
	// body, and its 2xx would acknowledge events nobody received.
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Webhook{url: url, secret: opt.Secret, client: c, now: opt.Now}, nil
}

// Body is the JSON array of evs that a POST carries.
func Body(evs []outbox.Pending) []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, e := range evs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(e.Body)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// IdempotencyKey is the Idempotency-Key of a batch: the hex SHA-256 of its
// event ids, the same for every POST of the same events.
func IdempotencyKey(evs []outbox.Pending) string {
	h := sha256.New()
	for _, e := range evs {
		h.Write([]byte(e.ID))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Deliver POSTs evs in one body. A 2xx acknowledges all of them; 408, 429
// and 5xx are retried (a *RetryAfterError when the answer says when); any
// other status, a redirect included, is a *RejectedError.
func (w *Webhook) Deliver(ctx context.Context, evs []outbox.Pending) (int, error) {
	body := Body(evs)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return 0, &RejectedError{Msg: fmt.Sprintf("webhook %s: %v", w.url, err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", IdempotencyKey(evs))
	if len(w.secret) > 0 {
		webhook.SetHeaders(req.Header, w.secret, w.now(), body)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("webhook: %w", err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		return len(evs), nil
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		err := fmt.Errorf("webhook %s answered %s", w.url, resp.Status)
		if d, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return 0, &RetryAfterError{Err: err, After: d}
		}
		return 0, err
	}
	msg := fmt.Sprintf("webhook %s rejected %d events (%s .. %s): %s", w.url, len(evs), evs[0].ID, evs[len(evs)-1].ID, resp.Status)
	if code >= 300 && code < 400 {
		msg = fmt.Sprintf("webhook %s answered %s, Location %q: a redirect is not followed (fix --events-url); %d events (%s .. %s) not delivered",
			w.url, resp.Status, resp.Header.Get("Location"), len(evs), evs[0].ID, evs[len(evs)-1].ID)
		snippet = nil
	}
	if s := strings.Join(strings.Fields(string(snippet)), " "); s != "" {
		msg += ": " + s
	}
	return 0, &RejectedError{Msg: msg + "; the events stay pending"}
}

// retryAfter parses a Retry-After value: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// Close does nothing: a webhook holds no connection of its own.
func (w *Webhook) Close() error { return nil }
