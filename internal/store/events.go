package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/erpsync/erpsync/internal/dberr"
	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/outbox"
)

// The writes of an entity with events (entity.Entity.Events) record the
// change event of every row they change in the outbox, in the transaction
// that changes it, after the statement that changed it (so that the row
// lock orders a key's events: their outbox ids, the events' seq, increase
// with every event of the key): an insert, an update to a higher version,
// a restore, a soft delete, a repair at the row's version (repair.go). A
// write that changes nothing (a replay, a stale version, a lost fence)
// records nothing, and the outbox's UNIQUE index over (entity, key,
// version, op, life) drops a change recorded twice; life is the row's
// restore_count after the write, which a restore and a repair raise. Each
// write reads the rows' guards under a lock first (SELECT ... FOR UPDATE),
// so that what it calls a change is what it changed.

// events reports whether the table's writes record change events.
func (t *Table) events() bool { return t.ent.Events }

// event returns the change event of r written with op: its columns, and
// under each child's name the child's lines, in order, each an object of
// the child's columns, encoded by the table's compiled encoder
// (eventJSON). A value that does not encode (a json column whose text is
// not JSON) is an error: the write fails, nothing is recorded half.
func (t *Table) event(r Row, op string) (outbox.Event, error) {
	ev := outbox.Event{Entity: t.ent.Name, Op: op, Version: r.Version, RunID: r.RunID}
	if err := t.evJSON.encode(t, &r, &ev); err != nil {
		return ev, fmt.Errorf("change event of %s key %q: %w", t.ent.Name, r.Key, err)
	}
	return ev, nil
}

// inTx runs write in a transaction and records the events it returns
// there, then commits; on PostgreSQL, a commit that recorded events asks
// for a notification to the relay (outbox.Notifier). A deadlock or a lock
// wait timeout rolls the transaction back and runs it again (retrying):
// write reads what it decides on inside the transaction. Writers of
// adjacent documents meet in the gaps of the child tables' index.
func (s *Store) inTx(ctx context.Context, what string, write func(tx *sql.Tx) ([]outbox.Event, error)) error {
	return retrying(func() error { return s.tx(ctx, what, write) })
}

// inTxResumed is inTx that also runs the transaction again when the
// server ended its session under it (sessionEnded): a process paused
// inside it wakes and writes again. It is for guarded writes that record
// no change events (a quarantine, quarantine marks); a chunk of records
// whose session ended goes record by record instead, each under a fresh
// lock.
func (s *Store) inTxResumed(ctx context.Context, what string, write func(tx *sql.Tx) ([]outbox.Event, error)) error {
	return retrying(func() error { return s.tx(ctx, what, write) }, sessionEnded)
}

// sessionEnded reports whether err says the server ended the session of a
// transaction before its commit reached it, and so rolled it back:
// PostgreSQL's idle_in_transaction_session_timeout (25P03), or MariaDB's
// idle_transaction_timeout, after which the driver finds the connection
// closed before it sends the next statement or the COMMIT
// (driver.ErrBadConn; a connection lost after the COMMIT was sent is
// mysql.ErrInvalidConn, whose outcome is unknown, and is not retried).
// A transaction that could not begin because the server had no connection
// to spare (patientConnector's refusal, a driver.ErrBadConn too) is run
// again the same way: nothing of it reached the server.
func sessionEnded(err error) bool {
	return dberr.PgCode(err) == pgIdleTxEnded || errors.Is(err, driver.ErrBadConn)
}

// tx is one attempt of inTx.
func (s *Store) tx(ctx context.Context, what string, write func(tx *sql.Tx) ([]outbox.Event, error)) error {
	tx, err := s.sql.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer tx.Rollback()
	evs, err := write(tx)
	if err != nil {
		return err
	}
	if err := s.rec.Record(ctx, tx, evs); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", what, err)
	}
	if len(evs) > 0 && s.notify != nil {
		// After the commit, outside the transaction: a NOTIFY in it
		// would serialize the commits of every writer (outbox.Notifier).
		s.notify.Notify()
	}
	return nil
}

func keysOf(rows []Row) []string {
	keys := make([]string, len(rows))
	for i, r := range rows {
		keys[i] = r.Key
	}
	return keys
}

// landedChange is the op and the life (the row's restore_count after it) of a
// landed write of a row that was prior (ok false: absent): an insert at
// life 0, a restore one life on, an update in the row's life.
func landedChange(prior Current, ok bool) (op string, life int64) {
	switch {
	case !ok:
		return outbox.OpInsert, 0
	case prior.Deleted:
		return outbox.OpRestore, prior.RestoreCount + 1
	}
	return outbox.OpUpdate, prior.RestoreCount
}

// insertInTx is InsertRows of a transactional table: the rows, their
// lines and their change events in one transaction.
func (s *Store) insertInTx(ctx context.Context, rows []Row) error {
	err := s.inTx(ctx, "insert "+s.t.name, func(tx *sql.Tx) ([]outbox.Event, error) {
		if err := s.t.insert(ctx, tx, "INSERT", rows, ""); err != nil {
			return nil, fmt.Errorf("insert %s: %w", s.t.name, err)
		}
		return s.written(ctx, tx, rows, nil, nil, nil)
	})
	if isDuplicate(err) {
		return ErrDuplicate
	}
	return err
}

