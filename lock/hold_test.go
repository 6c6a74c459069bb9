package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/redistest"
	"github.com/erpsync/erpsync/lock"
)

// hookLog records Lost and RenewFailed calls.
type hookLog struct {
	mu          sync.Mutex
	lost        []error
	renewFailed []error
}

func (h *hookLog) hooks() *lock.Hooks {
	return &lock.Hooks{
		Lost: func(_ string, err error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.lost = append(h.lost, err)
		},
		RenewFailed: func(_ string, err error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.renewFailed = append(h.renewFailed, err)
		},
	}
}

func (h *hookLog) counts() (lost, renewFailed int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.lost), len(h.renewFailed)
}

func TestHoldKeepsLockAlive(t *testing.T) {
	var hl hookLog
	b := setup(t, &lock.Options{Hooks: hl.hooks()})
	ctx := context.Background()
	const ttl = 150 * time.Millisecond
	l := mustObtain(t, b.client, "job", ttl)
	hctx := l.Hold(ctx)

	time.Sleep(4 * ttl)
	if hctx.Err() != nil {
		t.Fatalf("hold context ended: %v", context.Cause(hctx))
	}
	if _, err := b.client.Obtain(ctx, "job", time.Second, nil); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("obtain after 4 TTLs of holding: err = %v, want ErrNotObtained", err)
	}
	if ttl, err := l.TTL(ctx); err != nil || ttl <= 0 {
		t.Fatalf("TTL = %v, %v", ttl, err)
	}

	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitDone(t, hctx, 0)
	if cause := context.Cause(hctx); !errors.Is(cause, context.Canceled) || errors.Is(cause, lock.ErrLost) {
		t.Errorf("cause after Release = %v, want context.Canceled", cause)
	}
	if lost, failed := hl.counts(); lost != 0 || failed != 0 {
		t.Errorf("hooks: %d lost, %d renew failed; want none", lost, failed)
	}
	// Hold after Release returns an ended context.
	if cause := context.Cause(l.Hold(ctx)); !errors.Is(cause, lock.ErrNotHeld) {
		t.Errorf("Hold after Release: cause %v, want ErrNotHeld", cause)
	}
}

func TestHoldLostWhenKeyDeleted(t *testing.T) {
	var hl hookLog
	b := setup(t, &lock.Options{Hooks: hl.hooks()})
	ctx := context.Background()
	const ttl = 150 * time.Millisecond
	l := mustObtain(t, b.client, "rec", ttl)
	hctx := l.Hold(ctx)
	second := l.Hold(ctx) // no second watchdog

	b.rdb.Del(ctx, b.prefix+"{rec}")
	waitDone(t, hctx, time.Second)
	// ErrNotHeld in the cause says that a renewal noticed, within one
	// period, not the end of the lease.
	cause := context.Cause(hctx)
	if !errors.Is(cause, lock.ErrLost) || !errors.Is(cause, lock.ErrNotHeld) {
		t.Fatalf("cause = %v, want ErrLost and ErrNotHeld", cause)
	}
	waitDone(t, second, time.Second)
	if c2 := context.Cause(second); !errors.Is(c2, lock.ErrLost) {
		t.Errorf("second Hold context: cause %v, want ErrLost", c2)
	}
	if lost, _ := hl.counts(); lost != 1 {
		t.Errorf("Lost hook called %d times, want 1", lost)
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release of a lost lock: err = %v, want ErrNotHeld", err)
	}
}

