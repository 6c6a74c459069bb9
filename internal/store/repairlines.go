package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/erpsync/erpsync/internal/outbox"
)

// RepairLines makes the lines of the documents of rows exactly theirs
// (Row.Children) where the table holds the row live at the row's own
// version with a fencing token no newer than the row's, and reports which
// it repaired: reconcile's repair of a document whose header is current
// and whose lines differ from the source's (a line deleted or changed by
// hand, say). It reads the rows under a row lock, writes the lines and the
// rows' fencing tokens in one transaction, and records no change event:
// the version is the one consumers have already been told of. A row at
// another version, soft-deleted or written under a newer lock is left to
// the writes of runs.
func (s *Store) RepairLines(ctx context.Context, rows []Row) ([]bool, error) {
	done := make([]bool, len(rows))
	if len(rows) == 0 || len(s.t.lines) == 0 {
		return done, nil
	}
	what := "repair lines of " + s.t.name
	err := s.inTx(ctx, what, func(tx *sql.Tx) ([]outbox.Event, error) {
		cur, err := s.t.readVersionsLocking(ctx, tx, keysOf(rows), true)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		for i, r := range rows {
			c, ok := cur[r.Key]
			if !ok || c.Deleted || c.Version != r.Version || c.Fence > r.Fence {
				continue
			}
			l := newLiteral()
			l.sql("UPDATE " + quoteIdent(s.t.name) + " SET fence_token = ")
			l.int(r.Fence)
			s.t.liveKey(l, r.Key, r.Fence)
			_, err := tx.ExecContext(ctx, l.text())
			l.free()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			done[i] = true
		}
		return nil, s.t.writeLines(ctx, tx, rows, done, done)
	})
	if err != nil {
		return nil, err
	}
	return done, nil
}
