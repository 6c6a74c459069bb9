package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Checkpoint is where an incremental job resumes: the ERP updated_at below
// which every record is committed.
type Checkpoint struct {
	Name     string
	Position time.Time
	Fence    int64
	RunID    string
	Updated  time.Time
}

// Checkpoint reads the named checkpoint; ok is false when there is none.
func (s *Store) Checkpoint(ctx context.Context, name string) (cp Checkpoint, ok bool, err error) {
	row := s.db.WithContext(ctx).Raw("SELECT name, position, fence_token, run_id, updated_at FROM sync_checkpoints WHERE name = ?", name).Row()
	err = row.Scan(&cp.Name, &cp.Position, &cp.Fence, &cp.RunID, &cp.Updated)
	if errors.Is(err, sql.ErrNoRows) {
		return Checkpoint{}, false, nil
	}
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("read checkpoint %s: %w", name, err)
	}
	return cp, true, nil
}

// SaveCheckpoint moves the named checkpoint to pos, provided fence is not
// older than the fencing token of its last writer; otherwise it returns
// ErrFenced and changes nothing. The statement is the equivalent of
// `UPDATE ... WHERE fence_token <= ?` that also creates the row.
func (s *Store) SaveCheckpoint(ctx context.Context, name string, pos time.Time, fence int64, runID string) error {
	query := saveCheckpointMySQL
	if s.d == Postgres {
		query = saveCheckpointPostgres
	}
	res := s.db.WithContext(ctx).Exec(query, name, Millis(pos), fence, runID)
	if res.Error != nil {
		return fmt.Errorf("save checkpoint %s: %w", name, res.Error)
	}
	switch {
	case s.d == MySQL && res.RowsAffected == 2:
		return nil // updated
	case s.d == Postgres && res.RowsAffected == 1:
		return nil // inserted, or updated: the WHERE let it through
	}
	// MySQL: 1 is an insert, or with clientFoundRows=true in the DSN a row
	// found and left as it was; 0 a row left as it was. Left as it was
	// means refused, or the same values written again: the stored fence
	// tells. PostgreSQL: 0 is refused by the WHERE.
	cp, found, err := s.Checkpoint(ctx, name)
	if err != nil {
		return err
	}
	if found && cp.Fence > fence {
		return fmt.Errorf("save checkpoint %s: %w (ours %d, stored %d)", name, ErrFenced, fence, cp.Fence)
	}
	return nil
}

// The fenced checkpoint write of each dialect: the position, run and time
// move only when the writer's fencing token is not older than the stored
// one.
const (
	saveCheckpointMySQL = `INSERT INTO sync_checkpoints (name, position, fence_token, run_id, updated_at)
 VALUES (?, ?, ?, ?, UTC_TIMESTAMP(3))
 ON DUPLICATE KEY UPDATE
  position = IF(` + fenceOK + `, VALUES(position), position),
  run_id = IF(` + fenceOK + `, VALUES(run_id), run_id),
  updated_at = IF(` + fenceOK + `, VALUES(updated_at), updated_at),
  fence_token = IF(` + fenceOK + `, VALUES(fence_token), fence_token)`
	fenceOK = "VALUES(fence_token) >= fence_token"

	saveCheckpointPostgres = `INSERT INTO sync_checkpoints (name, position, fence_token, run_id, updated_at)
 VALUES (?, ?, ?, ?, CURRENT_TIMESTAMP(3))
 ON CONFLICT (name) DO UPDATE SET
  position = EXCLUDED.position, run_id = EXCLUDED.run_id, updated_at = EXCLUDED.updated_at, fence_token = EXCLUDED.fence_token
 WHERE EXCLUDED.fence_token >= sync_checkpoints.fence_token`
)

// ResetCheckpoint moves the named checkpoint back to the start of time (a
// finished backfill's: a new backfill of the window starts from scratch),
// provided fence is not older than its last writer's. An UPDATE, not a
// DELETE: the commands that sync need no DELETE grant.
func (s *Store) ResetCheckpoint(ctx context.Context, name string, fence int64, runID string) error {
	err := s.db.WithContext(ctx).Exec(`UPDATE sync_checkpoints SET position = ?, run_id = ?, updated_at = `+s.d.now()+`
 WHERE name = ? AND fence_token <= ?`, CheckpointStart, runID, name, fence).Error
	if err != nil {
		return fmt.Errorf("reset checkpoint %s: %w", name, err)
	}
	return nil
}

// CheckpointStart is the position of a reset checkpoint: the first instant
// a DATETIME holds.
var CheckpointStart = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)

// AdvanceCheckpoint moves the named checkpoint forward to pos, never back.
// It serves checkpoints that several writers may share, such as identical
// backfills: each writer's low watermark is true, so the highest one is.
func (s *Store) AdvanceCheckpoint(ctx context.Context, name string, pos time.Time, runID string) error {
	query := `INSERT INTO sync_checkpoints (name, position, fence_token, run_id, updated_at)
 VALUES (?, ?, 0, ?, UTC_TIMESTAMP(3))
 ON DUPLICATE KEY UPDATE
  run_id = IF(VALUES(position) > position, VALUES(run_id), run_id),
  updated_at = IF(VALUES(position) > position, VALUES(updated_at), updated_at),
  position = GREATEST(position, VALUES(position))`
	if s.d == Postgres {
		query = `INSERT INTO sync_checkpoints (name, position, fence_token, run_id, updated_at)
 VALUES (?, ?, 0, ?, CURRENT_TIMESTAMP(3))
 ON CONFLICT (name) DO UPDATE SET
  run_id = EXCLUDED.run_id, updated_at = EXCLUDED.updated_at, position = EXCLUDED.position
 WHERE EXCLUDED.position > sync_checkpoints.position`
	}
	err := s.db.WithContext(ctx).Exec(query, name, Millis(pos), runID).Error
	if err != nil {
		return fmt.Errorf("advance checkpoint %s: %w", name, err)
	}
	return nil
}
