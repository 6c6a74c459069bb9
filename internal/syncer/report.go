package syncer

import (
	"sync/atomic"
	"time"

	"github.com/erpsync/erpsync/internal/store"
)

// Report is the run report: the run history row plus what only the report
// carries.
type Report struct {
	store.Run
	// Entity is the entity the run wrote (Config.Entity).
	Entity string `json:"entity"`
	// Checkpoint is the job checkpoint after the run (run mode), if any.
	Checkpoint *time.Time `json:"checkpoint,omitempty"`
	// ResumedFrom is where a backfill resumed its window, if it did.
	ResumedFrom *time.Time `json:"resumed_from,omitempty"`
	// RecordLatency is how long records took from the fetch of their page
	// to the end of their write, in milliseconds.
	RecordLatency *Latency `json:"record_latency_ms,omitempty"`
	// FailedIDs lists (up to 1,000) erp_ids that failed after their retries.
	FailedIDs []string `json:"failed_ids,omitempty"`
}

// counters are the live, concurrently updated outcomes of a run.
type counters struct {
	fetched, inserted, updated, restored, unchanged, duplicates, contended,
	uniqueViolations, staleRejected, invalid, failed, quarantined atomic.Int64
}

func (c *counters) snapshot() store.Counters {
	return store.Counters{
		Fetched:          c.fetched.Load(),
		Inserted:         c.inserted.Load(),
		Updated:          c.updated.Load(),
		Restored:         c.restored.Load(),
		Unchanged:        c.unchanged.Load(),
		DuplicatesInFeed: c.duplicates.Load(),
		LockContended:    c.contended.Load(),
		UniqueViolations: c.uniqueViolations.Load(),
		StaleRejected:    c.staleRejected.Load(),
		Invalid:          c.invalid.Load(),
		Failed:           c.failed.Load(),
		Quarantined:      c.quarantined.Load(),
	}
}
