package erp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/erp"
)

// An error page in HTML (a web server's, a proxy's) is named by its text,
// briefly, without its markup; a request for an entity other than the
// built-in memberships is not called memberships.
func TestHTMLErrorPageIsAShortExcerpt(t *testing.T) {
	const page = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Error</title>\n<style>body{color:red}</style></head>\n<body>\n<pre>Cannot GET /odata/v4/salez/Customers/$count</pre>\n</body>\n</html>\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(page + strings.Repeat("<p>more</p>", 100)))
	}))
	defer srv.Close()
	c, err := erp.New(erp.Config{BaseURL: srv.URL, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Count(context.Background(), time.Time{}, time.Time{})
	const want = "erp: count request: giving up after 1 attempts: erp: status 500: HTML page: Error Cannot GET /odata/v4/salez/Customers/$count more more more more more more more more more more more more..."
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}
