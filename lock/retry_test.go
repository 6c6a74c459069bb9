package lock_test

import (
	"testing"
	"time"

	"github.com/erpsync/erpsync/lock"
)

func TestNoRetry(t *testing.T) {
	if d := lock.NoRetry().NextBackoff(); d != 0 {
		t.Errorf("NextBackoff = %v, want 0", d)
	}
}

func TestLinearBackoff(t *testing.T) {
	s := lock.LinearBackoff(7 * time.Millisecond)
	for range 5 {
		if d := s.NextBackoff(); d != 7*time.Millisecond {
			t.Fatalf("NextBackoff = %v", d)
		}
	}
}

func TestExponentialBackoff(t *testing.T) {
	const lo, hi = time.Millisecond, 50 * time.Millisecond
	// Over many runs, the n-th wait stays in [1ns, min(hi, lo·2^n)] and
	// spreads over that range (full jitter).
	const runs, steps = 300, 80
	maxSeen := make([]time.Duration, steps)
	minSeen := make([]time.Duration, steps)
	for r := range runs {
		s := lock.ExponentialBackoff(lo, hi)
		for n := range steps {
			d := s.NextBackoff()
			ceil := hi
			if n < 6 {
				ceil = min(hi, lo<<n)
			}
			if d <= 0 || d > ceil {
				t.Fatalf("step %d: %v outside (0, %v]", n, d, ceil)
			}
			if r == 0 || d > maxSeen[n] {
				maxSeen[n] = d
			}
			if r == 0 || d < minSeen[n] {
				minSeen[n] = d
			}
		}
	}
	for n := range steps {
		ceil := hi
		if n < 6 {
			ceil = min(hi, lo<<n)
		}
		if maxSeen[n] < ceil*8/10 || minSeen[n] > ceil*2/10 {
			t.Errorf("step %d: waits in [%v, %v], want spread over (0, %v]", n, minSeen[n], maxSeen[n], ceil)
		}
	}

	// Bad bounds are mended.
	s := lock.ExponentialBackoff(0, -1)
	for range 100 {
		if d := s.NextBackoff(); d <= 0 || d > time.Millisecond {
			t.Fatalf("ExponentialBackoff(0, -1): %v", d)
		}
	}
}

func TestLimitRetry(t *testing.T) {
	s := lock.LimitRetry(lock.LinearBackoff(time.Millisecond), 3)
	for i := range 3 {
		if d := s.NextBackoff(); d != time.Millisecond {
			t.Fatalf("retry %d: %v", i, d)
		}
	}
	for range 2 {
		if d := s.NextBackoff(); d != 0 {
			t.Fatalf("after the limit: %v, want 0", d)
		}
	}
	if d := lock.LimitRetry(lock.ExponentialBackoff(time.Millisecond, time.Second), 0).NextBackoff(); d != 0 {
		t.Errorf("LimitRetry(_, 0) = %v, want 0", d)
	}
	if d := lock.LimitRetry(lock.NoRetry(), 5).NextBackoff(); d != 0 {
		t.Errorf("LimitRetry(NoRetry(), 5) = %v, want 0", d)
	}
}
