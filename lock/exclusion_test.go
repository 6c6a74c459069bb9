package lock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/erpsync/erpsync/lock"
)

// obtainer is what checkMutualExclusion needs of a Client or a Redlock.
type obtainer interface {
	Obtain(ctx context.Context, key string, ttl time.Duration, opt *lock.ObtainOptions) (*lock.Lock, error)
}

// onDemandLocker obtains its locks with FenceOnDemand.
type onDemandLocker struct{ c *lock.Client }

func (o onDemandLocker) Obtain(ctx context.Context, key string, ttl time.Duration, opt *lock.ObtainOptions) (*lock.Lock, error) {
	var od lock.ObtainOptions
	if opt != nil {
		od = *opt
	}
	od.FenceOnDemand = true
	return o.c.Obtain(ctx, key, ttl, &od)
}

// checkMutualExclusion runs one goroutine per locker; each takes the key
// "shared" rounds times (retrying as retry() says), holds it for hold and
// releases it. Holders never overlap, fences (fetched while holding, for
// an onDemandLocker's) rise, and every round is granted within timeout.
func checkMutualExclusion(t *testing.T, lockers []obtainer, rounds int, timeout, hold time.Duration, retry func() lock.RetryStrategy) {
	t.Helper()
	var (
		inside    atomic.Int32
		lastFence atomic.Int64
		grants    atomic.Int32
		wg        sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	errs := make(chan error, len(lockers))
	for _, c := range lockers {
		wg.Go(func() {
			for range rounds {
				l, err := c.Obtain(ctx, "shared", 5*time.Second, &lock.ObtainOptions{Retry: retry()})
				if err != nil {
					errs <- err
					return
				}
				if n := inside.Add(1); n != 1 {
					errs <- fmt.Errorf("%d holders at once", n)
				}
				fence, err := l.FetchFence(ctx)
				if err != nil {
					errs <- err
					return
				}
				if prev := lastFence.Swap(fence); fence <= prev {
					errs <- fmt.Errorf("fence %d after %d", fence, prev)
				}
				grants.Add(1)
				time.Sleep(hold)
				inside.Add(-1)
				if err := l.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if g := grants.Load(); g != int32(len(lockers)*rounds) {
		t.Errorf("%d grants, want %d", g, len(lockers)*rounds)
	}
}
