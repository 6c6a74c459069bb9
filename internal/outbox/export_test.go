package outbox

import (
	"context"
	"database/sql"
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
