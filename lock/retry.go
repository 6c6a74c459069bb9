package lock

import (
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// RetryStrategy says how long Obtain waits before its next attempt while a
// lock is held by another. Strategies count their attempts, so give each
// Obtain call a strategy of its own; they are safe for concurrent use.
type RetryStrategy interface {
	// NextBackoff returns the wait before the next attempt, or 0 to stop
	// retrying.
	NextBackoff() time.Duration
}

type noRetry struct{}

func (noRetry) NextBackoff() time.Duration { return 0 }

// NoRetry returns a strategy that never retries: Obtain tries once.
func NoRetry() RetryStrategy { return noRetry{} }

type linearBackoff time.Duration

func (d linearBackoff) NextBackoff() time.Duration { return time.Duration(d) }

// LinearBackoff returns a strategy that waits d before every retry, for as
// long as ctx allows. d <= 0 never retries.
func LinearBackoff(d time.Duration) RetryStrategy { return linearBackoff(d) }

type exponentialBackoff struct {
	min, max time.Duration
	n        atomic.Int64
}

// ExponentialBackoff returns a strategy with full jitter: the n-th wait
// (from 0) is drawn uniformly from [1ns, min(max, min·2^n)]. Jitter keeps
// contenders that met at one lock from retrying in step. min <= 0 is taken
// as 1 ms, and max < min as min.
func ExponentialBackoff(min, max time.Duration) RetryStrategy {
	if min <= 0 {
		min = time.Millisecond
	}
	if max < min {
		max = min
	}
	return &exponentialBackoff{min: min, max: max}
}

func (b *exponentialBackoff) NextBackoff() time.Duration {
	n := b.n.Add(1) - 1
	ceil := b.max
	// min<<n overflows past 62 doublings; stop doubling once past max.
	if n < 62 {
		if d := b.min << n; d > 0 && d < b.max {
			ceil = d
		}
	}
	// Never 0, which would mean "stop".
	return 1 + rand.N(ceil)
}

type limitRetry struct {
	s   RetryStrategy
	max int64
	n   atomic.Int64
}

// LimitRetry returns a strategy that follows s for at most max retries.
func LimitRetry(s RetryStrategy, max int) RetryStrategy {
	return &limitRetry{s: s, max: int64(max)}
}

func (r *limitRetry) NextBackoff() time.Duration {
	if r.n.Add(1) > r.max {
		return 0
	}
	return r.s.NextBackoff()
}
