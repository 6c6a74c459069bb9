package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
)

// TestAnODataAnswerThatIsNotJSON: an HTML page through the OData source,
// from every URL (a proxy's sign-in) or from the pages only, is one line
// that names the URL asked, the status, the content type and the start of
// the body: exit 2 when the start-up probe met it, exit 1 (the run failed,
// nothing written) when the run's first page did.
func TestAnODataAnswerThatIsNotJSON(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 10, Seed: 62})
	const page = "<html><head><title>Sign in</title></head>\n<body>proxy login</body></html>"
	proxy := func(countToo bool) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !countToo && strings.HasSuffix(r.URL.Path, "/$count") {
				w.Header().Set("Content-Type", "text/plain")
				w.Write([]byte("10"))
				return
			}
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(page))
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	const snippet = `status 200, Content-Type "text/html": not JSON: "<html><head><title>Sign in</title></head> <body>proxy login</body></html>"`
	all := proxy(true).URL + "/odata/v4/erp/Memberships"
	r := e.Run(context.Background(), "run", "--erp-kind", "odata", "--erp-url", all, "--erp-retries", "0")
	oneLine(t, "HTML from every URL", r, 2, "GET "+all+"/$count: "+snippet)

	pages := proxy(false).URL + "/odata/v4/erp/Memberships"
	for _, cmd := range []string{"run", "verify"} {
		r := e.Run(context.Background(), cmd, "--erp-kind", "odata", "--erp-url", pages, "--erp-retries", "0")
		oneLine(t, "HTML pages, "+cmd, r, 1, "GET "+pages+"?$select=")
		if l := plainLines(r.Stderr)[0]; !strings.Contains(l, snippet) {
			t.Errorf("%s: the line does not say what answered: %s", cmd, l)
		}
	}
	if n := e.Count("SELECT COUNT(*) FROM %s", "memberships"); n != 0 {
		t.Fatalf("the HTML feed wrote %d rows", n)
	}
}
