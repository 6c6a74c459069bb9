package erp_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/testenv"
)

// TestHTTPSWithACustomCA: Config.TLS trusts the ERP's CA; another CA fails
// at once, without retries, since a certificate does not heal.
func TestHTTPSWithACustomCA(t *testing.T) {
	ca, other := testenv.NewCA(t), testenv.NewCA(t)
	srv := httptest.NewUnstartedServer(erpmock.New(erpmock.Options{Records: 10, Seed: 1}))
	srv.TLS = ca.ServerTLS(t, "erp")
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	ctx := context.Background()

	c, err := erp.New(erp.Config{BaseURL: srv.URL, TLS: ca.ClientTLS()})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := c.Count(ctx, time.Time{}, time.Time{}); err != nil || n != 10 {
		t.Fatalf("count over TLS = %d, %v; want 10", n, err)
	}

	c, err = erp.New(erp.Config{BaseURL: srv.URL, TLS: other.ClientTLS(), MinBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Count(ctx, time.Time{}, time.Time{})
	var cve *tls.CertificateVerificationError
	if !errors.As(err, &cve) {
		t.Fatalf("count with the wrong CA: %v, want a certificate verification error", err)
	}
	if s := c.Stats(); s.Requests != 1 || s.Retries != 0 {
		t.Fatalf("wrong CA: %d requests, %d retries; want 1 and 0", s.Requests, s.Retries)
	}
}
