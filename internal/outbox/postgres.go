package outbox

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// This file is the outbox on PostgreSQL: its table has the columns and
// indexes of MySQL's (id a bigint identity, entity and entity_key
// varchar COLLATE "C", body and payload text, recorded_at and
// delivered_at timestamptz(3)), and the statements here are MySQL's
// rendered in PostgreSQL's SQL. The store's PostgreSQL connections run
// pgx's simple protocol: a statement's arguments are written into its
// text by pgx, which refuses a session without standard_conforming_strings.

// NewPostgres returns the outbox of the PostgreSQL database db connects to
// (migrated to erpsync's schema).
func NewPostgres(db *sql.DB) *Outbox { return &Outbox{db: db, q: &postgresQueries} }

var postgresQueries = queries{
	now:     "SELECT CURRENT_TIMESTAMP(3)",
	pending: "SELECT " + StoredColumns + " FROM erpsync_events WHERE delivered_at IS NULL ORDER BY id LIMIT $1",
	raiseFence: `INSERT INTO erpsync_relay_fence AS f (name, fence_token, updated_at) VALUES ($1, $2, CURRENT_TIMESTAMP(3))
ON CONFLICT (name) DO UPDATE SET fence_token = EXCLUDED.fence_token, updated_at = EXCLUDED.updated_at
  WHERE EXCLUDED.fence_token >= f.fence_token`,
	readFence: "SELECT fence_token FROM erpsync_relay_fence WHERE name = $1",
	mark:      "UPDATE erpsync_events SET delivered_at = CURRENT_TIMESTAMP(3) WHERE delivered_at IS NULL AND id IN (",
	// PostgreSQL's DELETE has no ORDER BY and no LIMIT: the ids come from
	// the index on (delivered_at, id).
	prune: `DELETE FROM erpsync_events WHERE id IN (SELECT id FROM erpsync_events
  WHERE delivered_at IS NOT NULL AND delivered_at < $1 ORDER BY delivered_at LIMIT $2)`,
	stats: `SELECT entity, COUNT(*) FILTER (WHERE delivered_at IS NULL), COUNT(*) FILTER (WHERE delivered_at IS NOT NULL),
  MIN(recorded_at) FILTER (WHERE delivered_at IS NULL)
FROM erpsync_events GROUP BY entity ORDER BY entity`,
	placeholder: func(i int) string { return "$" + strconv.Itoa(i) },
}

// NewPostgresRecorder returns a Recorder of a PostgreSQL database: it
// records with one multi-row INSERT ... ON CONFLICT DO NOTHING.
func NewPostgresRecorder() *Recorder {
	r := NewInsertRecorder()
	r.postgres = true
	return r
}

// checkPostgres refuses what PostgreSQL's text columns cannot hold: a NUL
// character. A key and a payload written by this package's encoder hold
// none (a JSON string escapes it); an entity's name or a run id may.
func checkPostgres(rs []row) error {
	for _, r := range rs {
		switch {
		case strings.IndexByte(r.ev.Entity, 0) >= 0:
			return fmt.Errorf("record event: entity %q: a NUL character, which PostgreSQL's text does not hold", r.ev.Entity)
		case strings.IndexByte(r.ev.RunID, 0) >= 0:
			return fmt.Errorf("record event of %s: run id %q: a NUL character, which PostgreSQL's text does not hold", r.ev.Entity, r.ev.RunID)
		case strings.IndexByte(r.key, 0) >= 0:
			return fmt.Errorf("record event of %s: key %q: a NUL character, which PostgreSQL's text does not hold", r.ev.Entity, r.key)
		case bytes.IndexByte(r.payload, 0) >= 0:
			return fmt.Errorf("record event of %s %s: data: a NUL character, which PostgreSQL's text does not hold", r.ev.Entity, r.key)
		}
	}
	return nil
}

// insertPostgres records rs with one multi-row INSERT whose ON CONFLICT
// DO NOTHING drops an event recorded already, and one that rs carry
// twice: DO NOTHING, unlike DO UPDATE, takes a statement that proposes one
// key twice. The rows take their ids in rs's order.
func insertPostgres(ctx context.Context, tx *sql.Tx, rs []row) error {
	var q strings.Builder
	q.Grow(160 + 64*len(rs))
	q.WriteString("INSERT INTO erpsync_events (event_id, entity, entity_key, op, version, run_id, life, payload, recorded_at) VALUES ")
	args := make([]any, 0, 8*len(rs))
	for i, r := range rs {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteByte('(')
		for c := range 8 {
			q.WriteByte('$')
			q.WriteString(strconv.Itoa(8*i + c + 1))
			q.WriteByte(',')
		}
		q.WriteString("CURRENT_TIMESTAMP(3))")
		args = append(args, r.id, r.ev.Entity, r.key, r.ev.Op, r.ev.Version, r.ev.RunID, r.ev.Life, string(r.payload))
	}
	q.WriteString(" ON CONFLICT (entity, entity_key, version, op, life) DO NOTHING")
	if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
		return fmt.Errorf("record events: %w", err)
	}
	return nil
}
