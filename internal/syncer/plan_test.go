package syncer

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/erp"
)

// Plan's parts cover the window exactly, in order, each [Since, Until)
// starting where the one before ends; their counts add up to the window's;
// none holds more than the target but a part of one millisecond.
func TestPlanCoversTheWindow(t *testing.T) {
	t.Parallel()
	m := erpmock.New(erpmock.Options{Records: 20000, Seed: 5})
	srv := httptest.NewServer(m)
	defer srv.Close()
	c, err := erp.New(erp.Config{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Half the feed at one time: a part that cannot be split.
	m.Change(10000)
	since := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, until := range []time.Time{{}, time.Now().Add(time.Hour)} {
		parts, seen, err := Plan(ctx, c, since, until, 8, 100)
		if err != nil {
			t.Fatal(err)
		}
		if seen == nil || len(seen.Records) != 1 || seen.Records[0].UpdatedAt.Before(since) {
			t.Errorf("the plan did not read the window's first record: %+v", seen)
		}
		total, err := c.Count(ctx, since, until)
		if err != nil {
			t.Fatal(err)
		}
		target := total / (8 * partsPerFetcher)
		if len(parts) < 8 || !parts[0].Since.Equal(since) || !parts[len(parts)-1].Until.Equal(until) {
			t.Fatalf("%d parts from %s to %s, want at least 8 from %s to %s", len(parts), parts[0].Since, parts[len(parts)-1].Until, since, until)
		}
		var sum int64
		for i, p := range parts {
			if i > 0 && !p.Since.Equal(parts[i-1].Until) {
				t.Fatalf("part %d starts at %s, the one before ends at %s", i, p.Since, parts[i-1].Until)
			}
			if !p.Until.IsZero() && !p.Until.After(p.Since) {
				t.Fatalf("part %d is empty: [%s, %s)", i, p.Since, p.Until)
			}
			n, err := c.Count(ctx, p.Since, p.Until)
			if err != nil {
				t.Fatal(err)
			}
			if n > slack(target)+1 && !(p.to.Sub(p.from) <= time.Millisecond) && !(i == len(parts)-1 && n == 10000) {
				t.Errorf("part %d [%s, %s) holds %d records, over the target %d", i, p.Since, p.Until, n, target)
			}
			sum += n
		}
		if sum != total {
			t.Fatalf("the parts hold %d records, the window %d", sum, total)
		}
	}
}

// With one fetcher Plan asks the ERP nothing: one part, the window.
func TestPlanOneFetcherAsksNothing(t *testing.T) {
	t.Parallel()
	m := erpmock.New(erpmock.Options{Records: 1000, Seed: 6})
	srv := httptest.NewServer(m)
	defer srv.Close()
	c, err := erp.New(erp.Config{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	parts, seen, err := Plan(context.Background(), c, time.Time{}, time.Time{}, 1, 100)
	if err != nil || len(parts) != 1 || seen != nil || !parts[0].Since.IsZero() || !parts[0].Until.IsZero() {
		t.Fatalf("%v, %d parts %+v, seen %v", err, len(parts), parts, seen)
	}
	if n := m.Requests(); n != 0 {
		t.Fatalf("%d requests to plan one fetcher's window", n)
	}
}

// A first run in parts (a window open at the start: Plan reads the first
// record to find it) reports the feed as one pass does: every record
// fetched once, none a duplicate.
func TestPartsReportTheFeedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, erpmock.Options{Records: 3000, Seed: 7})
	rep := mustRun(t, b.syncer(t, Config{Fetchers: 8, PageSize: 100}))
	if rep.Fetched != 3000 || rep.DuplicatesInFeed != 0 || rep.Inserted != 3000 || rep.LockContended != 0 {
		t.Fatalf("fetched %d, duplicates %d, inserted %d, lock contended %d; want 3000, 0, 3000, 0", rep.Fetched, rep.DuplicatesInFeed, rep.Inserted, rep.LockContended)
	}
	assertTruth(t, b)
}

// A count that fails while the window is being cut (the ERP answers the
// window's count, then no more) costs the parts their sizes, not the run:
// the range is cut in equal times and every record is written.
func TestPlanSurvivesAFailingCount(t *testing.T) {
	t.Parallel()
	b := setup(t, erpmock.Options{Records: 3000, Seed: 8})
	var counts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/count") && counts.Add(1) > 1 {
			http.Error(w, `{"error":"gone"}`, http.StatusNotFound)
			return
		}
		b.mock.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c, err := erp.New(erp.Config{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	parts, _, err := Plan(context.Background(), c, time.Time{}, time.Time{}, 8, 100)
	if err != nil || len(parts) < 2 || counts.Load() < 2 {
		t.Fatalf("%v: %d parts after %d counts", err, len(parts), counts.Load())
	}
	b.erp = c
	rep := mustRun(t, b.syncer(t, Config{Fetchers: 8, PageSize: 100}))
	if rep.Inserted != 3000 {
		t.Fatalf("inserted %d, want 3000", rep.Inserted)
	}
	assertTruth(t, b)
}
