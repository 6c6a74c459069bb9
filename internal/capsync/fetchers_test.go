package capsync

import (
	"context"
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/captest"
	"github.com/erpsync/erpsync/internal/odata"
	"github.com/erpsync/erpsync/internal/verify"
)

// countRequests returns the $count requests of CAP's log whose $filter
// closes the window with an upper bound on LastChangeDateTime: those a
// plan of parts sends to size them.
func countRequests(logs string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`GET (/odata/v[24]/\S*/\$count\S*)`).FindAllStringSubmatch(logs, -1) {
		u, err := url.QueryUnescape(m[1])
		if err == nil && strings.Contains(u, "LastChangeDateTime lt ") {
			out = append(out, u)
		}
	}
	return out
}

// TestFetchersWriteWhatOneFetcherWrites backfills 3000 records of CAP
// (pages capped at 100 rows) with --fetchers 1, empties the table and
// backfills again with --fetchers 4, through V4 and V2: the parts, sized
// with the service's $count over [since, until), write every row exactly
// as one fetcher did, the CAP records value for value. verify and
// reconcile then scan the feed in 4 parts too: verify is clean, and a
// reconcile after 12 records were deleted in CAP soft-deletes exactly
// those.
func TestFetchersWriteWhatOneFetcherWrites(t *testing.T) {
	t.Parallel()
	captest.ForVersions(t, func(t *testing.T, v string) {
		e := setupOn(t, captest.Options{Records: 3000, Seed: 21, PageLimit: 100}, v)
		backfill := []string{"backfill", "--since", "2024-01-01T00:00:00Z", "--page-size", "100"}
		e.MustRun(append(backfill, "--fetchers", "1")...)
		e.assertTruth()
		one := e.rows()
		if _, err := e.DB.Exec("DELETE FROM " + e.Table("memberships")); err != nil {
			t.Fatal(err)
		}
		counted := len(countRequests(e.cap.Logs()))
		e.MustRun(append(backfill, "--fetchers", "4")...)
		// CAP's V2 adapter logs each request it serves (CAP's V4 does not).
		if sized := countRequests(e.cap.Logs())[counted:]; v == odata.Version2 {
			if len(sized) == 0 {
				t.Errorf("--fetchers 4: no $count of a window closed by LastChangeDateTime lt ...; the parts were not sized by the service's count")
			}
			for _, u := range sized {
				if !strings.Contains(u, "lt datetimeoffset'") && !strings.Contains(u, "lt datetime'") {
					t.Errorf("V2 $count with a bare time literal: %s", u)
				}
			}
			t.Logf("%d $count requests sized the parts, e.g. %s", len(sized), sized[0])
		}
		e.assertUnchanged(one, "--fetchers 4 after --fetchers 1")
		e.assertTruth()

		r := e.Run(context.Background(), "verify", "--json", "--fetchers", "4")
		var res verify.Result
		if err := json.Unmarshal([]byte(r.Stdout), &res); r.Code != 0 || err != nil || !res.OK() || res.FeedRecords != 3000 || res.Matching != 3000 {
			t.Errorf("verify --fetchers 4: exit %d, %+v: %s", r.Code, res, r.Out())
		}
		gone := every(captest.Seed(3000, 21), 7, 250) // 12 records
		e.remove(gone)
		if _, rep := e.reconcile(0, "--fetchers", "4"); rep["deleted"] != float64(len(gone)) || rep["restored"] != float64(0) || rep["repaired"] != float64(0) {
			t.Errorf("reconcile --fetchers 4 after %d records were deleted: report %v", len(gone), rep)
		}
		e.assertTruth()
	})
}
