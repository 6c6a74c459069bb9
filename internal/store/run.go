package store

import (
	"context"
	"fmt"
	"time"
)

// Counters are the per-run record outcomes of the run report.
type Counters struct {
	Fetched          int64 `json:"fetched" gorm:"column:fetched"`
	Inserted         int64 `json:"inserted" gorm:"column:inserted"`
	Updated          int64 `json:"updated" gorm:"column:updated"`
	Unchanged        int64 `json:"unchanged" gorm:"column:unchanged"`
	DuplicatesInFeed int64 `json:"duplicates_in_feed" gorm:"column:duplicates_in_feed"`
	LockContended    int64 `json:"lock_contended" gorm:"column:lock_contended"`
	UniqueViolations int64 `json:"unique_violations" gorm:"column:unique_violations"`
	StaleRejected    int64 `json:"stale_rejected" gorm:"column:stale_rejected"`
	Invalid          int64 `json:"invalid" gorm:"column:invalid"`
	Failed           int64 `json:"failed" gorm:"column:failed"`
	// Restored counts soft-deleted rows a write made live again: their
	// record came back to the ERP, at the same version or a newer one.
	Restored int64 `json:"restored" gorm:"column:restored"`
	// Deleted counts rows a reconcile soft-deleted: their erp_id was gone
	// from the ERP.
	Deleted int64 `json:"deleted" gorm:"column:deleted"`
	// Repaired counts rows a reconcile wrote because verify's comparison
	// found them missing or stale (restores not included).
	Repaired int64 `json:"repaired" gorm:"column:repaired"`
	// Quarantined counts live rows a run or reconcile marked quarantined
	// (quarantined_at): the ERP's newest copy of their record is invalid.
	Quarantined int64 `json:"quarantined" gorm:"column:quarantined"`
	ERPRequests int64 `json:"erp_requests" gorm:"column:erp_requests"`
	ERPRetries  int64 `json:"erp_retries" gorm:"column:erp_retries"`
}

// Handled counts the records a run has finished with, whatever the outcome:
// written, found current, quarantined, failed, or dropped as a duplicate.
func (c Counters) Handled() int64 {
	return c.Inserted + c.Updated + c.Restored + c.Unchanged + c.Invalid + c.Failed + c.DuplicatesInFeed
}

// Run is one row of the run history, skipped runs included.
type Run struct {
	ID          uint64     `json:"-" gorm:"column:id;primaryKey"`
	RunID       string     `json:"run_id" gorm:"column:run_id"`
	Job         string     `json:"job" gorm:"column:job"`
	Mode        string     `json:"mode" gorm:"column:mode"`
	Status      string     `json:"status" gorm:"column:status"`
	Host        string     `json:"host" gorm:"column:host"`
	PID         int        `json:"pid" gorm:"column:pid"`
	WindowSince *time.Time `json:"window_since,omitempty" gorm:"column:window_since"`
	WindowUntil *time.Time `json:"window_until,omitempty" gorm:"column:window_until"`
	Shard       string     `json:"shard,omitempty" gorm:"column:shard"`
	Fence       int64      `json:"fence_token" gorm:"column:fence_token"`
	StartedAt   time.Time  `json:"started_at" gorm:"column:started_at"`
	FinishedAt  *time.Time `json:"finished_at" gorm:"column:finished_at"`
	Counters
	RecordsPerSecond float64 `json:"records_per_second" gorm:"column:records_per_second"`
	// Forced says a reconcile went past the deletion guard with --force:
	// its deletions do not count against the guard's window.
	Forced bool    `json:"-" gorm:"column:forced"`
	Error  *string `json:"error,omitempty" gorm:"column:error"`
}

// TableName tells gorm the table of Run.
func (Run) TableName() string { return "sync_runs" }

// Run statuses.
const (
	StatusRunning     = "running"
	StatusSucceeded   = "succeeded"
	StatusSkipped     = "skipped"
	StatusFailed      = "failed"
	StatusInterrupted = "interrupted"
)

// StartRun records a run as it begins (or a skipped run, finished at once).
func (s *Store) StartRun(ctx context.Context, r *Run) error {
	if err := s.db.WithContext(ctx).Create(r).Error; err != nil {
		return fmt.Errorf("record run %s: %w", r.RunID, err)
	}
	return nil
}

// FinishRun writes a run's final status and counters.
func (s *Store) FinishRun(ctx context.Context, r *Run) error {
	err := s.db.WithContext(ctx).Model(&Run{}).Where("run_id = ?", r.RunID).Select("*").Omit("id").Updates(r).Error
	if err != nil {
		return fmt.Errorf("finish run %s: %w", r.RunID, err)
	}
	return nil
}

// ReconcileDeletedSince sums the rows that job's runs of mode (reconciles)
// started at or after since deleted, forced ones not counted: what the
// deletion guard's rolling window has used up.
func (s *Store) ReconcileDeletedSince(ctx context.Context, job, mode string, since time.Time) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Raw("SELECT COALESCE(SUM(deleted), 0) FROM sync_runs WHERE job = ? AND mode = ? AND started_at >= ? AND NOT forced",
		job, mode, Millis(since)).Scan(&n).Error
	if err != nil {
		return 0, fmt.Errorf("read the deletions of the window: %w", err)
	}
	return n, nil
}

// Runs lists the run history newest first; job may be empty for all jobs.
func (s *Store) Runs(ctx context.Context, job string, limit int) ([]Run, error) {
	q := s.db.WithContext(ctx).Order("started_at DESC, id DESC").Limit(limit)
	if job != "" {
		q = q.Where("job = ?", job)
	}
	var out []Run
	if err := q.Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return out, nil
}
