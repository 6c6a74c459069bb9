package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/dberr"
	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/lock"
)

// LockKey is the key of the relay's job lock.
const LockKey = "relay:events"

// Sink is where events go. Deliver hands evs, in order, to the sink and
// returns how many of them, from the first, the sink acknowledged; an
// error says why it stopped there. A *RejectedError stops the relay; any
// other error is retried.
type Sink interface {
	Deliver(ctx context.Context, evs []outbox.Pending) (acked int, err error)
	Close() error
}

// RejectedError is a sink's refusal of a batch that no retry can change
// (a webhook's 4xx other than 408 and 429).
type RejectedError struct {
	Msg string
}

func (e *RejectedError) Error() string { return e.Msg }

// RetryAfterError is a transient failure whose answer said when to try
// again (a Retry-After header).
type RetryAfterError struct {
	Err   error
	After time.Duration
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }
func (e *RetryAfterError) Unwrap() error { return e.Err }

// Locker is what the relay needs of a lock service.
type Locker interface {
	Obtain(ctx context.Context, key string, ttl time.Duration, opt *lock.ObtainOptions) (*lock.Lock, error)
}

// Observer is told the outbox's counts after each pass, and of each skip.
type Observer interface {
	ObserveOutbox(outbox.Stats)
	ObserveRelaySkipped()
	// ObserveRelayLockFailed counts a failure of the lock service (Redis
	// down or unreachable) that the relay waits out.
	ObserveRelayLockFailed()
	// ObserveDeliveryFailed counts a delivery the sink did not take that
	// the relay retries.
	ObserveDeliveryFailed()
}

// Config are a relay's settings.
type Config struct {
	// BatchSize is the most events one delivery carries. Defaults to 100.
	BatchSize int
	// Poll is the wait between passes that found nothing. Defaults to 1s.
	// On PostgreSQL a notification of a commit that recorded events ends
	// the wait at once (Outbox.Listen); the poll is what finds the events
	// when no notification comes.
	Poll time.Duration
	// LockTTL is the relay lock's lease. Defaults to 30s.
	LockTTL time.Duration
	// Retention is how long delivered events are kept. Defaults to 7 days.
	Retention time.Duration
	// Grace is how long a stopping relay may still work on the batch in
	// hand. Defaults to 10s.
	Grace time.Duration
	// MinBackoff and MaxBackoff bound the wait before a retry. Default to
	// 200ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// Once makes Run one pass: deliver until nothing is pending, or until
	// the first failure (returned: nothing is retried), then return.
	Once bool
}

