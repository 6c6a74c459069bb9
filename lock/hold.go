package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// holder is the state of one running watchdog.
type holder struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}
	// expiry cancels ctx with ErrLost when the local lease deadline passes
	// without a successful renewal, even while a renewal call still hangs.
	expiry *time.Timer
	// end makes the first of lose and stop the only one to act.
	end sync.Once
	// lost is set when ctx was cancelled with ErrLost.
	lost bool

	mu      sync.Mutex
	lastErr error // last failed renewal, for the cause of an expiry
}

// Hold starts a watchdog that renews the lock by token every ttl/3 (the
// ttl of Obtain or of the last Refresh) until Release or until ctx ends;
// ending ctx stops renewing but does not release. The returned context is
// derived from ctx. It is cancelled at once, with a context.Cause matching
// ErrLost, when a renewal finds the lock gone (the cause then also matches
// ErrNotHeld) or when renewals keep failing until the lease runs out by
// the local clock (the lease counts from the moment the last successful
// grant or renewal was sent, less 1% and 2 ms for clock drift). Each
// renewal may take up to ttl/3 (at most Options.Timeout); failed ones are
// retried every ttl/6 and reported to Hooks.RenewFailed.
// Work that must not outlive the lock should run under this context, and
// still pass Fence to the storage it writes to: cancellation is a signal,
// not a guarantee (see the package doc).
//
// Hold while a watchdog runs starts no second one: the returned context is
// derived from ctx and ends with the running watchdog's context, with its
// cause. Hold on a released lock, or on one already lost, returns a
// context already cancelled (cause ErrNotHeld, or the ErrLost cause).
func (l *Lock) Hold(ctx context.Context) context.Context {
	if l == nil {
		return cancelled(ctx, ErrNotHeld)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return cancelled(ctx, ErrNotHeld)
	}
	if h := l.hold; h != nil && (h.ctx.Err() == nil || h.lost) {
		hctx, cancel := context.WithCancelCause(ctx)
		context.AfterFunc(h.ctx, func() { cancel(context.Cause(h.ctx)) })
		return hctx
	}

	hctx, cancel := context.WithCancelCause(ctx)
	h := &holder{ctx: hctx, cancel: cancel, done: make(chan struct{})}
	h.expiry = time.AfterFunc(time.Until(l.validUntil), func() { l.lose(h, nil) })
	l.hold = h
	go l.watch(h, l.ttl)
	return hctx
}

// cancelled returns a context derived from ctx, already cancelled with
// cause.
func cancelled(ctx context.Context, cause error) context.Context {
	hctx, cancel := context.WithCancelCause(ctx)
	cancel(cause)
	return hctx
}

// watch renews the lock until h.ctx ends.
func (l *Lock) watch(h *holder, ttl time.Duration) {
	defer close(h.done)
	defer h.expiry.Stop()

	t := time.NewTimer(ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}

		l.mu.Lock()
		ttl, until := l.ttl, l.validUntil
		l.mu.Unlock()

		// A renewal that answers after the lease ran out is of no use, and
		// one that hangs for a whole period leaves no time to retry.
		limit := time.Now().Add(min(l.b.timeout(), max(ttl/3, time.Millisecond)))
		err := l.refresh(h.ctx, minTime(until, limit), ttl)
		switch {
		case err == nil:
			t.Reset(ttl / 3)
		case h.ctx.Err() != nil:
			return
		case errors.Is(err, ErrNotHeld):
			l.lose(h, err)
			return
		default:
			if l.b.hooks().RenewFailed != nil {
				l.b.hooks().RenewFailed(l.key, err)
			}
			h.mu.Lock()
			h.lastErr = err
			h.mu.Unlock()
			l.mu.Lock()
			left := time.Until(l.validUntil)
			l.mu.Unlock()
			if left <= 0 {
				l.lose(h, nil)
				return
			}
			t.Reset(min(max(ttl/6, time.Millisecond), left))
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// extended records a successful grant or refresh of ttl sent at sent.
func (l *Lock) extended(sent time.Time, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ttl = ttl
	until := sent.Add(validity(ttl))
	if until.After(l.validUntil) {
		l.validUntil = until
	}
	if h := l.hold; h != nil && h.ctx.Err() == nil {
		h.expiry.Reset(time.Until(l.validUntil))
	}
}

// lose cancels h with ErrLost and reports it, unless h already ended. err
// is why; nil means the lease ran out without a successful renewal.
func (l *Lock) lose(h *holder, err error) {
	h.end.Do(func() {
		if h.ctx.Err() != nil {
			return // parent ctx ended: not a loss
		}
		var cause error
		if err != nil {
			cause = fmt.Errorf("%w: %w", ErrLost, err)
		} else {
			h.mu.Lock()
			last := h.lastErr
			h.mu.Unlock()
			if last != nil {
				cause = fmt.Errorf("%w: lease ran out, last renewal: %w", ErrLost, last)
			} else {
				cause = fmt.Errorf("%w: lease ran out before a renewal answered", ErrLost)
			}
		}
		l.mu.Lock()
		h.lost = true
		l.mu.Unlock()
		// Counted before the holder can see it: whoever watches the
		// context finds the loss already counted and logged.
		if l.b.hooks().Lost != nil {
			l.b.hooks().Lost(l.key, cause)
		}
		h.cancel(cause)
	})
}

// stop marks the lock released and stops its watchdog, waiting for it.
func (l *Lock) stop() {
	l.mu.Lock()
	l.released = true
	h := l.hold
	l.mu.Unlock()
	if h == nil {
		return
	}
	h.end.Do(func() { h.cancel(context.Canceled) })
	<-h.done
}
