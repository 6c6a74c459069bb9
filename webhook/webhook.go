// Package webhook signs and verifies the POSTs that erpsync relay sends
// to a webhook, so that a receiver written in Go can check them with one
// call.
//
// Each POST carries two headers: X-Erpsync-Timestamp, the Unix time in
// seconds at which it was signed, and X-Erpsync-Signature, "sha256=" and
// the hex HMAC-SHA256, under the secret the relay and the receiver share,
// of the time-stamp, a dot and the body ("<timestamp>.<body>"). Verify
// accepts a request whose signature holds and whose time-stamp is within
// a tolerance of the receiver's clock (DefaultTolerance, 5 minutes, either
// way): a request captured on the way cannot be sent again later, and the
// time-stamp cannot be changed without the secret.
//
// What it does not promise: within the tolerance a captured request can
// be replayed; it then carries event ids the receiver has seen (the relay
// delivers at least once, and a receiver de-duplicates on the id anyway).
// The body is not encrypted: use https.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a signed POST.
const (
	// TimestampHeader carries the Unix time in seconds of the signature.
	TimestampHeader = "X-Erpsync-Timestamp"
	// SignatureHeader carries "sha256=" and the hex HMAC-SHA256 of
	// "<timestamp>.<body>".
	SignatureHeader = "X-Erpsync-Signature"
)

// DefaultTolerance is how far a time-stamp may be from the receiver's
// clock, either way, by default.
const DefaultTolerance = 5 * time.Minute

// Errors of Verify.
var (
	// ErrUnsigned: the request has no signature or no time-stamp.
	ErrUnsigned = errors.New("webhook: unsigned request")
	// ErrBadSignature: the signature does not sign the time-stamp and the
	// body under the secret.
	ErrBadSignature = errors.New("webhook: bad signature")
	// ErrExpired: the time-stamp is outside the tolerance.
	ErrExpired = errors.New("webhook: time-stamp outside the tolerance")
)

// Sign is the signature of body signed at t under secret: the values of
// TimestampHeader and SignatureHeader.
func Sign(secret []byte, t time.Time, body []byte) (timestamp, sig string) {
	timestamp = strconv.FormatInt(t.Unix(), 10)
	return timestamp, sign(secret, timestamp, body)
}

// SetHeaders signs body at t under secret into h.
func SetHeaders(h http.Header, secret []byte, t time.Time, body []byte) {
	ts, sig := Sign(secret, t, body)
	h.Set(TimestampHeader, ts)
	h.Set(SignatureHeader, sig)
}

func sign(secret []byte, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// VerifyOptions are Verify's settings.
type VerifyOptions struct {
	// Tolerance is how far the time-stamp may be from Now, either way.
	// Defaults to DefaultTolerance.
	Tolerance time.Duration
	// Now is the receiver's clock. Defaults to time.Now.
	Now func() time.Time
}

// Verify checks the signature in h (a request's headers) of body under
// secret, in constant time, and that its time-stamp is within the
// tolerance; opt may be nil. It returns nil, or an error that wraps
// ErrUnsigned, ErrBadSignature or ErrExpired. Read the body with a limit
// and verify it before parsing it.
func Verify(secret []byte, h http.Header, body []byte, opt *VerifyOptions) error {
	var o VerifyOptions
	if opt != nil {
		o = *opt
	}
	if o.Tolerance <= 0 {
		o.Tolerance = DefaultTolerance
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	ts, sig := h.Get(TimestampHeader), h.Get(SignatureHeader)
	if ts == "" || sig == "" {
		return fmt.Errorf("%w: want headers %s and %s", ErrUnsigned, TimestampHeader, SignatureHeader)
	}
	if !hmac.Equal([]byte(sig), []byte(sign(secret, ts, body))) {
		return ErrBadSignature
	}
	sec, err := strconv.ParseInt(strings.TrimSpace(ts), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s %q is no Unix time", ErrBadSignature, TimestampHeader, ts)
	}
	if d := o.Now().Sub(time.Unix(sec, 0)); d > o.Tolerance || d < -o.Tolerance {
		return fmt.Errorf("%w: signed at %s, %s from now, tolerance %s", ErrExpired, time.Unix(sec, 0).UTC().Format(time.RFC3339), d.Round(time.Second), o.Tolerance)
	}
	return nil
}
