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
		n := min(s.cfg.ChunkSize, len(recs))
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
	return Applied{Counters: r.c.snapshot(), FailedIDs: r.failedIDs}
}

// SoftDelete marks the rows of ts deleted, each under its record lock and
// its guard (store.SoftDelete with the lock's fencing token): a row
// written since it was read, or whose lock another holder has, is kept
// live, as that writer wins; the next reconcile looks at it again. Locks
// are taken a chunk at a time.
func (s *Syncer) SoftDelete(ctx context.Context, ts []store.Tombstone, log zerolog.Logger) (Applied, error) {
	r := s.newRun(&Report{}, log)
	var out Applied
	for len(ts) > 0 {
		n := min(s.cfg.ChunkSize, len(ts))
		c := ts[:n]
		ts = ts[n:]
		keys := make([]string, len(c))
		for i, t := range c {
			keys[i] = s.lockKey(t.ErpID)
		}
		locks, err := r.obtainMany(ctx, keys)
		if err != nil {
			return out, err
		}
		var hs []held
		var mine []store.Tombstone
		for i, l := range locks {
			if l == nil {
				out.LockContended++
				out.Kept++
				continue
			}
			hs = append(hs, held{rec: erp.Record{ErpID: c[i].ErpID}, lock: l})
			t := c[i]
			t.Fence = l.Fence()
			mine = append(mine, t)
		}
		var done []bool
		err = r.writing(ctx, func() (err error) {
			done, err = s.store.SoftDelete(ctx, mine)
			return err
		})
		r.release(ctx, hs)
		if err != nil {
			return out, err
		}
		for i, d := range done {
			if d {
				out.Deleted++
				continue
			}
			out.Kept++
			log.Debug().Str("erp_id", mine[i].ErpID).Msg("soft delete skipped: the row was written since it was read")
		}
	}
	return out, nil
}
