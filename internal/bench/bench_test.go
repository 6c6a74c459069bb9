package bench_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/bench"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

func memberships(from, n int, version, fence int64) []store.Membership {
	ms := make([]store.Membership, n)
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range ms {
		ms[i] = store.Membership{
			ErpID: fmt.Sprintf("M%09d", from+i), MemberID: fmt.Sprintf("U%09d", (from+i)/2), ProductCode: "GOLD",
			Status: "ACTIVE", StartsAt: at, Version: version, UpdatedAt: at.Add(time.Duration(version) * time.Second), Fence: fence,
		}
	}
	return ms
}

// BenchmarkUpsertChunk measures the statements of the chunked write path,
// one chunk an op: the multi-row INSERT of absent rows, the guarded
// multi-row upsert over older rows (every row changes) and over current
// rows (none changes), and the version read that precedes them.
func BenchmarkUpsertChunk(b *testing.B) {
	st, _ := testenv.MigratedStore(b)
	ctx := context.Background()
	next := 0
	for _, n := range []int{100, 500, 1000} {
		b.Run(fmt.Sprintf("insert/%d", n), func(b *testing.B) {
			for b.Loop() {
				if err := st.Insert(ctx, memberships(next, n, 1, 1)); err != nil {
					b.Fatal(err)
				}
				next += n
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
		// A block of existing rows that the next two write over.
		base := next
		if err := st.Insert(ctx, memberships(base, n, 1, 1)); err != nil {
			b.Fatal(err)
		}
		next += n
		version := int64(1)
		b.Run(fmt.Sprintf("upsert-older/%d", n), func(b *testing.B) {
			for b.Loop() {
				version++
				if err := st.Upsert(ctx, memberships(base, n, version, version)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
		b.Run(fmt.Sprintf("upsert-unchanged/%d", n), func(b *testing.B) {
			ms := memberships(base, n, version, version)
			for b.Loop() {
				if err := st.Upsert(ctx, ms); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
		b.Run(fmt.Sprintf("versions/%d", n), func(b *testing.B) {
			ids := make([]string, n)
			for i, m := range memberships(base, n, 1, 1) {
				ids[i] = m.ErpID
			}
			for b.Loop() {
				got, err := st.Versions(ctx, ids)
				if err != nil {
					b.Fatal(err)
				}
				if len(got) != n {
					b.Fatalf("read %d versions, want %d", len(got), n)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// TestQuick runs every measurement on a tiny feed: the bench works, not
// how fast it is.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("builds erpsync and runs several backfills")
	}
	bin, err := testenv.Build(t.TempDir(), "./cmd/erpsync")
	if err != nil {
		t.Fatal(err)
	}
	dsn := benchDSN(t)
	var log bytes.Buffer
	res, err := bench.Run(context.Background(), bench.Config{
		Bin: bin, MySQLDSN: dsn, RedisAddr: testenv.RedisAddr(),
		Records: 3000, SeedRecords: 500, Small: 500, Big: 2000, Log: &log,
	})
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, log.String())
	}
	for name, r := range map[string]*bench.Result{"ceiling": res.Ceiling, "seed": res.Seed, "backfill": res.Backfill, "rerun": res.Rerun, "small": res.Small, "big": res.Big, "redlock": res.Redlock, "cluster": res.Cluster,
		"typed": res.Typed, "typed raw": res.TypedRaw, "slow ERP, one fetcher": res.Slow.One, "slow ERP, fetchers": res.Slow.Many} {
		if r == nil || r.PerSecond <= 0 {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if res.Backfill.Report.Inserted != 3000 || res.Rerun.Report.Unchanged != 3000 || res.Big.PeakRSSKiB <= 0 || res.Typed.Report.Inserted != 3000 {
		t.Errorf("backfill %+v, re-run %+v, big %+v, typed %+v", res.Backfill.Report, res.Rerun.Report, res.Big, res.Typed.Report)
	}
	if got := len(res.Goals()); got != 13 {
		t.Errorf("%d goals, want 13", got)
	}
	if len(res.Slow.Rounds) != 1 || res.Slow.VerifyOne == nil || res.Slow.VerifyMany == nil || res.Slow.ReconcileOne == nil || res.Slow.ReconcileMany == nil {
		t.Errorf("slow ERP: %+v", res.Slow)
	}
	var md bytes.Buffer
	res.Markdown(&md)
	if !strings.Contains(md.String(), "| backfill / ceiling |") || !strings.Contains(md.String(), "| typed backfill (12 columns) |") {
		t.Errorf("markdown:\n%s", md.String())
	}
}

func TestRefusesOtherDatabases(t *testing.T) {
	_, err := bench.Run(context.Background(), bench.Config{Bin: "x", MySQLDSN: "root@tcp(127.0.0.1:3306)/erpsync?parseTime=true"})
	if err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Fatalf("err = %v, want a refusal", err)
	}
}

// benchDSN returns the DSN of a fresh database dropped when the test ends.
func benchDSN(t *testing.T) string { return testenv.MySQLDSNNamed(t, "erpsync_bench_t_") }

// The bounds table splits a topology's cost against one Redis's from the
// CPU columns of the same run.
func TestBounds(t *testing.T) {
	row := func(perSecond, erpsync, mysql, redis, own float64) *bench.Result {
		return &bench.Result{Records: 100000, PerSecond: perSecond, CPU: bench.CPU{Erpsync: erpsync, MySQL: mysql, Redis: redis, Bench: own}}
	}
	r := &bench.Results{
		Backfill: row(100000, 0.80, 0.80, 0.40, 0.00),
		Redlock:  row(40000, 1.20, 0.80, 3.00, 0.00),
	}
	bs := r.Bounds()
	if len(bs) != 1 {
		t.Fatalf("bounds = %+v, want the Redlock's only", bs)
	}
	b := bs[0]
	near := func(got, want float64) bool { return got > want-0.005 && got < want+0.005 }
	// one Redis: 20 µs a record, 4 of them Redis; the Redlock 50 µs, 30
	// Redis, 12 erpsync; with no cost but four more copies of the 4 µs of
	// Redis: 20 / 36.
	if !near(b.Rate, 0.40) || !near(b.CPU, 0.40) || !near(b.Redis, 7.5) || !near(b.Erpsync, 1.5) || !near(b.Best, 20.0/36) {
		t.Errorf("bound = %+v", b)
	}
	var md strings.Builder
	r.Markdown(&md)
	if !strings.Contains(md.String(), "| Redlock 5 masters | 0.40 | 0.40 | 7.50 | 1.50 | 0.56 |") {
		t.Errorf("markdown lacks the bound row:\n%s", md.String())
	}
}

// The typed feed serves, page by page, exactly the rows the raw insert
// writes: erpsync's REST source decodes every record to the same key,
// values, version and updated_at, and an updated_since window starts at
// the first record it holds.
func TestTypedFeed(t *testing.T) {
	const n = 2503
	feed := bench.NewTypedFeed(n)
	srv := httptest.NewServer(feed)
	defer srv.Close()
	sch, err := bench.TypedSchema()
	if err != nil {
		t.Fatal(err)
	}
	got := bench.ReadFeed(t, srv.URL, sch, bench.TypedShape(), 500)
	want := feed.Rows(0, n)
	if len(got) != n {
		t.Fatalf("%d records, want %d", len(got), n)
	}
	for i, r := range got {
		w := want[i]
		if r.ErpID != w.Key || r.Version != w.Version || !r.UpdatedAt.Equal(w.UpdatedAt) || len(r.Vals) != bench.TypedColumns {
			t.Fatalf("record %d: %q v%d %v, want %q v%d %v", i, r.ErpID, r.Version, r.UpdatedAt, w.Key, w.Version, w.UpdatedAt)
		}
		for j, v := range r.Vals {
			if wv := w.Vals[j]; v.Null != wv.Null || v.S != wv.S || v.I != wv.I || !v.T.Equal(wv.T) {
				t.Fatalf("record %d column %d: %+v, want %+v", i, j, v, wv)
			}
		}
	}
	c, err := erp.New(erp.Config{BaseURL: srv.URL, Schema: sch, Shape: bench.TypedShape()})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := c.Count(context.Background(), got[1000].UpdatedAt, time.Time{}); err != nil || n != 1504 {
		t.Errorf("count from record 1000's updated_at = %d, %v; want 1504 (records 999 to 1001 share a millisecond)", n, err)
	}
}
