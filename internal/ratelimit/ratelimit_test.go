package ratelimit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/testenv"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]time.Duration{"50/s": 20 * time.Millisecond, "10": 100 * time.Millisecond, "60/m": time.Second} {
		r, err := ParseRate(in)
		if err != nil || r.Interval() != want {
			t.Errorf("ParseRate(%q) = %v (interval %s), %v; want interval %s", in, r, r.Interval(), err, want)
		}
	}
	for _, bad := range []string{"", "0/s", "-1", "5/d", "x/s"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) accepted", bad)
		}
	}
}

// Many callers on one key, through separate clients, together stay under
// the rate: the span of N events is at least (N-1) intervals.
func TestCallersShareTheRate(t *testing.T) {
	t.Parallel()
	key := testenv.RandomName("erpsync-test:rate:")
	rate := Rate{N: 100, Per: time.Second}
	const callers, each = 8, 10
	var wg sync.WaitGroup
	var mu sync.Mutex
	var stamps []time.Time
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := New(testenv.Redis(t), key, rate, 1)
			for j := 0; j < each; j++ {
				if err := l.Wait(context.Background()); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				stamps = append(stamps, time.Now())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	first, last := stamps[0], stamps[0]
	for _, s := range stamps {
		if s.Before(first) {
			first = s
		}
		if s.After(last) {
			last = s
		}
	}
	minSpan := time.Duration(callers*each-1) * rate.Interval()
	// Allow a little for the spread between the server clock and ours.
	if span := last.Sub(first); span < minSpan-30*time.Millisecond {
		t.Fatalf("%d events in %s: faster than %s allows (min %s)", callers*each, span, rate, minSpan)
	}
}

func TestWaitEndsWithContext(t *testing.T) {
	t.Parallel()
	key := testenv.RandomName("erpsync-test:rate:")
	l := New(testenv.Redis(t), key, Rate{N: 1, Per: time.Minute}, 1)
	if err := l.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := l.Wait(ctx); err == nil {
		t.Fatal("a second event within the minute passed")
	}
}
