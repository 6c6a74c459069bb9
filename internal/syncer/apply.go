package syncer

import (
	"context"
	"sync"

	"github.com/rs/zerolog"
	"golang.org/x/sync/semaphore"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
)

// Applied is what Apply and SoftDelete did.
type Applied struct {
	// Counters are the write outcomes, as a run counts them; SoftDelete
	// fills Deleted and LockContended.
	store.Counters
	// Kept counts the rows SoftDelete left live: their lock was held by
	// another holder, or they were written since they were read.
	Kept int64
	// FailedIDs lists (up to 1,000) erp_ids whose write failed after
	// their retries.
	FailedIDs []string
	// Err is the database's refusal that stopped Apply's writes, one no
	// retry can heal (dberr.Denied); nil when none did.
	Err error
}

// Apply writes recs (at most one record per erp_id) through the write path
// of a run: record locks taken a chunk at a time, the version and fence
// guards, restores of soft-deleted rows, retries. It takes no job lock and
// moves no checkpoint: the caller holds what it needs.
func (s *Syncer) Apply(ctx context.Context, recs []erp.Record, log zerolog.Logger) Applied {
	r := s.newRun(&Report{}, log)
	sem := semaphore.NewWeighted(int64(s.cfg.Workers))
	var wg sync.WaitGroup
	for len(recs) > 0 {
		n := chunkLen(recs, s.cfg.ChunkSize)
		c := recs[:n:n]
		recs = recs[n:]
		if err := sem.Acquire(ctx, 1); err != nil {
			for _, rec := range c {
				r.recordFailed(rec.ErpID, err)
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sem.Release(1)
			r.processChunk(ctx, c)
		}()
	}
	wg.Wait()
	if err := r.flushMade(ctx); err != nil {
		for _, key := range r.made.take() {
			r.recordFailed(key, err)
		}
	}
	return Applied{Counters: r.c.snapshot(), FailedIDs: r.failedIDs, Err: r.haltErr()}
}

// SoftDelete marks the rows of ts deleted, each under its record lock and
// its guard (store.SoftDelete with the lock's fencing token): a row
// written since it was read, or whose lock another holder has, is kept
// live, as that writer wins; the next reconcile looks at it again. Locks
// are taken a chunk at a time.
func (s *Syncer) SoftDelete(ctx context.Context, ts []store.Tombstone, log zerolog.Logger) (Applied, error) {
	r := s.newRun(&Report{}, log)
	recs := make([]erp.Record, len(ts))
	for i, t := range ts {
		recs[i] = erp.Record{ErpID: t.ErpID}
	}
	var out Applied
	err := r.eachLocked(ctx, recs, func(idx []int, hs []held) ([]bool, error) {
		mine := make([]store.Tombstone, len(idx))
		for j, i := range idx {
			mine[j] = ts[i]
			mine[j].Fence = hs[j].lock.Fence()
		}
		return s.store.SoftDelete(ctx, mine)
	}, func(done bool, rec erp.Record, contended bool) {
		switch {
		case done:
			out.Deleted++
		case contended:
			out.LockContended++
			out.Kept++
		default:
			out.Kept++
			log.Debug().Str("erp_id", rec.ErpID).Msg("soft delete skipped: the row was written since it was read")
		}
	})
	return out, err
}

// Repair rewrites the rows that hold recs' versions and whose fields or
// lines differ from recs' (store.Repair, which records an update event of
// each), each under its record lock, a chunk of locks at a time, with the
// run id runID. A record whose lock another holder has, or whose row has
// moved on since it was compared, is left as it is: that writer wins, and
// the next reconcile compares again. Updated counts the rows repaired.
func (s *Syncer) Repair(ctx context.Context, recs []erp.Record, runID string, log zerolog.Logger) (Applied, error) {
	r := s.newRun(&Report{Run: store.Run{RunID: runID}}, log)
	var out Applied
	err := r.eachLocked(ctx, recs, func(_ []int, hs []held) ([]bool, error) {
		return s.store.Repair(ctx, r.rowsOf(hs))
	}, func(done bool, rec erp.Record, contended bool) {
		switch {
		case done:
			out.Updated++
		case contended:
			out.LockContended++
		default:
			out.Unchanged++
			log.Debug().Str("erp_id", rec.ErpID).Msg("not repaired: the row was written since it was compared")
		}
	})
	return out, err
}

// eachLocked takes the record locks of recs a chunk at a time and calls
// write with the indexes in recs of the records whose locks it holds and
// those held records, then releases them; outcome is told of every record:
// whether write did it, or whether another holder had its lock.
func (r *run) eachLocked(ctx context.Context, recs []erp.Record, write func(idx []int, hs []held) ([]bool, error), outcome func(done bool, rec erp.Record, contended bool)) error {
	for start := 0; start < len(recs); start += r.s.cfg.ChunkSize {
		c := recs[start:min(start+r.s.cfg.ChunkSize, len(recs))]
		keys := make([]string, len(c))
		for i, rec := range c {
			keys[i] = r.s.lockKey(rec.ErpID)
		}
		locks, err := r.obtainMany(ctx, keys)
		if err != nil {
			return err
		}
		var idx []int
		var hs []held
		for i, l := range locks {
			if l == nil {
				outcome(false, c[i], true)
				continue
			}
			idx = append(idx, start+i)
			hs = append(hs, held{rec: c[i], lock: l})
		}
		var done []bool
		if len(hs) > 0 {
			err = r.writing(ctx, func() (err error) {
				done, err = write(idx, hs)
				return err
			})
		}
		r.release(ctx, hs)
		if err != nil {
			return err
		}
		for i, d := range done {
			outcome(d, hs[i].rec, false)
		}
	}
	return nil
}