// upsertInTx is UpsertRows of a transactional table. The rows the guarded
// statement changed (landed) are those that hold, after it, the version
// and fencing token it wrote, live, and did not before: their lines and
// change events are written, a replay's and a loser's are not.
func (s *Store) upsertInTx(ctx context.Context, rows []Row) error {
	return s.inTx(ctx, "upsert "+s.t.name, func(tx *sql.Tx) ([]outbox.Event, error) {
		keys := keysOf(rows)
		prior, err := s.t.readVersionsLocking(ctx, tx, keys, true)
		if err != nil {
			return nil, err
		}
		if err := s.t.insert(ctx, tx, "INSERT", rows, s.t.upsert); err != nil {
			return nil, fmt.Errorf("upsert %s: %w", s.t.name, err)
		}
		after, err := s.t.readVersions(ctx, tx, keys)
		if err != nil {
			return nil, err
		}
		landed, clear := make([]bool, len(rows)), make([]bool, len(rows))
		for i, r := range rows {
			p, had := prior[r.Key]
			a := after[r.Key]
			mine := a.Version == r.Version && a.Fence == r.Fence && !a.Deleted
			landed[i] = mine && (!had || p.Version != r.Version || p.Fence != r.Fence || p.Deleted)
			clear[i] = landed[i] && had
		}
		return s.written(ctx, tx, rows, landed, clear, prior)
	})
}

// written is what follows, in its transaction, a write of rows of which
// landed tells which it changed (nil: all): it writes their lines (first
// deleting those gone from the rows that clear tells, nil: none) and
// returns their change events, none when the entity has no events. prior
// are the rows' guards before the write; a row absent there was inserted.
func (s *Store) written(ctx context.Context, tx *sql.Tx, rows []Row, landed, clear []bool, prior map[string]Current) ([]outbox.Event, error) {
	if err := s.t.writeLines(ctx, tx, rows, landed, clear); err != nil {
		return nil, err
	}
	if !s.t.events() {
		return nil, nil
	}
	var evs []outbox.Event
	for i, r := range rows {
		if landed == nil || landed[i] {
			p, had := prior[r.Key]
			op, life := landedChange(p, had)
			ev, err := s.t.event(r, op)
			if err != nil {
				return nil, err
			}
			ev.Life = life
			evs = append(evs, ev)
		}
	}
	return evs, nil
}

// changes records the change events of the rows that the statements of
// one transaction changed (eachRecording): before runs before them (nil:
// nothing to do), after gets which statements changed a row.
type changes struct {
	before func(tx *sql.Tx) error
	after  func(tx *sql.Tx, done []bool) ([]outbox.Event, error)
}

// rowChanges writes the lines and records the events of guarded updates
// of rows (nil when the table is not transactional): each row changed is
// an update, or a restore of a row that was soft-deleted, as its guards
// read under a lock before the updates tell; a row changed existed, so
// its lines gone are deleted.
func (s *Store) rowChanges(ctx context.Context, rows []Row) *changes {
	if !s.t.transactional() {
		return nil
	}
	var prior map[string]Current
	ch := &changes{after: func(tx *sql.Tx, done []bool) ([]outbox.Event, error) {
		return s.written(ctx, tx, rows, done, done, prior)
	}}
	if s.t.events() {
		ch.before = func(tx *sql.Tx) (err error) {
			prior, err = s.t.readVersionsLocking(ctx, tx, keysOf(rows), true)
			return err
		}
	}
	return ch
}

// deleteChanges records the events of soft deletes of ts (nil when the
// entity has no events): the event of a row deleted carries the row's
// data and lines as they were.
func (s *Store) deleteChanges(ctx context.Context, ts []Tombstone) *changes {
	if !s.t.events() {
		return nil
	}
	return &changes{after: func(tx *sql.Tx, done []bool) ([]outbox.Event, error) {
		deleted := []string{}
		runs := make(map[string]string, len(ts))
		for i, t := range ts {
			if done[i] {
				deleted = append(deleted, t.ErpID)
				runs[t.ErpID] = t.RunID
			}
		}
		lines, err := s.linesOf(ctx, tx, deleted)
		if err != nil {
			return nil, err
		}
		var evs []outbox.Event
		err = s.scanRows(ctx, tx, deleted, func(st *Stored) error {
			r := st.Row
			r.Vals = append([]entity.Value(nil), st.Vals...)
			r.RunID = runs[r.Key]
			r.Children = lines[r.Key]
			ev, err := s.t.event(r, outbox.OpDelete)
			if err != nil {
				return err
			}
			ev.Life = st.RestoreCount
			evs = append(evs, ev)
			return nil
		})
		return evs, err
	}}
}

// Outbox is the relay's side of the store's outbox, in its dialect.
func (s *Store) Outbox() *outbox.Outbox {
	if s.d == Postgres {
		return outbox.NewPostgres(s.sql)
	}
	return outbox.New(s.sql)
}
