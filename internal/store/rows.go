package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
)

// cell is the scan destination of one column of kind k, which value turns
// into the entity.Value the decoder would have made of the same data.
type cell struct {
	k entity.Kind
	s sql.NullString
	i sql.NullInt64
	b sql.NullBool // a Bool: MySQL's TINYINT(1) and PostgreSQL's boolean scan alike
	t sql.NullTime
}

func (c *cell) dest() any {
	switch c.k {
	case entity.Bool:
		return &c.b
	case entity.Int32, entity.Int64:
		return &c.i
	case entity.Date, entity.DateTime:
		return &c.t
	}
	return &c.s
}

func (c *cell) value() entity.Value {
	switch c.k {
	case entity.Bool:
		v := entity.Value{Null: !c.b.Valid}
		if c.b.Bool {
			v.I = 1
		}
		return v
	case entity.Int32, entity.Int64:
		return entity.Value{Null: !c.i.Valid, I: c.i.Int64}
	case entity.Date:
		if !c.t.Valid {
			return entity.Value{Null: true}
		}
		return entity.Value{S: c.t.Time.Format(time.DateOnly)}
	case entity.DateTime:
		return entity.Value{Null: !c.t.Valid, T: c.t.Time.UTC()}
	}
	return entity.Value{Null: !c.s.Valid, S: c.s.String}
}

// keyCells returns the scan cells of the key columns.
func (t *Table) keyCells() []cell {
	cs := make([]cell, len(t.keys))
	for i, k := range t.keys {
		cs[i].k = t.kinds[k]
	}
	return cs
}

// keyOf returns the key text of the key cells read.
func keyOf(cs []cell) string {
	if len(cs) == 1 {
		return cs[0].value().Text(cs[0].k)
	}
	parts := make([]string, len(cs))
	for i := range cs {
		parts[i] = cs[i].value().Text(cs[i].k)
	}
	return entity.KeyText(parts)
}

// Stored is a row of an entity's table as ScanRows reads it back.
type Stored struct {
	Row
	Written time.Time // the row's updated_at: when erpsync last wrote it, by the database's clock
	Deleted bool      // deleted_at is set
	Mark    int64     // quarantined_version, 0 when not marked
	MarkAt  time.Time // quarantined_updated_at, zero when NULL
	// RestoreCount is restore_count: how many times the row came back
	// after a soft delete.
	RestoreCount int64
}

// ScanRows calls fn with every row of the store's table (of its scope, see
// Scoped), in no order. The
// Stored passed is reused: fn copies what it keeps (its Vals too).
func (s *Store) ScanRows(ctx context.Context, fn func(*Stored) error) error {
	return s.scanRows(ctx, s.sql, nil, fn)
}

// ScanRowsOf is ScanRows of the rows with the given keys, read a thousand
// keys a statement.
func (s *Store) ScanRowsOf(ctx context.Context, keys []string, fn func(*Stored) error) error {
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		if err := s.scanRows(ctx, s.sql, keys[:n], fn); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// scanRows is ScanRows on db, of the rows with the given keys when keys
// is not nil (none when it is empty).
func (s *Store) scanRows(ctx context.Context, db querier, keys []string, fn func(*Stored) error) error {
	t := s.t
	if keys != nil && len(keys) == 0 {
		return nil
	}
	l := t.lit()
	l.sql("SELECT ")
	for _, c := range t.ent.Columns {
		l.sql(t.d.ident(c.Name) + ", ")
	}
	l.sql("erp_version, erp_updated_at, fence_token, updated_at, deleted_at IS NOT NULL, COALESCE(quarantined_version, 0), quarantined_updated_at, COALESCE(restore_count, 0) FROM " + t.d.ident(t.name))
	rows, err := s.queryWhere(ctx, db, l, keys, "")
	if err != nil {
		return fmt.Errorf("read %s: %w", t.name, err)
	}
	defer rows.Close()
	cs := make([]cell, len(t.kinds))
	dest := make([]any, 0, len(cs)+8)
	for i := range cs {
		cs[i].k = t.kinds[i]
		dest = append(dest, cs[i].dest())
	}
	var st Stored
	var markAt sql.NullTime
	st.Vals = make([]entity.Value, len(cs))
	dest = append(dest, &st.Version, &st.UpdatedAt, &st.Fence, &st.Written, &st.Deleted, &st.Mark, &markAt, &st.RestoreCount)
	keyParts := make([]string, len(t.keys))
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("read %s: %w", t.name, err)
		}
		st.MarkAt = markAt.Time
		for i := range cs {
			st.Vals[i] = cs[i].value()
		}
		for i, k := range t.keys {
			keyParts[i] = st.Vals[k].Text(t.kinds[k])
		}
		st.Key = entity.KeyText(keyParts)
		if err := fn(&st); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read %s: %w", t.name, err)
	}
	return nil
}

// queryWhere ends l, a SELECT of the store's table or of a child's table
// (which have the key columns), with the WHERE of the rows with the given
// parent keys (nil: of the store's scope, Scoped) and tail, and runs it
// on db. It frees l.
func (s *Store) queryWhere(ctx context.Context, db querier, l *literal, keys []string, tail string) (*sql.Rows, error) {
	switch {
	case keys != nil:
		l.sql(" WHERE ")
		s.t.keyMatch(l, keys)
	case s.scope != "":
		l.sql(" WHERE " + s.scope)
	}
	l.sql(tail)
	q := l.text()
	l.free()
	return db.QueryContext(ctx, q)
}
