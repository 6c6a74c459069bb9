package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/erpsync/erpsync/webhook"
)

// TestReplayRefused: a request captured and sent again past the tolerance
// is refused; moving its time-stamp breaks its signature; a signature of
// the body alone (no time-stamp) does not verify.
func TestReplayRefused(t *testing.T) {
	secret, body := []byte("s3cret"), []byte(`[{"id":"a"}]`)
	signed := time.Unix(1_800_000_000, 0)
	h := http.Header{}
	webhook.SetHeaders(h, secret, signed, body)
	at := func(d time.Duration, tol time.Duration) *webhook.VerifyOptions {
		return &webhook.VerifyOptions{Tolerance: tol, Now: func() time.Time { return signed.Add(d) }}
	}
	for _, c := range []struct {
		name     string
		h        http.Header
		now, tol time.Duration
		want     error
	}{
		{"fresh", h, time.Minute, 0, nil},
		{"at the tolerance", h, 5 * time.Minute, 0, nil},
		{"replayed 5m1s later", h, 5*time.Minute + time.Second, 0, webhook.ErrExpired},
		{"replayed a day later", h, 24 * time.Hour, 0, webhook.ErrExpired},
		{"from 6 minutes ahead", h, -6 * time.Minute, 0, webhook.ErrExpired},
		{"a tolerance of 30s", h, 31 * time.Second, 30 * time.Second, webhook.ErrExpired},
		{"time-stamp moved", withHeader(h, webhook.TimestampHeader, strconv.FormatInt(signed.Add(time.Hour).Unix(), 10)), time.Hour, 0, webhook.ErrBadSignature},
		{"body-only signature", withHeader(h, webhook.SignatureHeader, bodyOnly(secret, body)), 0, 0, webhook.ErrBadSignature},
		{"no time-stamp", withHeader(h, webhook.TimestampHeader, ""), 0, 0, webhook.ErrUnsigned},
	} {
		err := webhook.Verify(secret, c.h, body, at(c.now, c.tol))
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func withHeader(h http.Header, k, v string) http.Header {
	h = h.Clone()
	h.Set(k, v)
	return h
}

func bodyOnly(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
