package syncer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/erpsync/erpsync/internal/ctxtime"
	"github.com/erpsync/erpsync/internal/dberr"
	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/lock"
)

// held is a record with the lock it is written under.
type held struct {
	rec  erp.Record
	lock *lock.Lock
}

// processChunk writes one chunk and reports whether any record of it failed
// after its retries.
func (r *run) processChunk(ctx context.Context, recs []erp.Record) bool {
	// Records whose lock another instance holds are retried as a batch,
	// with a growing pause, until LockWait: most are found current by then
	// (the holder wrote them) and cost one read. Whatever is still held,
	// refused for an older token, or caught in an error goes one by one.
	if r.haltErr() != nil {
		r.unwritten(recs)
		return true
	}
	var slow []erp.Record
	var made []string // the records whose rows the chunk inserted or restored
	deadline := time.Now().Add(r.s.cfg.LockWait)
	pending := recs
	for round := 0; len(pending) > 0; round++ {
		if round > 0 {
			if r.haltErr() != nil || time.Now().After(deadline) || ctxtime.Sleep(ctx, backoff(round+1)) != nil {
				slow = append(slow, pending...)
				break
			}
		}
		// The first round of a chunk skips the read before the locks when
		// recent chunks found almost nothing current (a first load): the
		// read under the locks decides alone, and a round trip is saved.
		preRead := round > 0 || r.preRead.Load()
		if preRead {
			if f := r.s.hooks.preRead; f != nil {
				f()
			}
			n := len(pending)
			pending = r.skipCurrent(ctx, pending)
			if round == 0 {
				r.learnCurrent(n-len(pending), n)
			}
		}
		if len(pending) == 0 {
			break
		}
		keys := make([]string, len(pending))
		for i, rec := range pending {
			keys[i] = r.s.lockKey(rec.ErpID)
		}
		locks, err := r.obtainMany(ctx, keys)
		if err != nil {
			r.log.Warn().Err(err).Int("records", len(pending)).Msg("lock chunk failed; records go one by one")
			slow = append(slow, pending...)
			break
		}
		hs := make([]held, 0, len(pending))
		var contended []erp.Record
		for i, l := range locks {
			if l == nil {
				if round == 0 {
					r.c.contended.Add(1)
				}
				contended = append(contended, pending[i])
				continue
			}
			hs = append(hs, held{rec: pending[i], lock: l})
		}
		again, current, werr := r.write(ctx, hs, round == 0 && r.insertFirst(), &made)
		r.release(ctx, hs)
		if round == 0 && !preRead && werr == nil {
			r.learnCurrent(current, len(hs))
		}
		if werr != nil {
			if dberr.Denied(werr) {
				r.halt(werr) // the loop below counts them unwritten
			} else {
				r.log.Warn().Err(werr).Int("records", len(hs)).Msg("write chunk failed; records go one by one")
			}
			for _, h := range hs {
				slow = append(slow, h.rec)
			}
		} else {
			slow = append(slow, again...)
		}
		pending = contended
	}
	failed := false
	for i, rec := range slow {
		if r.haltErr() != nil {
			r.unwritten(slow[i:])
			failed = true
			break
		}
		if err := r.processOne(ctx, rec, &made); err != nil {
			r.recordFailed(rec.ErpID, err)
			failed = true
		}
	}
	if err := r.markAfterWrites(ctx, recs, made); err != nil {
		r.log.Error().Err(err).Msg("checkpoint held back")
		r.c.failed.Add(1)
		failed = true
	}
	return failed
}

// learnCurrent tells the run that current of n records of a chunk's first
// round were already at their version: while fewer than 1 in 20 are, the
// next chunks skip the read before the locks.
func (r *run) learnCurrent(current, n int) {
	if n > 0 {
		r.preRead.Store(current*20 >= n)
	}
}

