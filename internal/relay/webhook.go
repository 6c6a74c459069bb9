package relay

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/erpsync/erpsync/internal/outbox"
)

// SignatureHeader is the header of a webhook body's signature:
// "sha256=" and the hex HMAC-SHA256 of the body under the secret.
const SignatureHeader = "X-Erpsync-Signature"

// Sign is the value of SignatureHeader for body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether sig (a SignatureHeader value) signs body under
// secret, in constant time.
func Verify(secret, body []byte, sig string) bool {
	return hmac.Equal([]byte(sig), []byte(Sign(secret, body)))
}

// WebhookOptions are a webhook sink's settings.
type WebhookOptions struct {
	// Secret signs each body; empty: no signature header.
	Secret []byte
	// Timeout bounds one POST. Defaults to 30s.
	Timeout time.Duration
	// Client sends the POSTs. Defaults to a client with Timeout.
	Client *http.Client
}

// Webhook POSTs each batch as a JSON array of events.
type Webhook struct {
	url    string
	secret []byte
	client *http.Client
}

// NewWebhook returns the sink of the webhook at url; opt may be nil.
func NewWebhook(url string, opt *WebhookOptions) *Webhook {
	var o WebhookOptions
	if opt != nil {
		o = *opt
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: o.Timeout}
	}
	return &Webhook{url: url, secret: o.Secret, client: o.Client}
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
// other status is a *RejectedError.
func (w *Webhook) Deliver(ctx context.Context, evs []outbox.Pending) (int, error) {
	body := Body(evs)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return 0, &RejectedError{Msg: fmt.Sprintf("webhook %s: %v", w.url, err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", IdempotencyKey(evs))
	if len(w.secret) > 0 {
		req.Header.Set(SignatureHeader, Sign(w.secret, body))
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
