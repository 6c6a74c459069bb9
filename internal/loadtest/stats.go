package loadtest

import (
	"math"
	"slices"
	"strconv"
)

// Distribution summarises a set of durations in milliseconds.
type Distribution struct {
	Count int64   `json:"count"`
	Min   float64 `json:"min_ms"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
	// Histogram has logarithmic buckets; empty buckets at either end are
	// left out.
	Histogram []Bucket `json:"histogram,omitempty"`
}

// Bucket counts the values in (the previous bucket's bound, Le]. Le is a
// number of milliseconds, or "+Inf" for the last bucket.
type Bucket struct {
	Le      string  `json:"le_ms"`
	UpperMS float64 `json:"-"`
	Count   int64   `json:"count"`
}

// bounds are the upper bounds of the histogram buckets: six a decade from
// 0.1 ms to 10 minutes, then +Inf.
var bounds = func() []float64 {
	var b []float64
	for e := -1; e <= 5; e++ {
		for _, m := range []float64{1, 1.5, 2, 3, 5, 7} {
			b = append(b, m*math.Pow10(e))
		}
	}
	return append(b, 600000, math.Inf(1))
}()

// distribution sorts ms in place and summarises it.
func distribution(ms []float64, histogram bool) Distribution {
	if len(ms) == 0 {
		return Distribution{}
	}
	slices.Sort(ms)
	sum := 0.0
	for _, v := range ms {
		sum += v
	}
	d := Distribution{
		Count: int64(len(ms)),
		Min:   ms[0],
		Mean:  sum / float64(len(ms)),
		P50:   quantile(ms, 0.50),
		P95:   quantile(ms, 0.95),
		P99:   quantile(ms, 0.99),
		Max:   ms[len(ms)-1],
	}
	if !histogram {
		return d
	}
	counts := make([]int64, len(bounds))
	k := 0
	for _, v := range ms {
		for v > bounds[k] {
			k++
		}
		counts[k]++
	}
	lo, hi := 0, len(counts)-1
	for lo < hi && counts[lo] == 0 {
		lo++
	}
	for hi > lo && counts[hi] == 0 {
		hi--
	}
	for i := lo; i <= hi; i++ {
		d.Histogram = append(d.Histogram, Bucket{Le: strconv.FormatFloat(bounds[i], 'g', -1, 64), UpperMS: bounds[i], Count: counts[i]})
	}
	return d
}

// quantile is the nearest-rank quantile q of sorted values.
func quantile(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