// learnPresent tells the run how many rows the read under the locks of a
// chunk found. Once enough reads in a row found none (a first load, or a
// feed of new records), the next chunks insert first, and read only when
// the UNIQUE index refuses the insert; a read that finds a row turns that
// off again.
func (r *run) learnPresent(found int) {
	if found > 0 {
		r.cleanReads.Store(0)
		return
	}
	r.cleanReads.Add(1)
}

// insertFirst reports whether a chunk's first round inserts before it
// reads: whether enough reads in a row found no row.
func (r *run) insertFirst() bool { return r.cleanReads.Load() >= r.cleanNeeded.Load() }

// insertRefused tells the run that the UNIQUE index refused an
// insert-first, which cost the server the rows it inserted before the
// refusal and their rollback. Each refusal doubles the clean reads the next
// try waits for, up to 64, so that a feed whose chunks now and then hold a
// row that exists (new records with a few changed ones) soon stops trying.
func (r *run) insertRefused() {
	if f := r.s.hooks.refused; f != nil {
		f()
	}
	r.cleanNeeded.Store(min(2*r.cleanNeeded.Load(), 64))
	r.cleanReads.Store(0)
}

// skipCurrent drops, as unchanged, the records whose row already holds their
// version or a newer one: no write would happen, so no lock is needed. This
// makes a re-run a read, and spares overlapping instances most of their lock
// contention. The records left are read again under their locks.
func (r *run) skipCurrent(ctx context.Context, recs []erp.Record) []erp.Record {
	ids := make([]string, len(recs))
	for i, rec := range recs {
		ids[i] = rec.ErpID
	}
	cur, err := r.s.store.Versions(ctx, ids)
	if err != nil {
		return recs // decide under the locks
	}
	out := recs[:0:0]
	for _, rec := range recs {
		if c, ok := cur[rec.ErpID]; ok && upToDate(c, rec) {
			r.c.unchanged.Add(1)
			continue
		}
		out = append(out, rec)
	}
	return out
}

// upToDate reports whether a row needs no write of rec: a live row at
// rec's version or a higher one, or a soft-deleted row rec does not restore
// (a stale copy: a lower version and no later updated_at). A soft-deleted
// row at rec's version is restored (the record is back), and so is one at a
// higher version when rec is later (the record was created again, its
// change counter starting over); a live row never goes back.
func upToDate(c store.Current, rec erp.Record) bool {
	return !c.Accepts(rec.Version, rec.UpdatedAt)
}

// obtainMany tries each key's lock once: in one round trip when the locker
// batches, else one by one. A nil entry is a key held elsewhere.
func (r *run) obtainMany(ctx context.Context, keys []string) ([]*lock.Lock, error) {
	if b, ok := r.s.locks.(batchLocker); ok {
		return b.ObtainMany(ctx, keys, r.s.cfg.LockTTL)
	}
	out := make([]*lock.Lock, len(keys))
	for i, k := range keys {
		l, err := r.s.locks.Obtain(ctx, k, r.s.cfg.LockTTL, nil)
		switch {
		case errors.Is(err, lock.ErrNotObtained):
		case err != nil:
			r.release(ctx, heldOf(out[:i]))
			return nil, err
		default:
			out[i] = l
		}
	}
	return out, nil
}

func heldOf(ls []*lock.Lock) []held {
	var hs []held
	for _, l := range ls {
		if l != nil {
			hs = append(hs, held{lock: l})
		}
	}
	return hs
}

