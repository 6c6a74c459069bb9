package syncer

import (
	"math"
	"sync"
	"time"
)

// Latency summarises how long records took from the fetch of their page to
// the end of their chunk's write: the queue, the locks, the reads and the
// writes, retries included. Milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// latencyHist is a histogram of record latencies on a log scale: bucket i
// holds latencies up to 0.1 ms × 1.2^i (about 20% resolution, up to hours).
type latencyHist struct {
	mu      sync.Mutex
	buckets [128]int64
	n       int64
	max     time.Duration
}

const latencyBase = 100 * time.Microsecond

var latencyGrowth = math.Log(1.2)

func (h *latencyHist) observe(d time.Duration, records int) {
	i := 0
	if d > latencyBase {
		i = min(int(math.Ceil(math.Log(float64(d)/float64(latencyBase))/latencyGrowth)), len(h.buckets)-1)
	}
	h.mu.Lock()
	h.buckets[i] += int64(records)
	h.n += int64(records)
	h.max = max(h.max, d)
	h.mu.Unlock()
}

// summary returns the percentiles (bucket upper bounds, capped by the
// maximum seen), or nil when nothing was observed.
func (h *latencyHist) summary() *Latency {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return nil
	}
	maxMs := float64(h.max) / float64(time.Millisecond)
	q := func(p float64) float64 {
		want := int64(math.Ceil(p * float64(h.n)))
		var seen int64
		for i, c := range h.buckets {
			seen += c
			if seen >= want {
				ub := float64(latencyBase) * math.Pow(1.2, float64(i)) / float64(time.Millisecond)
				return math.Round(min(ub, maxMs)*100) / 100
			}
		}
		return maxMs
	}
	return &Latency{P50: q(0.50), P95: q(0.95), P99: q(0.99), Max: math.Round(maxMs*100) / 100}
}
