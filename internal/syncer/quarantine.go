package syncer

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/lock"
)

// MarkQuarantined marks the live rows whose record's newest copy, among
// invs, is invalid and newer than what the row holds (store.Current.Marks),
// each under its record lock with its fencing token, as a run does with
// the invalid items of its pages. It returns how many rows it marked.
func (s *Syncer) MarkQuarantined(ctx context.Context, invs []erp.Invalid, log zerolog.Logger) (int64, error) {
	r := s.newRun(&Report{}, log)
	err := r.markInvalid(ctx, invs)
	return r.c.quarantined.Load(), err
}

// markInvalid marks the rows of invs that need it. A row is marked when the
// invalid copy is newer than the row's version and mark; a valid copy at
// that version or a newer one, no older than the invalid copy, clears the
// mark when it is written (the store's guarded statements), so the order
// in which copies arrive does not matter, but for a record without a row
// yet and a copy with neither a version nor an updated_at:
// markAfterWrites.
func (r *run) markInvalid(ctx context.Context, invs []erp.Invalid) error {
	newest := map[string]erp.Invalid{}
	for _, inv := range invs {
		if inv.ErpID != "" {
			keepNewest(newest, inv)
		}
	}
	if len(newest) == 0 {
		return nil
	}
	ids := make([]string, 0, len(newest))
	for id, inv := range newest {
		ids = append(ids, id)
		// Before the read: a chunk written after it finds the copy
		// (markAfterWrites), and one written before, the read its row.
		r.invalidCopies.add(inv)
	}
	slices.Sort(ids)
	cur, err := r.s.store.Versions(ctx, ids)
	if err != nil {
		return fmt.Errorf("mark quarantined rows: %w", err)
	}
	var todo []erp.Invalid
	for _, id := range ids {
		if c, ok := cur[id]; ok && c.Marks(newest[id].Version, newest[id].UpdatedAt) {
			todo = append(todo, newest[id])
		}
	}
	for len(todo) > 0 {
		n := min(r.s.cfg.ChunkSize, len(todo))
		if err := r.markChunk(ctx, todo[:n]); err != nil {
			return fmt.Errorf("mark quarantined rows: %w", err)
		}
		todo = todo[n:]
	}
	return nil
}

// keepNewest keeps inv in byID, without its raw text and reason (a mark
// needs neither), when it is the newest copy of its record there, and
// reports whether it did.
func keepNewest(byID map[string]erp.Invalid, inv erp.Invalid) bool {
	if old, ok := byID[inv.ErpID]; ok && !inv.NewerThan(old) {
		return false
	}
	inv.Raw, inv.Reason = nil, ""
	byID[inv.ErpID] = inv
	return true
}

// markAfterWrites marks, after the run wrote recs, the rows of those of
// them it was served an invalid copy of. The write may have made the
// record's first row, from a copy older than the invalid one, which no
// mark was set on; or cleared the mark of a copy with neither a version
// nor an updated_at (its mark holds the row's version at the time, and
// any higher version that lands clears it). Current.Marks then decides
// again, so the order in which the run met the copies does not matter.
func (r *run) markAfterWrites(ctx context.Context, recs []erp.Record) error {
	if invs := r.invalidCopies.of(recs); len(invs) > 0 {
		return r.markInvalid(ctx, invs)
	}
	return nil
}

// markChunk takes the record locks of invs (waiting for those another
// holder has, up to LockWait), marks the rows and releases the locks.
func (r *run) markChunk(ctx context.Context, invs []erp.Invalid) error {
	keys := make([]string, len(invs))
	for i, inv := range invs {
		keys[i] = r.s.lockKey(inv.ErpID)
	}
	locks, err := r.obtainMany(ctx, keys)
	if err != nil {
		return err
	}
	hs := make([]held, 0, len(invs))
	defer func() { r.release(ctx, hs) }()
	for i, l := range locks {
		if l == nil {
			wctx, cancel := context.WithTimeout(ctx, r.s.cfg.LockWait)
			l, err = r.s.locks.Obtain(wctx, keys[i], r.s.cfg.LockTTL,
				&lock.ObtainOptions{Retry: lock.ExponentialBackoff(backoff(2), backoff(8))})
			cancel()
			if errors.Is(err, lock.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("record lock of %q held elsewhere past the lock wait", invs[i].ErpID)
			}
			if err != nil {
				return err
			}
		}
		hs = append(hs, held{rec: erp.Record{ErpID: invs[i].ErpID}, lock: l})
	}
	ms := make([]store.Mark, len(invs))
	for i, inv := range invs {
		ms[i] = store.Mark{ErpID: inv.ErpID, Version: inv.Version, UpdatedAt: inv.UpdatedAt, Fence: hs[i].lock.Fence()}
	}
	var done []bool
	if err := r.writing(ctx, func() (err error) {
		done, err = r.s.store.MarkQuarantined(ctx, ms)
		return err
	}); err != nil {
		return err
	}
	for i, d := range done {
		if d {
			r.c.quarantined.Add(1)
			r.log.Warn().Str("erp_id", readableKey(r.invalid.keys, invs[i].ErpID)).Int64("version", invs[i].Version).
				Msg("row marked quarantined: the ERP's newest copy of its record is invalid; the row keeps its last valid data")
		}
	}
	return nil
}
