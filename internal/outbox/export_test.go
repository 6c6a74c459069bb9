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
	q, args := valuesInsert(rs, "CURRENT_TIMESTAMP(3)", " ON CONFLICT (entity, entity_key, version, op, life) DO NOTHING")
	var numbered strings.Builder
	n := 0
	for part := range strings.SplitSeq(q, "?") {
		if n > 0 {
			numbered.WriteString("$" + strconv.Itoa(n))
		}
		numbered.WriteString(part)
		n++
	}
	_, err = tx.ExecContext(ctx, numbered.String(), args...)
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
