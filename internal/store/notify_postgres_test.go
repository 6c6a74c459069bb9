package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/outbox/outboxtest"
	"github.com/erpsync/erpsync/internal/store"
)

// notifications is a connection of a test's own that listens on the
// outbox's channel.
type notifications struct{ c *pgx.Conn }

func listenOn(t *testing.T, dsn string) *notifications {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	if _, err := c.Exec(ctx, "LISTEN "+outbox.Channel); err != nil {
		t.Fatal(err)
	}
	return &notifications{c: c}
}

// count waits for notifications until quiet passes without one, and
// returns how many came.
func (n *notifications) count(t *testing.T, quiet time.Duration) int {
	t.Helper()
	for k := 0; ; k++ {
		ctx, cancel := context.WithTimeout(context.Background(), quiet)
		_, err := n.c.WaitForNotification(ctx)
		cancel()
		switch {
		case pgconn.Timeout(err):
			return k
		case err != nil:
			t.Fatal(err)
		}
	}
}

// quiet is how long count waits for a notification that is due: far
// more than NotifyEvery and a round trip on a loaded machine.
const quiet = 2 * time.Second

// quickPair writes two versions of a row at once, after the notifier's
// interval has passed, and reports whether both commits fell within half
// an interval: the second's notification is then the trailing one.
func quickPair(t *testing.T, w *store.Store, v int64) bool {
	t.Helper()
	time.Sleep(2 * outbox.NotifyEvery)
	start := time.Now()
	outboxtest.WriteNote(t, w, 1, v)
	outboxtest.WriteNote(t, w, 1, v+1)
	return time.Since(start) < outbox.NotifyEvery/2
}

// TestNotifyAfterCommit: on PostgreSQL, a write that records events
// notifies the outbox's channel after its commit, one that records none
// does not; a burst of commits sends few notifications, at most one an
// interval after the first, and its last commit is always followed by
// one, also when the store closes right after it.
func TestNotifyAfterCommit(t *testing.T) {
	t.Parallel()
	s, dsn := pgStore(t)
	w := entityStore(t, s, outboxtest.Notes(t, "notes", true))
	plain := entityStore(t, s, outboxtest.Notes(t, "plain", false))
	l := listenOn(t, dsn)

	outboxtest.WriteNote(t, plain, 1, 1)
	outboxtest.WriteNote(t, plain, 1, 2)
	if n := l.count(t, quiet); n != 0 {
		t.Errorf("%d notifications after writes without events, want none", n)
	}

	const commits = 50
	start := time.Now()
	for v := range int64(commits) {
		outboxtest.WriteNote(t, w, 1, v+1)
	}
	span := time.Since(start)
	most := 2 + int(span/outbox.NotifyEvery)
	n := l.count(t, quiet)
	t.Logf("%d commits in %s: %d notifications", commits, span, n)
	if n < 2 || n > min(most, commits-1) {
		t.Errorf("%d commits in %s: %d notifications, want 2 to %d (one every %s at most, and one after the last)", commits, span, n, min(most, commits-1), outbox.NotifyEvery)
	}

	// Two commits within an interval: the second is answered by the
	// notification at the interval's end, not dropped; the same on a
	// store that closes right after the second commit: Close sends the
	// notification still due.
	v := int64(commits + 1)
	pair(t, l, "two commits within "+(outbox.NotifyEvery/2).String(), func() bool {
		v += 2
		return quickPair(t, w, v)
	})
	pair(t, l, "two commits within "+(outbox.NotifyEvery/2).String()+", then Close", func() bool {
		v += 2
		other, err := store.Open(context.Background(), dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		return quickPair(t, other.For(w.Table()), v)
	})
}

// pair runs write, which commits twice and reports whether both commits
// fell within half an interval, until they do (six tries), and expects
// two notifications after it.
func pair(t *testing.T, l *notifications, what string, write func() bool) {
	t.Helper()
	for try := range 6 {
		quick := write()
		if n := l.count(t, quiet); quick && n != 2 {
			t.Errorf("%s: %d notifications, want 2 (the second's at the interval's end)", what, n)
		}
		if quick {
			return
		}
		t.Logf("%s, try %d: the commits took longer", what, try+1)
	}
	t.Skipf("%s: no two commits within %s in six tries: the machine is too slow to tell a trailing notification", what, outbox.NotifyEvery/2)
}