func (c Config) withDefaults() Config {
	if c.BatchSize <= 0 {
		c.BatchSize = 100
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
	if c.LockTTL <= 0 {
		c.LockTTL = 30 * time.Second
	}
	if c.Retention <= 0 {
		c.Retention = 7 * 24 * time.Hour
	}
	if c.Grace <= 0 {
		c.Grace = 10 * time.Second
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 200 * time.Millisecond
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 30 * time.Second
	}
	return c
}

// errLockLost says the relay lost its lock while delivering.
var errLockLost = errors.New("relay: lock lost")

// errLockService says the lock service failed to answer whether the relay
// may take its lock (Redis down, refused, timed out).
var errLockService = errors.New("relay: obtain lock")

// ErrSkipped is Run's answer with Once when another relay holds the lock.
var ErrSkipped = errors.New("relay: skipped, another relay holds the lock")

// Relay moves events from an outbox to a sink.
type Relay struct {
	cfg   Config
	ob    *outbox.Outbox
	sink  Sink
	locks Locker
	obs   Observer
	log   zerolog.Logger
	// delivered counts the events the sink took and the outbox marked.
	delivered atomic.Int64
	// wake holds a value when a notification said that events were
	// committed since the relay last looked (PostgreSQL).
	wake chan struct{}
}

// Delivered returns how many events r delivered (and marked delivered).
func (r *Relay) Delivered() int64 { return r.delivered.Load() }

// New returns a relay; obs may be nil.
func New(cfg Config, ob *outbox.Outbox, sink Sink, locks Locker, obs Observer, log zerolog.Logger) *Relay {
	return &Relay{cfg: cfg.withDefaults(), ob: ob, sink: sink, locks: locks, obs: obs, log: log, wake: make(chan struct{}, 1)}
}

// Run delivers until ctx ends (or, with Once, one pass: until nothing is
// pending; a transient failure ends it with an error). When ctx ends,
// the batch in hand is finished within Grace and Run returns nil. A relay
// that finds the lock held waits for it (Once: returns ErrSkipped); one
// whose lock service fails retries with backoff (Once: returns the
// error). A rejection by the sink is returned as a *RejectedError.
func (r *Relay) Run(ctx context.Context) error {
	// work outlives ctx by Grace: the batch in hand gets delivered and
	// marked after a SIGTERM.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	stopGrace := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(r.cfg.Grace, cancelWork)
		context.AfterFunc(work, func() { t.Stop() })
	})
	defer stopGrace()
	if !r.cfg.Once && r.ob.Notifies() {
		lctx, stopListen := context.WithCancel(ctx)
		var listening sync.WaitGroup
		listening.Go(func() { r.listen(lctx) })
		defer func() {
			stopListen()
			listening.Wait()
		}()
	}
	backoff := time.Duration(0) // before the next try after a lock-service failure
	for {
		err := r.hold(ctx, work)
		wait := r.cfg.Poll
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, lock.ErrNotObtained):
			backoff = 0
			r.log.Info().Str("lock", LockKey).Msg("relay skipped: another relay holds the lock")
			if r.obs != nil {
				r.obs.ObserveRelaySkipped()
			}
			if r.cfg.Once {
				return ErrSkipped
			}
		case r.cfg.Once || err == nil:
			return err
		case errors.Is(err, errLockService):
			// Redis down or restarting: nothing can be marked without
			// the lock, so wait for it like for a failing sink.
			backoff = r.next(backoff, err)
			wait = backoff
			r.log.Warn().Err(err).Dur("retry_in", backoff).Msg("relay lock service failed")
			if r.obs != nil {
				r.obs.ObserveRelayLockFailed()
			}
		case errors.Is(err, errLockLost), errors.Is(err, outbox.ErrFenced):
			// A pause past the lease: another relay may hold the lock
			// now. Take it again (or skip) like a relay that starts.
			backoff = 0
			r.log.Warn().Err(err).Msg("relay lock lost; taking it again")
		default:
			return err
		}
		if !sleep(ctx, wait) {
			return nil
		}
	}
}

// hold takes the lock and delivers while it holds it. It returns nil when
// ctx ends or, with Once, when nothing is pending.
func (r *Relay) hold(ctx, work context.Context) error {
	l, err := r.locks.Obtain(ctx, LockKey, r.cfg.LockTTL, nil)
	if errors.Is(err, lock.ErrNotObtained) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errLockService, err)
	}
	hctx, stopHold := context.WithCancel(work)
	held := l.Hold(hctx)
	defer func() {
		stopHold()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		if err := l.Release(rctx); err != nil && !errors.Is(err, lock.ErrNotHeld) {
			r.log.Warn().Err(err).Msg("release relay lock")
		}
	}()
	fence := l.Fence()
	r.log.Info().Int64("fence_token", fence).Msg("relay holds the lock")
	backoff := time.Duration(0)
	var lastPrune, lastObserve time.Time
	for {
		if held.Err() != nil {
			return fmt.Errorf("%w: %w", errLockLost, context.Cause(held))
		}
		if time.Since(lastPrune) > time.Minute {
			r.prune(work)
			lastPrune = time.Now()
		}
		n, err := r.pass(held, fence)
		if time.Since(lastObserve) > observeEvery || n == 0 {
			r.observe(work)
			lastObserve = time.Now()
		}
		var rej *RejectedError
		switch {
		case errors.As(err, &rej), errors.Is(err, outbox.ErrFenced):
			return err
		case dberr.Denied(err):
			// A privilege the user lacks: every retry would send the
			// batch again and fail to mark it.
			return fmt.Errorf("deliver: %w (events left pending; grant the user the outbox's privileges)", err)
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			if r.cfg.Once {
				return fmt.Errorf("deliver: %w (events left pending)", err)
			}
			backoff = r.next(backoff, err)
			r.log.Warn().Err(err).Dur("retry_in", backoff).Msg("delivery failed")
			if r.obs != nil {
				r.obs.ObserveDeliveryFailed()
			}
			if !sleep(ctx, backoff) {
				return nil
			}
			continue
		}
		backoff = 0
		if ctx.Err() != nil {
			return nil
		}
		if n == 0 {
			if r.cfg.Once {
				return nil
			}
			if !r.idle(ctx) {
				return nil
			}
		}
	}
}

