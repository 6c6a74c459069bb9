package relay_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/outbox/outboxtest"
	"github.com/erpsync/erpsync/internal/relay"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/lock"
)

// The tests of this file run on the database each names, whatever the
// matrix says: the notifications are PostgreSQL's.

// longPoll is the relay's poll in these tests, and wakeBound the most a
// notified relay may take to deliver: far apart, so that a loaded machine
// cannot make the poll pass for a notification.
const (
	longPoll  = 60 * time.Second
	wakeBound = 10 * time.Second
)

// setupAt is setup on the database of dsn.
func setupAt(t *testing.T, dsn string) *bundle {
	t.Helper()
	db := outboxtest.OpenAt(t, dsn)
	locks := lock.New(testenv.Redis(t), &lock.Options{Prefix: testenv.RandomName("erpsync_t_") + ":"})
	return &bundle{db: db, ob: db.Outbox, locks: locks}
}

// writing is setupAt on the database of dsn, with the table of a notes
// entity with events there, and the store that writes it: each write's
// commit records an event and, on PostgreSQL, notifies.
func writing(t *testing.T, dsn string) (*bundle, *store.Store) {
	t.Helper()
	b := setupAt(t, dsn)
	ctx := context.Background()
	e := outboxtest.Notes(t, "notes", true)
	p, err := b.db.Store.PlanEntities(ctx, []*entity.Entity{e})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Store.ApplyEntities(ctx, p); err != nil {
		t.Fatal(err)
	}
	tab, err := store.Compile(e)
	if err != nil {
		t.Fatal(err)
	}
	return b, b.db.Store.For(tab)
}

// idleRelay starts a relay with a long poll on b (start) and waits until
// it has made passes passes that found nothing.
func (b *bundle) idleRelay(t *testing.T, passes int64, log zerolog.Logger) (*relay.Relay, <-chan error, *idlePasses) {
	t.Helper()
	obs := &idlePasses{}
	r, done := b.start(t, &received{}, obs, log)
	running(t, done, func() bool { return obs.n.Load() >= passes })
	return r, done, obs
}

// idlePasses is a relay.Observer that counts the outbox's counts, which
// a relay takes after each pass that found nothing.
type idlePasses struct{ n atomic.Int64 }

func (o *idlePasses) ObserveOutbox(outbox.Stats) { o.n.Add(1) }
func (*idlePasses) ObserveRelaySkipped()         {}
func (*idlePasses) ObserveRelayLockFailed()      {}
func (*idlePasses) ObserveDeliveryFailed()       {}

// start runs a relay with a long poll over b into a webhook that rec
// keeps, until the test ends.
func (b *bundle) start(t *testing.T, rec *received, obs relay.Observer, log zerolog.Logger) (*relay.Relay, <-chan error) {
	t.Helper()
	srv := hook(t, nil, rec, nil)
	cfg := relay.Config{Poll: longPoll, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	r := relay.New(cfg, b.ob, webhookSink(t, srv.URL, nil), b.locks, obs, log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay: %v", err)
		}
	})
	return r, done
}

// delivered waits, within wakeBound, for the relay to have delivered n
// events, and returns how long it took.
func delivered(t *testing.T, r *relay.Relay, done <-chan error, n int64) time.Duration {
	t.Helper()
	start := time.Now()
	for r.Delivered() < n {
		select {
		case err := <-done:
			t.Fatalf("relay ended: %v", err)
		default:
		}
		if time.Since(start) > wakeBound {
			t.Fatalf("%d events delivered after %s, want %d: the relay waits out its poll of %s", r.Delivered(), wakeBound, n, longPoll)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// TestNotificationWakesTheRelay: on PostgreSQL, an event committed while
// the relay waits out a long poll is delivered at once (the store's
// notification wakes it); on MySQL, it waits for the poll.
func TestNotificationWakesTheRelay(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		b, w := writing(t, testenv.PostgresDSN(t))
		// Two passes that find nothing: the first, and the one after the
		// LISTEN, which looks for what was committed before it. Only a
		// notification wakes the relay before the poll after them.
		r, done, _ := b.idleRelay(t, 2, zerolog.Nop())
		outboxtest.WriteNote(t, w, 1, 1)
		t.Logf("delivered %s after the commit", delivered(t, r, done, 1))
		// Another one, now that the relay waits again.
		outboxtest.WriteNote(t, w, 1, 2)
		t.Logf("delivered %s after the commit", delivered(t, r, done, 2))
	})
	t.Run("mysql", func(t *testing.T) {
		t.Parallel()
		b, w := writing(t, testenv.MySQLDSN(t))
		r, _, _ := b.idleRelay(t, 1, zerolog.Nop())
		outboxtest.WriteNote(t, w, 1, 1)
		// Nothing wakes it: the event waits for the poll, a minute away.
		time.Sleep(2 * time.Second)
		if n := r.Delivered(); n != 0 {
			t.Errorf("%d events delivered within 2s of the commit on MySQL, want none before the poll of %s", n, longPoll)
		}
	})
}

// TestListenerSurvivesATerminatedConnection: the relay's listening
// connection killed (pg_terminate_backend, as a server restart does) is
// logged once, listened again, and the next commit wakes the relay.
func TestListenerSurvivesATerminatedConnection(t *testing.T) {
	t.Parallel()
	b, w := writing(t, testenv.PostgresDSN(t))
	log := &logLines{}
	r, done, obs := b.idleRelay(t, 2, zerolog.New(log))
	var pid int
	running(t, done, func() bool {
		pid = listener(t, b)
		return pid != 0
	})
	var killed bool
	if err := b.db.QueryRow("SELECT pg_terminate_backend($1)", pid).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate the listener's backend %d: %v %v", pid, killed, err)
	}
	// Listening again, the relay looks once more (a third idle pass).
	running(t, done, func() bool {
		again := listener(t, b)
		return again != 0 && again != pid && obs.n.Load() >= 3
	})
	outboxtest.WriteNote(t, w, 1, 1)
	t.Logf("delivered %s after the commit", delivered(t, r, done, 1))
	if n := len(log.logged(listenerFailed)); n != 1 {
		t.Errorf("%q logged %d times, want once", listenerFailed, n)
	}
}

const listenerFailed = "relay listener failed; polling until it listens again"

// listener is the process id of the backend that listens on b's database
// (0: none).
func listener(t *testing.T, b *bundle) int {
	t.Helper()
	var pid int
	err := b.db.QueryRow(`SELECT COALESCE(MAX(pid), 0) FROM pg_stat_activity
WHERE datname = current_database() AND state = 'idle' AND query = 'LISTEN ' || $1`, outbox.Channel).Scan(&pid)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
