package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/outbox"
)

// The writes of an entity with events (entity.Entity.Events) record the
// change event of every row they change in the outbox, in the transaction
// that changes it: an insert, an update to a higher version, a restore, a
// soft delete. A write that changes nothing (a replay, a stale version, a
// lost fence) records nothing, and the outbox's UNIQUE index over (entity,
// key, version, op) drops a change recorded twice. Each write reads the
// rows' guards under a lock first (SELECT ... FOR UPDATE), so that what it
// calls a change is what it changed.

// events reports whether the table's writes record change events.
func (t *Table) events() bool { return t.ent.Events }

// jsonValue is the value of column i as an event carries it: decimal and
// int64 as JSON strings, a date YYYY-MM-DD, a datetime RFC 3339 in UTC
// with milliseconds, a json column as its JSON.
func (t *Table) jsonValue(i int, v entity.Value) any {
	if v.Null {
		return nil
	}
	switch t.kinds[i] {
	case entity.Int32:
		return v.I
	case entity.Int64:
		return strconv.FormatInt(v.I, 10)
	case entity.Bool:
		return v.I != 0
	case entity.DateTime:
		return outbox.FormatTime(v.T)
	case entity.JSON:
		return json.RawMessage(v.S)
	}
	return v.S // string, text, decimal, date
}

// event returns the change event of r written with op.
func (t *Table) event(r Row, op string) outbox.Event {
	key := make(map[string]any, len(t.keys))
	data := make(map[string]any, len(t.kinds))
	for i, c := range t.ent.Columns {
		v := t.jsonValue(i, r.Vals[i])
		data[c.Name] = v
		if t.isKey[i] {
			key[c.Name] = v
		}
	}
	return outbox.Event{Entity: t.ent.Name, Key: key, Op: op, Version: r.Version, RunID: r.RunID, Data: data}
}

// inTx runs write in a transaction and records the events it returns
// there, then commits.
func (s *Store) inTx(ctx context.Context, what string, write func(tx *sql.Tx) ([]outbox.Event, error)) error {
	tx, err := s.sql.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer tx.Rollback()
	evs, err := write(tx)
	if err != nil {
		return err
	}
	if err := outbox.Record(ctx, tx, evs); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", what, err)
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

// changeOp is the op of a landed write of a row that was prior (ok false:
// absent).
func changeOp(prior Current, ok bool) string {
	switch {
	case !ok:
		return outbox.OpInsert
	case prior.Deleted:
		return outbox.OpRestore
	}
	return outbox.OpUpdate
}

// execOne runs the statement l holds in tx, frees l, and reports whether
// it changed one row.
func execOne(ctx context.Context, tx *sql.Tx, l *literal) (bool, error) {
	res, err := tx.ExecContext(ctx, l.text())
	l.free()
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// insertWithEvents is InsertRows of an entity with events.
func (s *Store) insertWithEvents(ctx context.Context, rows []Row) error {
	err := s.inTx(ctx, "insert "+s.t.name, func(tx *sql.Tx) ([]outbox.Event, error) {
		if err := s.t.insert(ctx, tx, "INSERT", rows, ""); err != nil {
			return nil, err
		}
		evs := make([]outbox.Event, len(rows))
		for i, r := range rows {
			evs[i] = s.t.event(r, outbox.OpInsert)
		}
		return evs, nil
	})
	if isDuplicate(err) {
		return ErrDuplicate
	}
	return err
}

// upsertWithEvents is UpsertRows of an entity with events: the rows the
// guarded statement changed are those that hold, after it, the version
// and fencing token it wrote and did not before.
func (s *Store) upsertWithEvents(ctx context.Context, rows []Row) error {
	return s.inTx(ctx, "upsert "+s.t.name, func(tx *sql.Tx) ([]outbox.Event, error) {
		keys := keysOf(rows)
		prior, err := s.t.readVersionsLocking(ctx, tx, keys, true)
		if err != nil {
			return nil, err
		}
		if err := s.t.insert(ctx, tx, "INSERT", rows, s.t.upsert); err != nil {
			return nil, err
		}
		after, err := s.t.readVersions(ctx, tx, keys)
		if err != nil {
			return nil, err
		}
		var evs []outbox.Event
		for _, r := range rows {
			p, had := prior[r.Key]
			a := after[r.Key]
			mine := a.Version == r.Version && a.Fence == r.Fence && !a.Deleted
			if mine && (!had || p.Version != r.Version || p.Fence != r.Fence || p.Deleted) {
				evs = append(evs, s.t.event(r, changeOp(p, had)))
			}
		}
		return evs, nil
	})
}

// updateWithEvents runs the guarded UPDATE of each of rows in one
// transaction, records the event of each it changed, and reports which.
func (s *Store) updateWithEvents(ctx context.Context, what string, rows []Row) ([]bool, error) {
	done := make([]bool, len(rows))
	err := s.inTx(ctx, what+" "+s.t.name, func(tx *sql.Tx) ([]outbox.Event, error) {
		prior, err := s.t.readVersionsLocking(ctx, tx, keysOf(rows), true)
		if err != nil {
			return nil, err
		}
		var evs []outbox.Event
		for i, r := range rows {
			l := newLiteral()
			if err := s.t.updateRow(l, r); err != nil {
				l.free()
				return nil, err
			}
			if done[i], err = execOne(ctx, tx, l); err != nil {
				return nil, err
			}
			if done[i] {
				p, had := prior[r.Key]
				evs = append(evs, s.t.event(r, changeOp(p, had)))
			}
		}
		return evs, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, s.t.name, err)
	}
	return done, nil
}

// softDeleteWithEvents is SoftDelete of an entity with events: the event
// of a row it deletes carries the row's data as it was.
func (s *Store) softDeleteWithEvents(ctx context.Context, ts []Tombstone) ([]bool, error) {
	done := make([]bool, len(ts))
	err := s.inTx(ctx, "soft delete "+s.t.name, func(tx *sql.Tx) ([]outbox.Event, error) {
		var deleted []string
		for i, t := range ts {
			l := newLiteral()
			l.sql("UPDATE " + quoteIdent(s.t.name) + " SET deleted_at = UTC_TIMESTAMP(3)")
			s.t.liveKey(l, t.ErpID, t.Fence)
			l.sql(" AND erp_version = ")
			l.int(t.Version)
			var err error
			if done[i], err = execOne(ctx, tx, l); err != nil {
				return nil, err
			}
			if done[i] {
				deleted = append(deleted, t.ErpID)
			}
		}
		runs := make(map[string]string, len(ts))
		for _, t := range ts {
			runs[t.ErpID] = t.RunID
		}
		var evs []outbox.Event
		if deleted == nil {
			return nil, nil
		}
		err := s.scanRows(ctx, tx, deleted, func(st *Stored) error {
			r := st.Row
			r.Vals = append([]entity.Value(nil), st.Vals...)
			r.RunID = runs[r.Key]
			evs = append(evs, s.t.event(r, outbox.OpDelete))
			return nil
		})
		return evs, err
	})
	if err != nil {
		return nil, err
	}
	return done, nil
}