func TestHoldLostWhenServerKilled(t *testing.T) {
	var hl hookLog
	s := redistest.Start(t)
	c := lock.New(newRedis(t, s.Addr), &lock.Options{Hooks: hl.hooks()})
	const ttl = 300 * time.Millisecond
	obtained := time.Now()
	l := mustObtain(t, c, "job", ttl)
	hctx := l.Hold(context.Background())

	time.Sleep(ttl / 2) // one renewal done
	s.Kill()
	killed := time.Now()
	waitDone(t, hctx, 2*ttl)
	d := time.Since(killed)
	if d > ttl+150*time.Millisecond {
		t.Errorf("lost %v after the kill, want by the end of the lease (%v)", d, ttl)
	}
	if time.Since(obtained) < ttl {
		t.Errorf("lost before the first lease could have run out")
	}
	cause := context.Cause(hctx)
	if !errors.Is(cause, lock.ErrLost) || !errors.Is(cause, lock.ErrUnavailable) {
		t.Errorf("cause = %v, want ErrLost with the last ErrUnavailable", cause)
	}
	lost, failed := hl.counts()
	if lost != 1 || failed == 0 {
		t.Errorf("hooks: %d lost, %d renew failed; want 1 and some", lost, failed)
	}
	hl.mu.Lock()
	for _, err := range hl.renewFailed {
		if !errors.Is(err, lock.ErrUnavailable) {
			t.Errorf("RenewFailed with %v, want ErrUnavailable", err)
		}
	}
	hl.mu.Unlock()
}

// A server that stops answering leaves the renewal hanging: the context
// still ends when the lease runs out, not when the call gives up.
func TestHoldLostWhenServerHangs(t *testing.T) {
	s := redistest.Start(t)
	c := lock.New(newRedis(t, s.Addr), &lock.Options{Timeout: 10 * time.Second})
	const ttl = 200 * time.Millisecond
	l := mustObtain(t, c, "job", ttl)
	start := time.Now()
	hctx := l.Hold(context.Background())
	time.Sleep(ttl / 4)
	s.Pause()
	defer s.Resume()
	waitDone(t, hctx, 2*ttl)
	if d := time.Since(start); d > ttl+150*time.Millisecond {
		t.Errorf("lost after %v, want by the end of the lease (%v)", d, ttl)
	}
	if cause := context.Cause(hctx); !errors.Is(cause, lock.ErrLost) {
		t.Errorf("cause = %v, want ErrLost", cause)
	}
	s.Resume()
	_ = l.Release(context.Background())
}

// Ending the parent context stops renewing without releasing; the lock
// then runs out after its TTL.
func TestHoldParentContextEnds(t *testing.T) {
	var hl hookLog
	b := setup(t, &lock.Options{Hooks: hl.hooks()})
	ctx, cancel := context.WithCancel(context.Background())
	const ttl = 150 * time.Millisecond
	l := mustObtain(t, b.client, "job", ttl)
	hctx := l.Hold(ctx)
	time.Sleep(ttl)
	cancel()
	waitDone(t, hctx, 0)
	if cause := context.Cause(hctx); errors.Is(cause, lock.ErrLost) {
		t.Errorf("cause = %v, not a loss", cause)
	}
	if ttl, err := l.TTL(context.Background()); err != nil || ttl <= 0 {
		t.Errorf("TTL right after the parent ended = %v, %v; want still held", ttl, err)
	}
	time.Sleep(2 * ttl)
	if ttl, _ := l.TTL(context.Background()); ttl != 0 {
		t.Errorf("TTL = %v, want run out", ttl)
	}
	if lost, _ := hl.counts(); lost != 0 {
		t.Errorf("Lost hook called %d times, want 0", lost)
	}

	// A later Hold starts a new watchdog... which finds the lock gone.
	h2 := l.Hold(context.Background())
	waitDone(t, h2, time.Second)
	if cause := context.Cause(h2); !errors.Is(cause, lock.ErrLost) {
		t.Errorf("cause = %v, want ErrLost", cause)
	}
}

// Refresh sets the TTL the watchdog renews with.
func TestHoldUsesRefreshedTTL(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	l := mustObtain(t, b.client, "job", 60*time.Millisecond)
	hctx := l.Hold(ctx)
	if err := l.Refresh(ctx, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if ttl, err := l.TTL(ctx); err != nil || ttl < 2*time.Second {
		t.Errorf("TTL = %v, %v; want the refreshed 3s", ttl, err)
	}
	if hctx.Err() != nil {
		t.Errorf("hold ended: %v", context.Cause(hctx))
	}
	_ = l.Release(ctx)
}
