package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/redistest"
	"github.com/erpsync/erpsync/internal/relay"
	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/lock"
)

// logLines is a relay's log, kept to count its messages.
type logLines struct{ testenv.SyncBuffer }

// logged returns the retry_in (ms, 0 if none) of each line with message
// msg, in order.
func (l *logLines) logged(msg string) []float64 {
	var out []float64
	for _, line := range strings.Split(l.String(), "\n") {
		var e struct {
			Message string  `json:"message"`
			RetryIn float64 `json:"retry_in"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Message == msg {
			out = append(out, e.RetryIn)
		}
	}
	return out
}

// ownRedis is a bundle whose lock client uses a Redis of the test's own,
// which the test stops and starts again.
func ownRedis(t *testing.T) (*bundle, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t)
	b := setup(t)
	// No retries within the client, so that each Obtain fails fast.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, DialTimeout: time.Second, DialerRetries: 1, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	b.locks = lock.New(rdb, &lock.Options{Prefix: testenv.RandomName("erpsync_t_") + ":"})
	return b, srv
}

const lockServiceFailed = "relay lock service failed"

// lockFailures is a relay.Observer that counts the lock service's
// failures.
type lockFailures struct {
	mu sync.Mutex
	n  int
}

func (*lockFailures) ObserveOutbox(outbox.Stats) {}
func (*lockFailures) ObserveRelaySkipped()       {}
func (*lockFailures) ObserveDeliveryFailed()     {}
func (o *lockFailures) ObserveRelayLockFailed() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n++
}

func (o *lockFailures) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

// TestRelayOutlivesRedis: a relay started while Redis is down keeps
// running and retries; once Redis is back on its address, it takes the
// lock and delivers everything. Redis lost while the relay holds the lock
// again: the lease runs out, the relay retries, delivers nothing without
// the lock, and delivers all once Redis is back.
func TestRelayOutlivesRedis(t *testing.T) {
	b, srv := ownRedis(t)
	rec := &received{}
	hk := hook(t, nil, rec, nil)
	log := &logLines{}
	obs := &lockFailures{}
	r := relay.New(relay.Config{BatchSize: 7, Poll: 20 * time.Millisecond, LockTTL: time.Second,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond},
		b.ob, webhookSink(t, hk.URL, nil), b.locks, obs, zerolog.New(log))

	srv.Kill()
	b.recordMany(t, []string{"K1", "K2", "K3"}, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	// Down at the start: the relay retries, and delivers nothing.
	running(t, done, func() bool { return len(log.logged(lockServiceFailed)) >= 6 })
	// The delivery backoff's doubling, from MinBackoff up to MaxBackoff.
	if got, want := fmt.Sprint(log.logged(lockServiceFailed)[:6]), "[10 20 40 80 100 100]"; got != want {
		t.Errorf("retry_in %s, want %s", got, want)
	}
	if got := len(rec.all()); got != 0 {
		t.Fatalf("%d events delivered without the lock", got)
	}
	// Each failure logged is counted (erpsync_relay_lock_failures_total).
	running(t, done, func() bool { return obs.count() >= 6 })
	srv.Start()
	running(t, done, func() bool { return b.pending(t) == 0 })
	checkOrder(t, rec.all(), 30)

	// Down while the relay holds the lock: the lease runs out, and taking
	// the lock again fails until Redis is back.
	before := len(log.logged(lockServiceFailed))
	srv.Kill()
	running(t, done, func() bool { return len(log.logged("relay lock lost; taking it again")) >= 1 })
	running(t, done, func() bool { return len(log.logged(lockServiceFailed)) >= before+3 })
	b.recordMany(t, []string{"K4", "K5"}, 5)
	time.Sleep(300 * time.Millisecond)
	if got := len(rec.all()); got != 30 {
		t.Fatalf("%d events delivered while the relay held no lock, want the 30 of before", got)
	}
	srv.Start()
	running(t, done, func() bool { return b.pending(t) == 0 })
	checkOrder(t, rec.all(), 40)
	want := map[string]bool{}
	for _, e := range outboxIDs(t, b) {
		want[e] = true
	}
	for _, id := range rec.ids() {
		delete(want, id)
	}
	if len(want) != 0 {
		t.Fatalf("events never received by the webhook: %v", want)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("relay did not stop")
	}
}

// running waits until cond holds, and fails if the relay ends first.
func running(t *testing.T, done <-chan error, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		select {
		case err := <-done:
			t.Fatalf("relay ended: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// outboxIDs returns the ids of every event in the outbox.
func outboxIDs(t *testing.T, b *bundle) []string {
	t.Helper()
	rows, err := b.db.Query("SELECT event_id FROM erpsync_events")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestRelayLockServiceDown: with Once, a lock service that fails ends the
// pass with its error, the events left pending; without Once, a relay
// retrying with a long backoff still stops at once when ctx ends.
func TestRelayLockServiceDown(t *testing.T) {
	b, srv := ownRedis(t)
	rec := &received{}
	hk := hook(t, nil, rec, nil)
	b.recordMany(t, []string{"K1"}, 3)
	srv.Kill()

	t.Run("once", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := b.relay(relay.Config{Once: true}, webhookSink(t, hk.URL, nil)).Run(ctx)
		if err == nil || errors.Is(err, relay.ErrSkipped) || !errors.Is(err, lock.ErrUnavailable) {
			t.Fatalf("run: %v, want the lock service's error", err)
		}
		if n := b.pending(t); n != 3 || len(rec.all()) != 0 {
			t.Fatalf("%d pending, %d delivered; want 3 and 0", n, len(rec.all()))
		}
	})

	t.Run("stop while retrying", func(t *testing.T) {
		log := &logLines{}
		r := relay.New(relay.Config{MinBackoff: time.Minute, MaxBackoff: time.Minute},
			b.ob, webhookSink(t, hk.URL, nil), b.locks, nil, zerolog.New(log))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		running(t, done, func() bool { return len(log.logged(lockServiceFailed)) >= 1 })
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run: %v, want nil on stop", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("relay waiting out its backoff did not stop")
		}
	})
}
