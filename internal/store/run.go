package store

import (
	"context"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"
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
	// HeartbeatAt is when the run's process last said it was alive (the
	// database's clock; see Beat): its start, then every few seconds
	// while it runs. NULL on rows of runs started before migration 013,
	// and in a run's own report.
	HeartbeatAt *time.Time `json:"heartbeat_at,omitempty" gorm:"column:heartbeat_at"`
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
	// StatusLost is not stored: it is how `erpsync runs` shows a running
	// row whose process has not beaten for a while (Run.Lost).
	StatusLost = "lost"
)

// StartRun records a run as it begins (or a skipped run, finished at once).
// A running one is recorded with its first heartbeat at its start.
func (s *Store) StartRun(ctx context.Context, r *Run) error {
	row := *r
	if row.Status == StatusRunning {
		row.HeartbeatAt = &row.StartedAt
	}
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("record run %s: %w", r.RunID, err)
	}
	r.ID = row.ID
	return nil
}

// FinishRun writes a run's final status and counters. The row keeps its
// last heartbeat.
func (s *Store) FinishRun(ctx context.Context, r *Run) error {
	err := s.db.WithContext(ctx).Model(&Run{}).Where("run_id = ?", r.RunID).Select("*").Omit("id", "heartbeat_at").Updates(r).Error
	if err != nil {
		return fmt.Errorf("finish run %s: %w", r.RunID, err)
	}
	return nil
}

// HeartbeatEvery is how often a run's process beats (Beat) by default.
const HeartbeatEvery = 10 * time.Second

// Heartbeat writes the run's heartbeat_at (the database's clock) and,
// when c is not nil, its counters so far, while its row still says
// running; it reports whether it did.
func (s *Store) Heartbeat(ctx context.Context, runID string, c *Counters) (bool, error) {
	cols := map[string]any{"heartbeat_at": gorm.Expr(s.d.now())}
	if c != nil {
		for k, v := range map[string]int64{"fetched": c.Fetched, "inserted": c.Inserted, "updated": c.Updated,
			"unchanged": c.Unchanged, "duplicates_in_feed": c.DuplicatesInFeed, "lock_contended": c.LockContended,
			"unique_violations": c.UniqueViolations, "stale_rejected": c.StaleRejected, "invalid": c.Invalid,
			"failed": c.Failed, "restored": c.Restored, "deleted": c.Deleted, "repaired": c.Repaired,
			"quarantined": c.Quarantined} {
			cols[k] = v
		}
	}
	res := s.db.WithContext(ctx).Model(&Run{}).Where("run_id = ? AND status = ?", runID, StatusRunning).Updates(cols)
	if res.Error != nil {
		return false, fmt.Errorf("heartbeat of run %s: %w", runID, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// Beat writes the run's heartbeat, with the counters of snapshot unless
// it is nil, every every, from a goroutine, until stop is called; stop
// returns once the goroutine has ended, so that no heartbeat follows the
// run's finish. A heartbeat that fails goes to failed (nil: dropped) and
// the beats go on: a database that is briefly away costs the run a beat,
// not its work.
func (s *Store) Beat(ctx context.Context, runID string, every time.Duration, snapshot func() Counters, failed func(error)) (stop func()) {
	if every <= 0 {
		every = HeartbeatEvery
	}
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(every, 5*time.Second))
				var c *Counters
				if snapshot != nil {
					now := snapshot()
					c = &now
				}
				_, err := s.Heartbeat(bctx, runID, c)
				cancel()
				if err != nil && failed != nil {
					failed(err)
				}
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		<-ended
	}
}

// Lost says whether r is a running row whose process has not beaten for
// longer than after, by the database clock now: killed (kill -9, out of
// memory, its node gone) or paused. A paused process that wakes finishes
// its row with its real status. Rows without a heartbeat (runs started
// before migration 013) are never lost.
func (r Run) Lost(now time.Time, after time.Duration) bool {
	return r.Status == StatusRunning && r.HeartbeatAt != nil && now.Sub(*r.HeartbeatAt) > after
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
