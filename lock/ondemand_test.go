package lock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/erpsync/erpsync/lock"
)

var onDemand = &lock.ObtainOptions{FenceOnDemand: true}

// counterKinds runs f for a Client on one server (a shared counter with
// epochs) and for one with a counter per key (as over a Ring).
func counterKinds(t *testing.T, f func(t *testing.T, b *bundle)) {
	for _, perKey := range []bool{false, true} {
		t.Run("perKey="+strconv.FormatBool(perKey), func(t *testing.T) {
			b := setup(t, nil)
			if perKey {
				lock.SplitByKey(b.client)
			}
			f(t, b)
		})
	}
}

func TestFenceOnDemand(t *testing.T) {
	counterKinds(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		rkey := b.prefix + "{k}"
		counter, _ := lock.Counter(b.client, "k")

		l0 := mustObtain(t, b.client, "k", time.Minute)
		if err := l0.Release(ctx); err != nil {
			t.Fatal(err)
		}
		before, _ := b.rdb.Get(ctx, counter).Result()

		l1 := mustObtainWith(t, b.client, "k", time.Minute, onDemand)
		if l1.Fence() != 0 {
			t.Fatalf("Fence of a grant without its token = %d, want 0", l1.Fence())
		}
		if v, _ := b.rdb.Get(ctx, rkey).Result(); v != l1.Token() {
			t.Fatalf("lock key holds %q, want the token %q", v, l1.Token())
		}
		if after, _ := b.rdb.Get(ctx, counter).Result(); after != before {
			t.Errorf("the grant moved the fence counter from %s to %s", before, after)
		}
		if _, err := b.client.Obtain(ctx, "k", time.Minute, onDemand); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("second Obtain of a held key: err = %v, want ErrNotObtained", err)
		}

		f1, err := l1.FetchFence(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if f1 <= l0.Fence() {
			t.Fatalf("fetched token %d, not above the earlier grant's %d", f1, l0.Fence())
		}
		if again, err := l1.FetchFence(ctx); err != nil || again != f1 {
			t.Fatalf("second FetchFence = %d, %v; want %d again", again, err, f1)
		}
		if l1.Fence() != f1 || !strings.HasSuffix(l1.String(), "#"+strconv.FormatInt(f1, 10)) {
			t.Fatalf("after FetchFence: Fence %d, String %q; want %d", l1.Fence(), l1.String(), f1)
		}
		if err := l1.Release(ctx); err != nil {
			t.Fatal(err)
		}

		l2 := mustObtain(t, b.client, "k", time.Minute)
		if l2.Fence() <= f1 {
			t.Fatalf("next grant's token %d, not above the fetched %d", l2.Fence(), f1)
		}
		if err := l2.Release(ctx); err != nil {
			t.Fatal(err)
		}

		l3 := mustObtainWith(t, b.client, "k", time.Minute, onDemand)
		if err := l3.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if f, err := l3.FetchFence(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("FetchFence after Release = %d, %v; want ErrNotHeld", f, err)
		}
	})
}

// A holder whose lease ran out gets no token: not while another holds the
// key, nor once the key is free.
func TestFenceOnDemandAfterExpiry(t *testing.T) {
	counterKinds(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		late := mustObtainWith(t, b.client, "k", 30*time.Millisecond, onDemand)
		time.Sleep(80 * time.Millisecond)
		next := mustObtain(t, b.client, "k", time.Minute)
		if f, err := late.FetchFence(ctx); !errors.Is(err, lock.ErrTaken) {
			t.Fatalf("FetchFence while another holds the key = %d, %v; want ErrTaken", f, err)
		}
		if err := next.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if f, err := late.FetchFence(ctx); !errors.Is(err, lock.ErrExpired) {
			t.Fatalf("FetchFence once the key is free = %d, %v; want ErrExpired", f, err)
		}
	})
}

// FetchFence that finds the lock taken ends a running Hold with ErrLost.
func TestFenceOnDemandLossEndsHold(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	l := mustObtainWith(t, b.client, "k", time.Minute, onDemand)
	hctx := l.Hold(ctx)
	b.rdb.Set(ctx, b.prefix+"{k}", "someone else", time.Minute)
	if _, err := l.FetchFence(ctx); !errors.Is(err, lock.ErrTaken) {
		t.Fatalf("FetchFence of a taken lock: err = %v, want ErrTaken", err)
	}
	waitDone(t, hctx, time.Second)
	if !errors.Is(context.Cause(hctx), lock.ErrLost) {
		t.Fatalf("Hold context cause = %v, want ErrLost", context.Cause(hctx))
	}
	_ = l.Release(ctx)
}

// A fence counter that is not an integer fails FetchFence and leaves the
// lock held: the fetch undoes nothing, unlike a failed grant.
func TestFenceOnDemandJunkCounter(t *testing.T) {
	counterKinds(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		counter, _ := lock.Counter(b.client, "k")
		l := mustObtainWith(t, b.client, "k", time.Minute, onDemand)
		if ek := lock.EpochCounter(b.client, "k"); ek != "" {
			b.rdb.Del(ctx, ek)
		}
		b.rdb.Set(ctx, counter, "junk", 0)
		f, err := l.FetchFence(ctx)
		if err == nil || errors.Is(err, lock.ErrNotHeld) || !strings.Contains(err.Error(), "not an integer") {
			t.Fatalf("FetchFence over a junk counter = %d, %v; want the counter's error", f, err)
		}
		if v, _ := b.rdb.Get(ctx, b.prefix+"{k}").Result(); v != l.Token() {
			t.Fatalf("lock key holds %q after the failed fetch, want the token", v)
		}
		if v, _ := b.rdb.Get(ctx, counter).Result(); v != "junk" {
			t.Fatalf("counter holds %q after the failed fetch, want it left as it was", v)
		}
		b.rdb.Del(ctx, counter)
		if f, err := l.FetchFence(ctx); err != nil || f <= 0 {
			t.Fatalf("FetchFence once the counter is gone = %d, %v", f, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// Goroutines, each with a pool of its own, take turns on one key, half
// with tokens made by the grant, half fetching theirs while they hold it:
// in the order of the holds, the tokens strictly increase.
func TestFenceOnDemandFollowsHolds(t *testing.T) {
	counterKinds(t, func(t *testing.T, b *bundle) {
		lockers := make([]obtainer, 8)
		for i := range lockers {
			c := lock.New(newRedis(t, redisAddr), &lock.Options{Prefix: b.prefix})
			if lock.EpochCounter(b.client, "k") == "" {
				lock.SplitByKey(c)
			}
			lockers[i] = c
			if i%2 == 0 {
				lockers[i] = onDemandLocker{c}
			}
		}
		checkMutualExclusion(t, lockers, 25, 30*time.Second, 0, func() lock.RetryStrategy {
			return lock.ExponentialBackoff(100*time.Microsecond, 4*time.Millisecond)
		})
	})
}