// idle waits Poll, or less when a notification comes, and reports
// whether ctx is still live.
func (r *Relay) idle(ctx context.Context) bool {
	t := time.NewTimer(r.cfg.Poll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-r.wake:
	}
	return true
}

// listen keeps a connection listening for the notifications of commits
// that recorded events until ctx ends, and wakes the relay on each
// (PostgreSQL). A connection that fails (a restart of the server) is
// logged once, and listened again with backoff; the relay polls
// meanwhile.
func (r *Relay) listen(ctx context.Context) {
	backoff := time.Duration(0)
	failing := false
	for {
		err := r.ob.Listen(ctx, func() {
			if failing {
				r.log.Info().Msg("relay listens for events again")
				failing = false
			}
			backoff = 0
			select {
			case r.wake <- struct{}{}:
			default: // a wake-up is pending already
			}
		})
		if ctx.Err() != nil {
			return
		}
		backoff = r.next(backoff, err)
		if failing {
			r.log.Debug().Err(err).Dur("retry_in", backoff).Msg("relay listener failed again")
		} else {
			r.log.Warn().Err(err).Dur("poll", r.cfg.Poll).Msg("relay listener failed; polling until it listens again")
			failing = true
		}
		if !sleep(ctx, backoff) {
			return
		}
	}
}

// pass delivers one batch and marks what the sink acknowledged; it
// returns how many events the batch had.
func (r *Relay) pass(ctx context.Context, fence int64) (int, error) {
	evs, err := r.ob.Pending(ctx, r.cfg.BatchSize)
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	acked, derr := r.sink.Deliver(ctx, evs)
	if acked > 0 {
		seqs := make([]int64, acked)
		for i := range seqs {
			seqs[i] = evs[i].Seq
		}
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := r.ob.MarkDelivered(mctx, fence, seqs); err != nil {
			return len(evs), err
		}
		r.delivered.Add(int64(acked))
		r.log.Debug().Int("events", acked).Str("first", evs[0].ID).Str("last", evs[acked-1].ID).Msg("delivered")
	}
	return len(evs), derr
}

// next is the wait before the retry after err, the previous wait being
// prev: doubled, within MinBackoff..MaxBackoff, or what a Retry-After
// asked, within the same bounds.
func (r *Relay) next(prev time.Duration, err error) time.Duration {
	var ra *RetryAfterError
	if errors.As(err, &ra) && ra.After > 0 {
		return min(max(ra.After, r.cfg.MinBackoff), r.cfg.MaxBackoff)
	}
	return min(max(2*prev, r.cfg.MinBackoff), r.cfg.MaxBackoff)
}

func (r *Relay) prune(ctx context.Context) {
	cutoff := time.Now().Add(-r.cfg.Retention)
	for {
		n, err := r.ob.Prune(ctx, cutoff, 10000)
		if err != nil {
			r.log.Warn().Err(err).Msg("prune delivered events")
			return
		}
		if n > 0 {
			r.log.Info().Int64("events", n).Msg("pruned delivered events")
		}
		if n < 10000 {
			return
		}
	}
}

func (r *Relay) observe(ctx context.Context) {
	if r.obs == nil {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := r.ob.Stats(sctx)
	if err != nil {
		r.log.Warn().Err(err).Msg("count events")
		return
	}
	r.obs.ObserveOutbox(st)
}

// observeEvery is how often a busy relay counts the outbox for its
// metrics; an idle one counts after each pass that found nothing.
const observeEvery = 5 * time.Second

// sleep waits d or until ctx ends, and reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
