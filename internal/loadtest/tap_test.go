package loadtest

import (
	"math"
	"slices"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
)

func TestScanVersions(t *testing.T) {
	body := []byte(`{"data":[` +
		`{"erp_id":"M0000001","member_id":"U0000001","product_code":"GOLD","status":"ACTIVE","starts_at":"2025-01-01T00:00:00.000Z","ends_at":null,"version":3,"updated_at":"2025-01-01T00:00:00.000Z"},` +
		`{"erp_id":"M0000002 bad/id","product_code":"GOLD","status":"ACTIVE","starts_at":"x","ends_at":null,"version":"4","updated_at":"2025-01-01T00:00:00.000Z"},` +
		`{"erp_id":"M0000003","member_id":"U0000002","product_code":"GOLD","status":"PENDING","starts_at":"2025-01-01T00:00:00.000Z","ends_at":null,"version":0,"updated_at":"2025-01-01T00:00:00.000Z"},` +
		`{"erp_id":"M0000004","member_id":"U0000002","product_code":"GOLD","status":"ACTIVE","starts_at":"2025-01-01T00:00:00.000Z","ends_at":null,"version":12,"updated_at":"2025-01-01T00:00:00.000Z"}` +
		`],"next_cursor":null}`)
	got, items := scanVersions(body)
	want := []version{{"M0000001", 3}, {"M0000004", 12}}
	if !slices.Equal(got, want) || items != 4 {
		t.Fatalf("scanVersions = %v, %d items, want %v, 4 items", got, items, want)
	}
}

// TestScanVersionsReadsTheMock checks the scanner against what erpmock
// really writes, invalid records included.
func TestScanVersionsReadsTheMock(t *testing.T) {
	m := erpmock.New(erpmock.Options{Records: 500, Seed: 7, Faults: erpmock.Faults{InvalidRate: 0.1}})
	truth := map[string]int64{}
	for _, r := range m.Truth() {
		truth[r.ErpID] = r.Version
	}
	tp := newTap(m, 1)
	w := &recorder{header: map[string][]string{}}
	r := newRequest(t, "/p0/api/v1/memberships?limit=1000")
	tp.ServeHTTP(w, r)
	if w.code != 200 {
		t.Fatalf("status %d", w.code)
	}
	got, items := scanVersions(w.body)
	if items != 500 {
		t.Fatalf("scanned %d items, want 500", items)
	}
	scanned := map[string]int64{}
	for _, v := range got {
		scanned[v.id] = v.v
	}
	// Every valid record, at its version, has its serve time; invalid
	// ones may or may not be scanned.
	for id, v := range truth {
		if scanned[id] != v {
			t.Fatalf("%s: scanned version %d, truth %d", id, scanned[id], v)
		}
		if _, ok := tp.firstServed(id, v); !ok {
			t.Fatalf("%s v%d has no serve time", id, v)
		}
	}
	if n := tp.procs[0].served.Load(); n != 500 {
		t.Fatalf("served %d, want 500", n)
	}
}

func TestDistribution(t *testing.T) {
	var ms []float64
	for i := 1; i <= 1000; i++ {
		ms = append(ms, float64(i))
	}
	d := distribution(ms, true)
	if d.Count != 1000 || d.P50 != 500 || d.P95 != 950 || d.P99 != 990 || d.Min != 1 || d.Max != 1000 || d.Mean != 500.5 {
		t.Fatalf("distribution = %+v", d)
	}
	var n int64
	prev := 0.0
	for _, b := range d.Histogram {
		n += b.Count
		if b.UpperMS <= prev {
			t.Fatalf("buckets not increasing: %+v", d.Histogram)
		}
		prev = b.UpperMS
	}
	if n != 1000 || d.Histogram[0].Le != "1" || d.Histogram[len(d.Histogram)-1].Le != "1000" {
		t.Fatalf("histogram = %+v", d.Histogram)
	}
	if d := distribution([]float64{math.MaxFloat64}, true); d.Histogram[0].Le != "+Inf" {
		t.Fatalf("last bucket = %+v", d.Histogram)
	}
	if d := distribution(nil, true); d.Count != 0 {
		t.Fatalf("empty distribution = %+v", d)
	}
}
