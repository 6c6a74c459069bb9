package outbox

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
)

// Channel is the PostgreSQL notification channel on which the store says
// that a transaction that recorded events committed, and on which the
// relay listens. A notification carries nothing (an empty payload): it is
// a hint to read Pending now, which the relay's poll would read anyway.
const Channel = "erpsync_events"

// NotifyEvery is the least time between two notifications of one
// Notifier: a sync that commits hundreds of transactions a second sends
// ten notifications a second, each a transaction of its own that takes
// PostgreSQL's notification queue lock for a moment.
const NotifyEvery = 100 * time.Millisecond

// notifyTimeout bounds one notification's statement: a database that does
// not answer costs a notification, never a write.
const notifyTimeout = 5 * time.Second

// ErrNoNotifications is Listen's answer on MySQL, which has no
// notifications.
var ErrNoNotifications = errors.New("outbox: the database has no notifications (MySQL)")

// Notifier sends the notification of Channel on a PostgreSQL database
// after commits that recorded events, outside their transactions: a NOTIFY
// inside the writer's transaction would hold PostgreSQL's global
// notification lock until the commit, and serialize the commits of all
// notifying writers on it.
//
// It sends at most one notification every interval, and never drops the
// last one asked for: a request within the interval after a send
// schedules one send at the interval's end, which answers every request
// until then. Every request is thus followed by a notification sent after
// it. A failed send is ignored: the relay's poll finds the events anyway.
type Notifier struct {
	db    *sql.DB
	every time.Duration

	mu sync.Mutex
	// last is when the last send started.
	last time.Time
	// trailing is the send scheduled at the interval's end (nil: none).
	trailing *time.Timer
	closed   bool
	// sends counts the sends under way or scheduled, for Close.
	sends sync.WaitGroup
}

// NewNotifier returns the notifier of the PostgreSQL database db connects
// to, sending at most one notification every interval.
func NewNotifier(db *sql.DB, every time.Duration) *Notifier {
	return &Notifier{db: db, every: every}
}

// Notify asks for a notification: sent now, in the background, when the
// last one is an interval old; else at the interval's end. It does not
// wait for the database.
func (n *Notifier) Notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || n.trailing != nil {
		return // the scheduled send comes after this request
	}
	now := time.Now()
	if wait := n.every - now.Sub(n.last); wait > 0 {
		n.sends.Add(1)
		n.trailing = time.AfterFunc(wait, n.fire)
		return
	}
	n.last = now
	n.sends.Go(n.send)
}

// fire is the send scheduled at an interval's end.
func (n *Notifier) fire() {
	defer n.sends.Done()
	n.mu.Lock()
	n.trailing = nil
	n.last = time.Now()
	n.mu.Unlock()
	n.send()
}

func (n *Notifier) send() {
	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	defer cancel()
	// An error is no loss: the relay polls.
	_, _ = n.db.ExecContext(ctx, "SELECT pg_notify('"+Channel+"', '')")
}

// Close sends at once the notification still scheduled, waits for the
// sends under way, and refuses any request after: nothing of n runs once
// it returns, and the pool may close.
func (n *Notifier) Close() {
	n.mu.Lock()
	n.closed = true
	t := n.trailing
	n.trailing = nil
	n.mu.Unlock()
	if t != nil && t.Stop() {
		n.send()
		n.sends.Done()
	}
	n.sends.Wait()
}

// Notifies reports whether the outbox's database has notifications
// (PostgreSQL), so that Listen can wake a relay.
func (o *Outbox) Notifies() bool { return o.q == &postgresQueries }

// Listen takes one connection of the pool for itself, runs LISTEN on
// Channel there, and calls notified once it listens (for the events
// committed while nothing listened), then after each notification. It
// returns when ctx ends (nil) or the connection fails (its error, never
// nil). The connection is closed after, never given back to the pool: a
// connection that listened would go on collecting notifications. On MySQL
// it returns ErrNoNotifications.
func (o *Outbox) Listen(ctx context.Context, notified func()) error {
	if !o.Notifies() {
		return ErrNoNotifications
	}
	conn, err := o.db.Conn(ctx)
	if err != nil {
		return listenEnded(ctx, fmt.Errorf("listen: %w", err))
	}
	defer conn.Close()
	var lerr error
	err = conn.Raw(func(dc any) error {
		lerr = listen(ctx, dc, notified)
		// Discards the connection (database/sql closes a connection
		// whose user says it is bad).
		return driver.ErrBadConn
	})
	if lerr == nil && !errors.Is(err, driver.ErrBadConn) {
		lerr = fmt.Errorf("listen: %w", err)
	}
	return listenEnded(ctx, lerr)
}

// listenEnded is Listen's answer after err: nil once ctx ended.
func listenEnded(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	if err == nil {
		return errors.New("listen: connection lost")
	}
	return err
}

// listen runs LISTEN on the driver connection dc and waits for
// notifications, calling notified after the LISTEN and each notification.
func listen(ctx context.Context, dc any, notified func()) error {
	sc, ok := dc.(*stdlib.Conn)
	if !ok {
		return fmt.Errorf("listen: a %T, not a pgx connection", dc)
	}
	c := sc.Conn()
	if _, err := c.Exec(ctx, "LISTEN "+Channel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	notified()
	for {
		if _, err := c.WaitForNotification(ctx); err != nil {
			return fmt.Errorf("wait for notification: %w", err)
		}
		notified()
	}
}
