package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Pending is an undelivered event as the relay reads it.
type Pending struct {
	// Seq is the outbox's id: the order of recording.
	Seq     int64
	ID      string
	Entity  string
	Key     string // KeyText of the key
	Op      string
	Version int64
	// Body is the event's JSON (a Body).
	Body []byte
}

// StoredColumns are the columns of an outbox row that Stored reads, in
// the order of Stored.Dest.
const StoredColumns = "id, event_id, entity, op, entity_key, version, life, run_id, body, payload"

// Stored is an outbox row as read back: the event's identity, its run
// and what its body is made of.
type Stored struct {
	// Seq is the row's id, the order of recording: the body's seq. A
	// writer records a key's event after the statement that changed the
	// key's row, in its transaction, so the row lock orders two writers
	// of one key and the second takes its id after the first committed:
	// a key's events have increasing ids, whatever their ops and
	// whichever process, statement (INSERT or load) or entity wrote
	// them. AUTO_INCREMENT never gives an id twice: MySQL 8 and MariaDB
	// 10.2.4 and later keep the counter over a restart, also when every
	// event was pruned.
	Seq                 int64
	ID, Entity, Op, Key string
	Version, Life       int64
	RunID               string
	// body is the whole body of an event recorded before the outbox had
	// payload (nil since); payload is the event's data.
	body, payload []byte
}

// Dest are the scan destinations of StoredColumns.
func (s *Stored) Dest() []any {
	return []any{&s.Seq, &s.ID, &s.Entity, &s.Op, &s.Key, &s.Version, &s.Life, &s.RunID, &s.body, &s.payload}
}

// Body is the event's JSON, the Body a consumer receives: the one its
// columns and payload make, or, for an event recorded whole before the
// outbox stored payload, the body it was recorded with and its seq.
func (s *Stored) Body() []byte {
	if s.body != nil {
		return withSeq(s.body, s.Seq)
	}
	return appendBody(make([]byte, 0, 144+len(s.Entity)+len(s.Key)+len(s.RunID)+len(s.payload)), s.ID, s.Entity, s.Op, s.Key, s.Version, s.Seq, s.RunID, s.payload)
}

// Outbox is the outbox table of one database.
type Outbox struct {
	db *sql.DB
	q  *queries
}

// New returns the outbox of the MySQL database db connects to (migrated
// to erpsync's schema); NewPostgres is a PostgreSQL database's.
func New(db *sql.DB) *Outbox { return &Outbox{db: db, q: &mysqlQueries} }

// queries are the statements of an Outbox in its database's dialect.
// What they decide is the same on each: the rule that a mark under an
// older fencing token marks nothing is MarkDelivered's, in Go.
type queries struct {
	// now reads the database's clock in UTC, to the millisecond.
	now string
	// pending reads the undelivered events in id order; its argument
	// is the limit.
	pending string
	// raiseFence stores the token $2 under the name $1, or keeps the
	// stored token where it is higher: the stored token becomes the
	// greater of the two, its updated_at changes only when the new one
	// is not lower, and the row stays locked until the transaction ends.
	raiseFence string
	// readFence reads the token stored under the name $1.
	readFence string
	// mark sets delivered_at on the undelivered events whose ids follow
	// it, as placeholders of the dialect (placeholder) from the first.
	mark string
	// prune deletes up to $2 events delivered before $1, the oldest
	// first.
	prune string
	// stats counts the events of each entity: pending, delivered, when
	// the oldest pending one was recorded.
	stats string
	// placeholder is the dialect's placeholder of the i-th argument, 1
	// the first.
	placeholder func(i int) string
}

var mysqlQueries = queries{
	now:     "SELECT UTC_TIMESTAMP(3)",
	pending: "SELECT " + StoredColumns + " FROM erpsync_events WHERE delivered_at IS NULL ORDER BY id LIMIT ?",
	raiseFence: `INSERT INTO erpsync_relay_fence (name, fence_token, updated_at) VALUES (?, ?, UTC_TIMESTAMP(3))
ON DUPLICATE KEY UPDATE updated_at = IF(VALUES(fence_token) >= fence_token, VALUES(updated_at), updated_at),
  fence_token = GREATEST(fence_token, VALUES(fence_token))`,
	readFence: "SELECT fence_token FROM erpsync_relay_fence WHERE name = ?",
	mark:      "UPDATE erpsync_events SET delivered_at = UTC_TIMESTAMP(3) WHERE delivered_at IS NULL AND id IN (",
	prune:     "DELETE FROM erpsync_events WHERE delivered_at IS NOT NULL AND delivered_at < ? ORDER BY delivered_at LIMIT ?",
	stats: `SELECT entity, SUM(delivered_at IS NULL), SUM(delivered_at IS NOT NULL),
  MIN(CASE WHEN delivered_at IS NULL THEN recorded_at END)
FROM erpsync_events GROUP BY entity ORDER BY entity`,
	placeholder: func(int) string { return "?" },
}

