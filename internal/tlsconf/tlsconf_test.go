package tlsconf_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/internal/tlsconf"
)

func TestLoad(t *testing.T) {
	ca := testenv.NewCA(t)
	cert, key := ca.Issue(t, "client")
	c, err := tlsconf.Load(tlsconf.Files{CA: ca.File, Cert: cert, Key: key})
	if err != nil || c.RootCAs == nil || len(c.Certificates) != 1 {
		t.Fatalf("Load = %+v, %v; want the CA pool and one client certificate", c, err)
	}
	if c, err := tlsconf.Load(tlsconf.Files{}); err != nil || c.RootCAs != nil {
		t.Fatalf("no files: %+v, %v; want the system pool", c, err)
	}
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600)
	for name, f := range map[string]tlsconf.Files{
		"not PEM":     {CA: notPEM},
		"missing CA":  {CA: notPEM + ".missing"},
		"cert only":   {Cert: cert},
		"key only":    {Key: key},
		"swapped":     {Cert: key, Key: cert},
		"wrong files": {CA: key},
	} {
		if _, err := tlsconf.Load(f); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := tlsconf.Load(tlsconf.Files{CA: notPEM}); !errors.Is(err, tlsconf.ErrNoCertificate) {
		t.Errorf("not PEM: %v, want ErrNoCertificate", err)
	}
}
