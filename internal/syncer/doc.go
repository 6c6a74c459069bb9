// Package syncer copies the ERP's membership feed into MySQL so that any
// number of runs, in any overlap, leave the database equal to the ERP's
// latest versions and lose no change.
//
// One fetcher pages the feed (keyset pagination) into a bounded queue of
// chunks; a worker pool bounded by a semaphore.Weighted takes them. For each
// chunk the worker takes one lock per erp_id (lock.ObtainMany, one round
// trip), reads the rows' versions, inserts the absent ones and updates the
// present ones in one guarded statement (higher version AND fencing token not
// older), reads back what landed, and releases the locks by token. A record
// whose lock is held elsewhere is never dropped: it waits for the lock,
// bounded, and is counted as lock_contended. A write refused for an older
// fencing token while its version is still the newest is retried under a
// fresh lock (stale_rejected). An insert caught by the UNIQUE index is
// re-applied as a guarded update (unique_violations).
//
// The job checkpoint is a low watermark: it moves past a page only when every
// record of that page and of all pages before it is committed, and its write
// carries the job lock's fencing token, so a run that paused past its lock
// cannot move the checkpoint of the run that replaced it. Each run re-reads
// an overlap before the checkpoint, because many records share one
// updated_at across a page boundary.
package syncer
