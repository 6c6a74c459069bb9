package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// discoverServer serves the Business Central-style fixture's $metadata at
// /api/v2.0/$metadata to the basic-auth user u:p.
func discoverServer(t *testing.T) *httptest.Server {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "discover", "testdata", "bc-customers.xml"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "u" || p != "pw-c4ntgu3ss" {
			w.Header().Set("WWW-Authenticate", "Basic")
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/api/v2.0/$metadata" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/xml")
		w.Write(doc)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func runDiscover(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), append([]string{"discover"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// TestDiscover prints the config file of a service, or writes it to -o
// (an existing file only with --force); the password is in no output.
func TestDiscover(t *testing.T) {
	srv := discoverServer(t)
	auth := []string{"--erp-url", srv.URL + "/api/v2.0", "--erp-username", "u", "--erp-password", "pw-c4ntgu3ss"}
	code, out, errs := runDiscover(auth...)
	if code != ExitOK || !strings.Contains(out, "  url: \""+srv.URL+"/api/v2.0/\"") || !strings.Contains(out, "updated_at: lastModifiedDateTime") {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
	if strings.Contains(out, "pw-c4ntgu3ss") || strings.Contains(out, "username: u") {
		t.Fatalf("the file holds the credentials:\n%s", out)
	}

	path := filepath.Join(t.TempDir(), "erpsync.yaml")
	if code, _, errs := runDiscover(append(auth, "-o", path)...); code != ExitOK {
		t.Fatalf("-o: exit %d: %s", code, errs)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != out {
		t.Fatalf("-o wrote %q (%v), want what stdout had", b, err)
	}
	os.WriteFile(path, []byte("mine\n"), 0o644)
	code, _, errs = runDiscover(append(auth, "-o", path)...)
	if b, _ := os.ReadFile(path); code != ExitUsage || string(b) != "mine\n" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "--force") {
		t.Fatalf("-o over a file: exit %d, stderr %q, file %q; want 2, one line naming --force, the file kept", code, errs, b)
	}
	if code, _, errs := runDiscover(append(auth, "-o", path, "--force")...); code != ExitOK {
		t.Fatalf("--force: exit %d: %s", code, errs)
	}
	if b, _ := os.ReadFile(path); string(b) != out {
		t.Fatalf("--force wrote %q", b)
	}
}

// TestDiscoverErrors: one line each; 2 for bad usage, 1 for what the
// server answers.
func TestDiscoverErrors(t *testing.T) {
	srv := discoverServer(t)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, ExitUsage, "--erp-url"},
		{[]string{"--erp-url", "ftp://h/x"}, ExitUsage, "--erp-url"},
		{[]string{"--erp-url", srv.URL + "/api/v2.0/", "--erp-password", "pw"}, ExitUsage, "--erp-username"},
		{[]string{"--erp-url", srv.URL + "/api/v2.0/", "--erp-username", "u", "--erp-password", "wrong"}, ExitFailed, "refused the credentials"},
		{[]string{"--erp-url", srv.URL + "/api/v2.0/customers", "--erp-username", "u", "--erp-password", "pw-c4ntgu3ss"}, ExitFailed, "the service root"},
		{[]string{"--erp-url", "http://127.0.0.1:1/x/", "--erp-retries", "0"}, ExitFailed, "unreachable"},
	} {
		code, out, errs := runDiscover(c.args...)
		if code != c.code || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d and one line with %q", c.args, code, out, errs, c.code, c.want)
		}
	}
}
