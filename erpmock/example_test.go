package erpmock_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/erpsync/erpsync/erpmock"
)

// Serves a feed of three records, changes one and shows that it moved to
// the end of the feed with a higher version.
func Example() {
	clock := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	m := erpmock.New(erpmock.Options{Records: 3, Seed: 1, Clock: clock})
	srv := httptest.NewServer(m)
	defer srv.Close()

	before := m.Truth()[0]
	m.Change(3)
	after := m.Truth()[0]
	fmt.Println(after.ErpID, after.Version-before.Version, after.UpdatedAt.Format(time.RFC3339))

	res, err := http.Get(srv.URL + "/api/v1/memberships/count?updated_since=2026-01-01T00:00:00Z")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	fmt.Print(string(body))
	// Output:
	// M0000001 1 2026-01-01T00:00:00Z
	// {"count":3}
}
