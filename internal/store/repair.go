package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/outbox"
)

// Repair makes the rows that the table holds live at the rows' own version
// with a fencing token no newer than theirs exactly the rows (their
// columns, erp_updated_at and lines), and reports which it changed:
// reconcile's repair of a row whose fields or lines differ from the
// source's at the version the row holds (a change the source made without
// moving its version, or one made by hand). It reads the rows under a row
// lock, compares them as verify does (a time equal to either of its
// StoredForms is the same), and writes those that differ, their lines and
// their fencing tokens in one transaction. A repair is a change of the
// row: it records an update event, and starts a new life of the key
// (restore_count), so that its event's identity differs from the one the
// row had at its version before. A row at another version, soft-deleted,
// written under a newer lock or already equal is left alone: a row never
// goes back, and the next reconcile compares again.
func (s *Store) Repair(ctx context.Context, rows []Row) ([]bool, error) {
	done := make([]bool, len(rows))
	if len(rows) == 0 {
		return done, nil
	}
	what := "repair " + s.t.name
	err := s.inTx(ctx, what, func(tx *sql.Tx) ([]outbox.Event, error) {
		clear(done)
		keys := keysOf(rows)
		cur, err := s.t.readVersionsLocking(ctx, tx, keys, true)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		held := make(map[string]*Stored, len(rows))
		err = s.scanRows(ctx, tx, keys, func(st *Stored) error {
			c := *st
			c.Vals = slices.Clone(st.Vals)
			held[c.Key] = &c
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		lines, err := s.linesOf(ctx, tx, keys)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		var evs []outbox.Event
		for i, r := range rows {
			c, ok := cur[r.Key]
			st := held[r.Key]
			if !ok || st == nil || c.Deleted || c.Version != r.Version || c.Fence > r.Fence ||
				(sameTime(st.UpdatedAt, r.UpdatedAt) && sameValues(s.t.kinds, st.Vals, r.Vals) && s.t.sameLines(lines[r.Key], r.Children)) {
				continue
			}
			l := s.t.lit()
			err := s.t.repairRow(l, r)
			if err == nil {
				_, err = tx.ExecContext(ctx, l.text())
			}
			l.free()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			done[i] = true
			if s.t.events() {
				ev, err := s.t.event(r, outbox.OpUpdate)
				if err != nil {
					return nil, err
				}
				ev.Life = c.RestoreCount + 1
				evs = append(evs, ev)
			}
		}
		return evs, s.t.writeLines(ctx, tx, rows, done, done)
	})
	if err != nil {
		return nil, err
	}
	return done, nil
}

// repairRow writes the UPDATE of Repair: the row's columns, erp_updated_at
// and fencing token, and a new life, where the row is live at r's version
// with a token no newer than r's.
func (t *Table) repairRow(l *literal, r Row) error {
	if err := t.updateData(l, r); err != nil {
		return err
	}
	l.sql(", updated_at = ")
	l.now()
	l.sql(", restore_count = COALESCE(restore_count, 0) + 1, fence_token = ")
	l.int(r.Fence)
	t.liveKey(l, r.Key, r.Fence)
	l.sql(" AND erp_version = ")
	l.int(r.Version)
	return nil
}

// sameTime reports whether stored holds t, as verify compares: t whole to
// the microsecond (a datetime(P) keeps its P digits, and the decoder
// refuses more), or either of its StoredForms (a DATETIME(3)).
func sameTime(stored, t time.Time) bool {
	tr, ro := StoredForms(t)
	return stored.Equal(t.Truncate(time.Microsecond)) || stored.Equal(tr) || stored.Equal(ro)
}

// sameValues reports whether the values a row or line holds (stored) are
// vals, of kinds, as verify compares them.
func sameValues(kinds []entity.Kind, stored, vals []entity.Value) bool {
	if len(stored) != len(vals) {
		return false
	}
	for i, v := range vals {
		s := stored[i]
		switch {
		case s.Null || v.Null:
			if s.Null != v.Null {
				return false
			}
		case kinds[i] == entity.DateTime:
			if !sameTime(s.T, v.T) {
				return false
			}
		case s.S != v.S || s.I != v.I:
			return false
		}
	}
	return true
}

// sameLines reports whether a document's stored lines (one entity.Lines
// per child, by linesOf) are the lines of children, line for line by
// their key, in any order.
func (t *Table) sameLines(stored, children []entity.Lines) bool {
	for c, lt := range t.lines {
		var a, b entity.Lines
		if c < len(stored) {
			a = stored[c]
		}
		if c < len(children) {
			b = children[c]
		}
		if len(a) != len(b) {
			return false
		}
		a, b = lt.byKey(a), lt.byKey(b)
		for i := range a {
			if !sameValues(lt.kinds, a[i], b[i]) {
				return false
			}
		}
	}
	return true
}

// byKey returns a copy of lines sorted by their key's text.
func (lt *lineTable) byKey(lines entity.Lines) entity.Lines {
	out := slices.Clone(lines)
	slices.SortFunc(out, func(a, b []entity.Value) int { return strings.Compare(lt.keyText(a), lt.keyText(b)) })
	return out
}