func (r *run) release(ctx context.Context, hs []held) {
	if len(hs) == 0 {
		return
	}
	ls := make([]*lock.Lock, len(hs))
	for i, h := range hs {
		ls[i] = h.lock
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	var notHeld int
	var err error
	if b, ok := r.s.locks.(batchLocker); ok {
		notHeld, err = b.ReleaseMany(rctx, ls)
	} else {
		for _, l := range ls {
			switch rerr := l.Release(rctx); {
			case errors.Is(rerr, lock.ErrNotHeld):
				notHeld++
			case rerr != nil:
				err = rerr
			}
		}
	}
	if err != nil {
		r.log.Warn().Err(err).Msg("release record locks (they expire by their TTL)")
	} else if notHeld > 0 {
		r.log.Warn().Int("locks", notHeld).Msg("record locks had expired before release; fencing kept the writes safe")
	}
}

// madeOf adds to made the keys of hs, whose rows a write inserted or
// restored.
func madeOf(made *[]string, hs []held) {
	for _, h := range hs {
		*made = append(*made, h.rec.ErpID)
	}
}

// processOne writes one record under its own lock, waiting for the lock
// when another holder has it and retrying refused or failed writes under a
// fresh lock, up to MaxAttempts.
func (r *run) processOne(ctx context.Context, rec erp.Record, made *[]string) error {
	cfg := r.s.cfg
	var last error
	for attempt := 1; attempt <= cfg.MaxAttempts; attempt++ {
		if attempt > 1 {
			if err := ctxtime.Sleep(ctx, backoff(attempt)); err != nil {
				return fmt.Errorf("%w (last: %v)", err, last)
			}
		}
		wctx, cancel := context.WithTimeout(ctx, cfg.LockWait)
		l, err := r.s.locks.Obtain(wctx, r.s.lockKey(rec.ErpID), cfg.LockTTL,
			&lock.ObtainOptions{Retry: lock.ExponentialBackoff(2*time.Millisecond, 250*time.Millisecond)})
		cancel()
		if err != nil {
			last = fmt.Errorf("take record lock: %w", err)
			if ctx.Err() != nil {
				return last
			}
			continue
		}
		again, _, err := r.write(ctx, []held{{rec: rec, lock: l}}, false, made)
		r.release(ctx, []held{{rec: rec, lock: l}})
		if err != nil && dberr.Denied(err) {
			return r.halt(err)
		}
		if err != nil {
			last = err
			continue
		}
		if len(again) == 0 {
			return nil
		}
		last = errors.New("write refused for an older fencing token")
	}
	return fmt.Errorf("after %d attempts: %w", cfg.MaxAttempts, last)
}

func backoff(attempt int) time.Duration {
	d := 10 * time.Millisecond << min(attempt-2, 7)
	return d/2 + rand.N(d/2+1)
}

// writing runs one write statement once a slot of DBWriters is free.
func (r *run) writing(ctx context.Context, stmt func() error) error {
	if err := r.writers.Acquire(ctx, 1); err != nil {
		return err
	}
	defer r.writers.Release(1)
	return stmt()
}

// keyTaken checks a record whose insert the UNIQUE index refused: when the
// row it found holds another key (KeyTaken: a collation that cannot tell
// the two apart), rec is quarantined with a reason, never written over
// the other's row, and keyTaken reports true.
func (r *run) keyTaken(ctx context.Context, rec erp.Record) (bool, error) {
	other, taken, err := r.s.store.KeyTaken(ctx, rec.ErpID)
	if err != nil || !taken {
		return false, err
	}
	reason := fmt.Sprintf("key %q: the table's key index holds it equal to the key %q of another row (its collation does not compare byte for byte); not merged into that row: run erpsync migrate, which makes key columns compare byte for byte", rec.ErpID, other)
	raw, jerr := json.Marshal(rec)
	if jerr != nil {
		raw, _ = json.Marshal(fmt.Sprintf("%+v", rec))
	}
	if err := r.s.store.Quarantine(ctx, r.s.cfg.Job, r.rep.RunID, []store.Quarantined{{ErpID: rec.ErpID, Reason: reason, Payload: raw}}); err != nil {
		return false, err
	}
	r.c.invalid.Add(1)
	r.log.Warn().Str("erp_id", rec.ErpID).Str("other", other).Msg("record quarantined: the table's key index cannot tell its key from another's")
	return true, nil
}

// rowsOf returns the rows to write of hs, under their locks' fencing
// tokens: a typed record's values as decoded, a membership's from its
// fields (from one slab).
func (r *run) rowsOf(hs []held) []store.Row {
	rows := make([]store.Row, len(hs))
	var slab []entity.Value
	for i, h := range hs {
		rec := h.rec
		if rec.Vals != nil {
			rows[i] = store.Row{Key: rec.ErpID, Vals: rec.Vals, Version: rec.Version, UpdatedAt: rec.UpdatedAt, Fence: h.lock.Fence(), RunID: r.rep.RunID, Children: rec.Children}
			continue
		}
		if slab == nil {
			slab = make([]entity.Value, store.MembershipColumns*len(hs))
		}
		n := store.MembershipColumns
		rows[i] = store.MembershipRow(store.Membership{
			ErpID: rec.ErpID, MemberID: rec.MemberID, ProductCode: rec.ProductCode, Status: rec.Status,
			StartsAt: rec.StartsAt, EndsAt: rec.EndsAt, Version: rec.Version, UpdatedAt: rec.UpdatedAt,
			Fence: h.lock.Fence(),
		}, slab[n*i:n*(i+1):n*(i+1)])
		rows[i].RunID = r.rep.RunID
	}
	return rows
}

// write applies the version rule to records whose locks are held: insert
// the absent, update the older in one guarded statement, count the rest as
// unchanged, and add to made the keys of the rows it inserted or
// restored (markAfterWrites). It returns the records whose write the fence
// refused while their version is still the newest: they need a fresh lock.
// An error means nothing can be said of the chunk; every record must be
// retried.
//
// With insertFirst, the records are first inserted in one statement without
// a read: when none of their rows exists, which is what a first load finds,
// that is all. When the UNIQUE index refuses it, nothing was written, and
// the records take the read path. Either way every insert happens under the
// record's lock. An insert refused after the read found its row absent
// counts as a unique violation, and so does a refused insert-first whose
// row the read then finds written under a later grant of the record's lock
// than ours (our lease ran out); a row written under an earlier grant was
// there before ours, which is no race.
//
// current counts the records found at their version or a newer one.
func (r *run) write(ctx context.Context, hs []held, insertFirst bool, made *[]string) (again []erp.Record, current int, err error) {
	if len(hs) == 0 {
		return nil, 0, nil
	}
	ids := make([]string, len(hs))
	for i, h := range hs {
		ids[i] = h.rec.ErpID
	}
	if f := r.s.hooks.failWrite; f != nil {
		for _, id := range ids {
			if err := f(id); err != nil {
				return nil, 0, err
			}
		}
	}
	refused := false // the insert-first statement hit the UNIQUE index
	if insertFirst && r.s.hooks.beforeInsert == nil {
		ms := r.rowsOf(hs)
		err := r.writing(ctx, func() error { return r.s.store.InsertRows(ctx, ms) })
		switch {
		case err == nil:
			r.c.inserted.Add(int64(len(ms)))
			madeOf(made, hs)
			return nil, 0, nil
		case !errors.Is(err, store.ErrDuplicate):
			return nil, 0, err
		}
		refused = true
		r.insertRefused()
	}
	if f := r.s.hooks.readLocked; f != nil {
		f()
	}
	cur, err := r.s.store.Versions(ctx, ids)
	if err != nil {
		return nil, 0, err
	}
	if len(hs) > 1 {
		r.learnPresent(len(cur))
	}
	var ins, upd, rst []held // rst: soft-deleted rows that their copy restores
	unchanged := 0
	for _, h := range hs {
		c, ok := cur[h.rec.ErpID]
		if refused && ok && c.Fence > h.lock.Fence() {
			// The row was written under a later grant of the record's lock
			// than ours: our lease ran out (a pause) and the insert raced
			// the next holder's.
			r.c.uniqueViolations.Add(1)
		}
		switch {
		case !ok:
			ins = append(ins, h)
		case upToDate(c, h.rec):
			unchanged++
		case c.Deleted:
			rst = append(rst, h)
		default:
			upd = append(upd, h)
		}
	}
	if len(ins) > 0 {
		ms := r.rowsOf(ins)
		if f := r.s.hooks.beforeInsert; f != nil {
			f(ctx, ms)
		}
		err := r.writing(ctx, func() error { return r.s.store.InsertRows(ctx, ms) })
		switch {
		case errors.Is(err, store.ErrDuplicate):
			// A row appeared outside our locks (a lock bypassed or lost):
			// the UNIQUE index caught it. Insert one by one; the ones that
			// collide go through the guarded update.
			for i, h := range ins {
				err := r.writing(ctx, func() error { return r.s.store.InsertRows(ctx, ms[i:i+1]) })
				if errors.Is(err, store.ErrDuplicate) {
					var taken bool
					if taken, err = r.keyTaken(ctx, h.rec); taken {
						continue
					}
					if err == nil {
						err = store.ErrDuplicate
					}
				}
				switch {
				case errors.Is(err, store.ErrDuplicate):
					r.c.uniqueViolations.Add(1)
					upd = append(upd, h)
				case err != nil:
					return nil, 0, err
				default:
					r.c.inserted.Add(1)
					madeOf(made, ins[i:i+1])
				}
			}
		case err != nil:
			return nil, 0, err
		default:
			r.c.inserted.Add(int64(len(ins)))
			madeOf(made, ins)
		}
	}
	r.c.unchanged.Add(int64(unchanged))
	current = unchanged
	if len(upd)+len(rst) == 0 {
		return nil, current, nil
	}
	if len(rst) > 0 {
		// Restores are rare: one guarded UPDATE each, in one transaction,
		// whose WHERE reads the row once (a restore may go to a lower
		// version).
		ms := r.rowsOf(rst)
		if err := r.writing(ctx, func() (err error) {
			_, err = r.s.store.RestoreRows(ctx, ms)
			return err
		}); err != nil {
			return nil, 0, err
		}
		madeOf(made, rst)
	}
	switch {
	case len(upd) == 1 && len(rst) == 0:
		var ok bool
		err := r.writing(ctx, func() (err error) {
			ok, err = r.s.store.UpdateRow(ctx, r.rowsOf(upd)[0])
			return err
		})
		if err != nil {
			return nil, 0, err
		}
		if ok {
			r.c.updated.Add(1)
			return nil, current, nil
		}
	case len(upd) > 0:
		ms := r.rowsOf(upd)
		if err := r.writing(ctx, func() error { return r.s.store.UpsertRows(ctx, ms) }); err != nil {
			return nil, 0, err
		}
	}
	// Read back what landed: ours, a newer version of someone else's, or a
	// refusal by the fence while our version is still the newest.
	ids = ids[:0]
	for _, h := range upd {
		ids = append(ids, h.rec.ErpID)
	}
	for _, h := range rst {
		ids = append(ids, h.rec.ErpID)
	}
	after, err := r.s.store.Versions(ctx, ids)
	if err != nil {
		return nil, 0, err
	}
	for i, h := range append(upd, rst...) {
		c := after[h.rec.ErpID]
		switch {
		case c.Version == h.rec.Version && c.Fence == h.lock.Fence() && !c.Deleted:
			if i < len(upd) {
				r.c.updated.Add(1)
			} else {
				r.c.restored.Add(1)
			}
		case upToDate(c, h.rec):
			r.c.unchanged.Add(1)
			current++
		default:
			r.c.staleRejected.Add(1)
			r.log.Debug().Str("erp_id", h.rec.ErpID).Int64("fence_token", h.lock.Fence()).Int64("row_fence_token", c.Fence).
				Msg("write refused for an older fencing token; retrying under a fresh lock")
			again = append(again, h.rec)
		}
	}
	return again, current, nil
}
