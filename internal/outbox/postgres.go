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
// records with one INSERT ... ON CONFLICT DO NOTHING (insertPostgres).
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

// insertPostgres records rs with one INSERT ... SELECT from unnest of
// an array per column, whose ON CONFLICT DO NOTHING drops an event
// recorded already, and one that rs carry twice: DO NOTHING, unlike DO
// UPDATE, takes a statement that proposes one key twice. The rows take
// their ids in rs's order (ORDER BY the arrays' ordinality). Each array
// goes as its text, written here (appendArrayText): pgx's encoding of a
// []string cost the client a third more CPU.
//
// A multi-row INSERT ... VALUES of the same rows costs the server about
// twice the CPU (BenchmarkRecordPostgres: 50 against 24-30 µs an event in
// batches of 500, 35 against 13-16 in batches of 2,000): it parses and
// plans eight expressions a row where this statement has eight arrays.
// A COPY into a temporary table and an INSERT ... SELECT from it cost the
// server a little less (15-19 and 12 µs), but COPY needs the connection
// itself, which a *sql.Tx does not give.
func insertPostgres(ctx context.Context, tx *sql.Tx, rs []row) error {
	var cols [8][]byte
	for c := range cols {
		cols[c] = append(make([]byte, 0, 16+len(rs)*arrayWidths[c]), '{')
	}
	for i, r := range rs {
		if i > 0 {
			for c := range cols {
				cols[c] = append(cols[c], ',')
			}
		}
		cols[0] = appendArrayText(cols[0], r.id)
		cols[1] = appendArrayText(cols[1], r.ev.Entity)
		cols[2] = appendArrayText(cols[2], r.key)
		cols[3] = appendArrayText(cols[3], r.ev.Op)
		cols[4] = strconv.AppendInt(cols[4], r.ev.Version, 10)
		cols[5] = appendArrayText(cols[5], r.ev.RunID)
		cols[6] = strconv.AppendInt(cols[6], r.ev.Life, 10)
		cols[7] = appendArrayText(cols[7], r.payload)
	}
	args := make([]any, len(cols))
	for c := range cols {
		args[c] = string(append(cols[c], '}'))
	}
	if _, err := tx.ExecContext(ctx, insertPostgresSQL, args...); err != nil {
		return fmt.Errorf("record events: %w", err)
	}
	return nil
}

// arrayWidths are the usual bytes an event takes in each column's array.
var arrayWidths = [8]int{39, 16, 48, 10, 12, 40, 2, 512}

// appendArrayText appends s as an element of an array's text: in double
// quotes, a double quote and a backslash escaped by a backslash, which
// reads back as s whatever it holds ("NULL", braces, commas, blanks).
func appendArrayText[T string | []byte](b []byte, s T) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b = append(append(b, s[start:i]...), '\\', c)
			start = i + 1
		}
	}
	return append(append(b, s[start:]...), '"')
}

const insertPostgresSQL = `INSERT INTO erpsync_events (event_id, entity, entity_key, op, version, run_id, life, payload, recorded_at)
SELECT e, n, k, o, v, r, l, p, CURRENT_TIMESTAMP(3)
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::bigint[], $8::text[]) WITH ORDINALITY AS u(e, n, k, o, v, r, l, p, i)
ORDER BY i
ON CONFLICT (entity, entity_key, version, op, life) DO NOTHING`
