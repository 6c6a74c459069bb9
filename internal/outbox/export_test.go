package outbox

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
)

// RecordWithInsert records evs as a Recorder does once the server has
// refused a load: with the INSERT.
func RecordWithInsert(ctx context.Context, tx *sql.Tx, evs []Event) error {
	rs, err := encodeRows(evs)
	if err != nil {
		return err
	}
	return insert(ctx, tx, rs)
}

// RecordPostgresValues records evs as NewPostgresRecorder's Record
// would with a multi-row INSERT ... VALUES ... ON CONFLICT DO NOTHING,
// its values as arguments: what BenchmarkRecordPostgres weighs against it.
func RecordPostgresValues(ctx context.Context, tx *sql.Tx, evs []Event) error {
	rs, err := encodeRows(evs)
	if err != nil {
		return err
	}
	var q strings.Builder
	q.WriteString("INSERT INTO erpsync_events (event_id, entity, entity_key, op, version, run_id, life, payload, recorded_at) VALUES ")
	args := make([]any, 0, 8*len(rs))
	for i, r := range rs {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteByte('(')
		for c := range 8 {
			q.WriteString("$" + strconv.Itoa(8*i+c+1) + ",")
		}
		q.WriteString("CURRENT_TIMESTAMP(3))")
		args = append(args, r.id, r.ev.Entity, r.key, r.ev.Op, r.ev.Version, r.ev.RunID, r.ev.Life, string(r.payload))
	}
	q.WriteString(" ON CONFLICT (entity, entity_key, version, op, life) DO NOTHING")
	_, err = tx.ExecContext(ctx, q.String(), args...)
	return err
}

// CopyRows are evs as the rows of a COPY into a table of the columns
// event_id, entity, entity_key, op, version, run_id, life, payload.
func CopyRows(evs []Event) ([][]any, error) {
	rs, err := encodeRows(evs)
	if err != nil {
		return nil, err
	}
	out := make([][]any, len(rs))
	for i, r := range rs {
		out[i] = []any{r.id, r.ev.Entity, r.key, r.ev.Op, r.ev.Version, r.ev.RunID, r.ev.Life, string(r.payload)}
	}
	return out, nil
}
