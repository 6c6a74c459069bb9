package syncer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/ctxtime"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
)

// Quarantine stores invs, the invalid copies that run runID (a reconcile)
// met in the feed, in the job's quarantine, then marks the live rows whose
// record's newest copy among them is newer than what the row holds
// (store.Current.Marks), each under its record lock with its fencing
// token: what a run does with the invalid items of its pages. A record
// without a row yet is marked by the run that makes its row, which finds
// the stored copy (flushMade). It returns how many rows it marked.
func (s *Syncer) Quarantine(ctx context.Context, runID string, invs []erp.Invalid, log zerolog.Logger) (int64, error) {
	qs := make([]store.Quarantined, len(invs))
	for i, inv := range invs {
		qs[i] = quarantinedOf(inv)
	}
	if err := s.store.Quarantine(ctx, s.cfg.Job, runID, qs); err != nil {
		return 0, fmt.Errorf("store the invalid copies: %w", err)
	}
	r := s.newRun(&Report{}, log)
	err := r.markInvalid(ctx, invs)
	return r.c.quarantined.Load(), err
}

// quarantinedOf is the quarantine's row of inv.
func quarantinedOf(inv erp.Invalid) store.Quarantined {
	return store.Quarantined{ErpID: inv.ErpID, Reason: inv.Reason, Payload: inv.Raw, Version: inv.Version, UpdatedAt: inv.UpdatedAt}
}

// markInvalid marks the rows of invs that need it. A row is marked when the
// invalid copy is newer than the row's version and mark; a valid copy at
// that version or a newer one, no older than the invalid copy, clears the
// mark when it is written (the store's guarded statements), so the order
// in which copies arrive does not matter, but for a record without a row
// yet (markAfterWrites) and a copy with neither a version nor an
// updated_at.
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
//
// made are the records whose rows the writes inserted or restored: the run
// also looks, for them, at the invalid copies the job's quarantines stored
// (flushMade), which another run met while the record had no live row to
// mark. It looks at most every flushEvery, and before it saves a
// checkpoint and as it ends.
func (r *run) markAfterWrites(ctx context.Context, recs []erp.Record, made []string) error {
	if invs := r.invalidCopies.of(recs); len(invs) > 0 {
		if err := r.markInvalid(ctx, invs); err != nil {
			return err
		}
	}
	if r.made.add(made, flushEvery) {
		return r.flushMade(ctx)
	}
	return nil
}

// flushEvery is how often, at most, a run that makes rows reads the job's
// quarantine number (flushMade).
const flushEvery = 100 * time.Millisecond

// flushMade marks the rows the run made, since it last looked, of records
// whose invalid copies the job's quarantines stored: another run met the
// copy while the record had no live row to mark. That run stores the copy
// (a quarantine takes the job's next number in the transaction that stores
// it) before it reads the rows, and this one reads the job's quarantine
// number after the rows it looks at are committed, so one of the two finds
// the other's write. On an error the rows wait for the next look.
func (r *run) flushMade(ctx context.Context) error {
	keys := r.made.take()
	if len(keys) == 0 {
		return nil
	}
	stored, err := r.storedCopies.of(ctx, r.s.store, r.s.cfg.Job, keys)
	if err == nil && len(stored) > 0 {
		err = r.markInvalid(ctx, stored)
	}
	if err != nil {
		r.made.add(keys, 0)
		return fmt.Errorf("mark the rows made of records quarantined by other runs: %w", err)
	}
	return nil
}

// madeRows are the records whose rows a run made and whose stored invalid
// copies it has not looked at yet (flushMade). Safe for concurrent use.
type madeRows struct {
	mu     sync.Mutex
	keys   []string
	looked time.Time // when the last look began
}

// add adds keys, and reports whether a look is due: some rows wait, and
// the last look began at least every ago (never, with every 0). A look
// reported due counts as begun.
func (m *madeRows) add(keys []string, every time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys = append(m.keys, keys...)
	if len(m.keys) == 0 || every <= 0 || time.Since(m.looked) < every {
		return false
	}
	m.looked = time.Now()
	return true
}

// take returns the rows that wait, and empties the list.
func (m *madeRows) take() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := m.keys
	m.keys = nil
	return keys
}

// storedCopies is run.storedCopies, read when the run first makes a row
// and then as the job's quarantines store more. Safe for concurrent use.
type storedCopies struct {
	mu   sync.Mutex
	seq  int64 // the job's quarantine number when they were last read
	byID map[string]erp.Invalid
}

// of returns the stored copies of the records of keys, after reading
// those the job's quarantines stored or counted since it last looked.
func (c *storedCopies) of(ctx context.Context, st *store.Store, job string, keys []string) ([]erp.Invalid, error) {
	seq, err := st.QuarantineSeq(ctx, job)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if seq > c.seq {
		got, err := st.InvalidCopiesSince(ctx, job, c.seq, seq)
		if err != nil {
			return nil, err
		}
		if c.byID == nil {
			c.byID = map[string]erp.Invalid{}
		}
		for _, g := range got {
			keepNewest(c.byID, erp.Invalid{ErpID: g.ErpID, Version: g.Version, UpdatedAt: g.UpdatedAt})
		}
		c.seq = seq
	}
	var out []erp.Invalid
	for _, k := range keys {
		if inv, ok := c.byID[k]; ok {
			out = append(out, inv)
		}
	}
	return out, nil
}

// markChunk marks the rows of invs under their record locks. It never
// waits for a lock while it holds others, which two runs marking the same
// records would do on each other until a lease ran out: each round marks
// the rows whose locks are free and releases them, and the others are
// tried again, with a growing pause, up to LockWait.
func (r *run) markChunk(ctx context.Context, invs []erp.Invalid) error {
	deadline := time.Now().Add(r.s.cfg.LockWait)
	for round := 0; len(invs) > 0; round++ {
		if round > 0 {
			if time.Now().After(deadline) {
				return fmt.Errorf("record lock of %q held elsewhere past the lock wait", invs[0].ErpID)
			}
			if err := ctxtime.Sleep(ctx, backoff(round+1)); err != nil {
				return err
			}
		}
		keys := make([]string, len(invs))
		for i, inv := range invs {
			keys[i] = r.s.lockKey(inv.ErpID)
		}
		locks, err := r.obtainMany(ctx, keys)
		if err != nil {
			return err
		}
		var (
			hs        []held
			free      []erp.Invalid
			contended []erp.Invalid
		)
		for i, l := range locks {
			if l == nil {
				contended = append(contended, invs[i])
				continue
			}
			hs = append(hs, held{rec: erp.Record{ErpID: invs[i].ErpID}, lock: l})
			free = append(free, invs[i])
		}
		err = r.markHeld(ctx, free, hs)
		r.release(ctx, hs)
		if err != nil {
			return err
		}
		invs = contended
	}
	return nil
}

// markHeld marks the rows of invs, whose record locks hs holds.
func (r *run) markHeld(ctx context.Context, invs []erp.Invalid, hs []held) error {
	if len(invs) == 0 {
		return nil
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
