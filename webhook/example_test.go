package webhook_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/erpsync/erpsync/webhook"
)

// A receiver reads the body with a limit, verifies it, and only then
// parses it. A request signed longer ago than the tolerance (a captured
// one sent again) is refused.
func Example() {
	secret := []byte("the secret in the relay's --events-secret-file")
	receiver := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		if err := webhook.Verify(secret, r.Header, body, nil); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		// Parse the JSON array of events, store them (de-duplicated on
		// their id), then answer 2xx.
		w.WriteHeader(http.StatusNoContent)
	})

	body := []byte(`[{"id":"3f0c9a5e-6d1b-5c2e-9f41-0a7d5e2b8c11","entity":"customers","op":"update"}]`)
	for _, signedAt := range []time.Time{time.Now(), time.Now().Add(-time.Hour)} {
		req := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
		webhook.SetHeaders(req.Header, secret, signedAt, body)
		w := httptest.NewRecorder()
		receiver.ServeHTTP(w, req)
		fmt.Println(w.Code)
	}
	// Output:
	// 204
	// 401
}

// Verify tells why it refused a request.
func ExampleVerify() {
	secret := []byte("s3cret")
	body := []byte(`[]`)
	signedAt := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	h := http.Header{}
	webhook.SetHeaders(h, secret, signedAt, body)
	fmt.Println(h.Get(webhook.TimestampHeader))

	at := func(now time.Time) *webhook.VerifyOptions {
		return &webhook.VerifyOptions{Now: func() time.Time { return now }}
	}
	fmt.Println(webhook.Verify(secret, h, body, at(signedAt.Add(4*time.Minute))))
	fmt.Println(errors.Is(webhook.Verify(secret, h, body, at(signedAt.Add(6*time.Minute))), webhook.ErrExpired))
	fmt.Println(errors.Is(webhook.Verify(secret, h, []byte(`[{}]`), at(signedAt)), webhook.ErrBadSignature))
	fmt.Println(errors.Is(webhook.Verify([]byte("other"), h, body, at(signedAt)), webhook.ErrBadSignature))
	fmt.Println(errors.Is(webhook.Verify(secret, http.Header{}, body, nil), webhook.ErrUnsigned))
	// Output:
	// 1767366245
	// <nil>
	// true
	// true
	// true
	// true
}