// Pending returns up to limit undelivered events, in id order. It reads
// what is undelivered, not what lies past an id: an event whose
// transaction committed after later ones is read at its turn.
func (o *Outbox) Pending(ctx context.Context, limit int) ([]Pending, error) {
	rows, err := o.db.QueryContext(ctx, o.q.pending, limit)
	if err != nil {
		return nil, fmt.Errorf("read pending events: %w", err)
	}
	defer rows.Close()
	var out []Pending
	for rows.Next() {
		var s Stored
		if err := rows.Scan(s.Dest()...); err != nil {
			return nil, fmt.Errorf("read pending events: %w", err)
		}
		out = append(out, Pending{Seq: s.Seq, ID: s.ID, Entity: s.Entity, Key: s.Key, Op: s.Op, Version: s.Version, Body: s.Body()})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read pending events: %w", err)
	}
	return out, nil
}

// relayFence is the name of the relay's row in erpsync_relay_fence.
const relayFence = "relay"

// MarkDelivered sets delivered_at on the events of seqs, under the relay
// lock's fencing token fence: in one transaction it raises the stored
// token to fence and marks only if no newer token was stored before.
// ErrFenced says a relay with a newer token has marked: nothing is marked.
func (o *Outbox) MarkDelivered(ctx context.Context, fence int64, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("mark delivered: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, o.q.raiseFence, relayFence, fence); err != nil {
		return fmt.Errorf("mark delivered: raise fence: %w", err)
	}
	var stored int64
	if err := tx.QueryRowContext(ctx, o.q.readFence, relayFence).Scan(&stored); err != nil {
		return fmt.Errorf("mark delivered: read fence: %w", err)
	}
	if stored > fence {
		return fmt.Errorf("%w (token %d, stored %d)", ErrFenced, fence, stored)
	}
	var q strings.Builder
	q.WriteString(o.q.mark)
	args := make([]any, len(seqs))
	for i, s := range seqs {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(o.q.placeholder(i + 1))
		args[i] = s
	}
	q.WriteByte(')')
	if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
		return fmt.Errorf("mark delivered: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("mark delivered: %w", err)
	}
	return nil
}

// Prune deletes events delivered before cutoff, at most limit of them, and
// returns how many it deleted.
func (o *Outbox) Prune(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	res, err := o.db.ExecContext(ctx, o.q.prune, cutoff.UTC(), limit)
	if err != nil {
		return 0, fmt.Errorf("prune delivered events: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// EntityStats are the outbox's counts of one entity.
type EntityStats struct {
	Entity    string
	Pending   int64
	Delivered int64
	// OldestPending is when the oldest undelivered event was recorded;
	// zero when none is pending.
	OldestPending time.Time
}

// Stats are the outbox's counts, per entity in name order, and the
// database's clock when they were read.
type Stats struct {
	Entities []EntityStats
	Now      time.Time
}

// Pending is the number of undelivered events of every entity.
func (s Stats) Pending() int64 {
	var n int64
	for _, e := range s.Entities {
		n += e.Pending
	}
	return n
}

// OldestPendingAge is how long the oldest undelivered event has waited;
// 0 when none is pending.
func (s Stats) OldestPendingAge() time.Duration {
	var oldest time.Time
	for _, e := range s.Entities {
		if !e.OldestPending.IsZero() && (oldest.IsZero() || e.OldestPending.Before(oldest)) {
			oldest = e.OldestPending
		}
	}
	if oldest.IsZero() {
		return 0
	}
	return max(s.Now.Sub(oldest), 0)
}

// Stats counts the outbox per entity.
func (o *Outbox) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	if err := o.db.QueryRowContext(ctx, o.q.now).Scan(&st.Now); err != nil {
		return st, fmt.Errorf("count events: %w", err)
	}
	rows, err := o.db.QueryContext(ctx, o.q.stats)
	if err != nil {
		return st, fmt.Errorf("count events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e EntityStats
		var oldest sql.NullTime
		if err := rows.Scan(&e.Entity, &e.Pending, &e.Delivered, &oldest); err != nil {
			return st, fmt.Errorf("count events: %w", err)
		}
		e.OldestPending = oldest.Time
		st.Entities = append(st.Entities, e)
	}
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("count events: %w", err)
	}
	return st, nil
}
