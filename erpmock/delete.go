package erpmock

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrUnknownID is returned for an erp_id that names no valid record, or
// one in the wrong state (Delete of a deleted record, Recreate of a live
// one).
var ErrUnknownID = errors.New("erpmock: no such record")

// Delete removes n random valid records from the feed now, as the ERP
// would delete them: pages, counts and Truth no longer carry them. It
// returns their erp_ids, sorted.
func (m *Mock) Delete(n int) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	picked := m.pick(n)
	if len(picked) == 0 {
		return nil
	}
	ids := make([]string, len(picked))
	for k, idx := range picked {
		m.remove(idx)
		ids[k] = m.erpID(idx)
	}
	return ids
}

// DeleteIDs removes the records of ids from the feed, like Delete. Every
// id must be a valid record in the feed, else nothing is deleted.
func (m *Mock) DeleteIDs(ids []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	idxs, err := m.lookup(ids, false)
	if err != nil {
		return err
	}
	for _, idx := range idxs {
		m.remove(idx)
	}
	return nil
}

// Recreate brings deleted records back, as the ERP would recreate them:
// their version one higher than before the delete, some fields changed,
// and an updated_at from the clock, never below the newest in the feed.
// Every id must be a deleted record, else nothing changes.
func (m *Mock) Recreate(ids []string) error {
	return m.recreate(ids, func(v int64) int64 { return v + 1 })
}

// RecreateNew brings deleted records back as new records of the same key,
// as an ERP whose per-record change counter starts again does: version 1
// (lower than before the delete), some fields changed, and an updated_at
// from the clock, never below the newest in the feed. Every id must be a
// deleted record, else nothing changes.
func (m *Mock) RecreateNew(ids []string) error {
	return m.recreate(ids, func(int64) int64 { return 1 })
}

func (m *Mock) recreate(ids []string, version func(int64) int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	idxs, err := m.lookup(ids, true)
	if err != nil {
		return err
	}
	slices.Sort(idxs)
	ua := max(m.clock().UnixMilli(), m.maxUA+1)
	for _, idx := range idxs {
		r := &m.recs[idx]
		m.mutate(r)
		r.version = version(r.version)
		r.ua = ua
		r.deleted = false
		m.order = append(m.order, entry{ua: ua, idx: idx})
		m.revive(idx)
	}
	m.maxUA = ua
	return nil
}

// Restore brings deleted records back exactly as they were: the same
// version, fields and updated_at, as an ERP that hid them for a moment (a
// permission, a replica behind, a soft delete undone). No incremental
// read past their updated_at serves them again. Every id must be a deleted
// record, else nothing changes.
func (m *Mock) Restore(ids []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	idxs, err := m.lookup(ids, true)
	if err != nil {
		return err
	}
	for _, idx := range idxs {
		r := &m.recs[idx]
		r.deleted = false
		e := entry{ua: r.ua, idx: idx}
		if at, found := slices.BinarySearchFunc(m.order, e, compareEntry); found {
			m.stale-- // remove left it in order
		} else {
			m.order = slices.Insert(m.order, at, e)
		}
		m.revive(idx)
	}
	return nil
}

// revive puts the record idx, no longer deleted, back among the valid
// ones; m.mu is held for writing.
func (m *Mock) revive(idx int32) {
	at, _ := slices.BinarySearch(m.valid, idx)
	m.valid = slices.Insert(m.valid, at, idx)
	m.deleted--
}

// remove takes the valid record idx out of the feed; m.mu is held for
// writing. Its entry in order becomes stale.
func (m *Mock) remove(idx int32) {
	m.recs[idx].deleted = true
	if at, ok := slices.BinarySearch(m.valid, idx); ok {
		m.valid = slices.Delete(m.valid, at, at+1)
	}
	m.deleted++
	m.stale++
	if m.stale > len(m.order)/2 {
		m.compact()
	}
}

// lookup returns the indexes of ids, each a valid record that is deleted
// (or not) as wanted; m.mu is held.
func (m *Mock) lookup(ids []string, deleted bool) ([]int32, error) {
	out := make([]int32, 0, len(ids))
	seen := make(map[int32]bool, len(ids))
	for _, id := range ids {
		n, err := strconv.ParseUint(strings.TrimPrefix(id, "M"), 10, 31)
		if !strings.HasPrefix(id, "M") || err != nil || n == 0 || n > uint64(len(m.recs)) || m.erpID(int32(n-1)) != id {
			return nil, fmt.Errorf("%w: %q", ErrUnknownID, id)
		}
		idx := int32(n - 1)
		if r := m.recs[idx]; r.invalid != flawNone || r.deleted != deleted || seen[idx] {
			state := "in the feed"
			if r.deleted {
				state = "deleted"
			}
			return nil, fmt.Errorf("%w: %q is %s (or given twice)", ErrUnknownID, id, state)
		}
		seen[idx] = true
		out = append(out, idx)
	}
	return out, nil
}

// erpID is the erp_id of the valid record idx.
func (m *Mock) erpID(idx int32) string {
	return string(appendPadded(nil, 'M', uint64(idx)+1, m.width))
}

// Invalidate moves live valid records to a new version that breaks the
// contract (a status it does not define), stamped by the clock: what a
// sync sees when the ERP gives a record a state its map does not know (a
// new status code, a deletion flag). The record stays in the feed, invalid,
// until Revalidate. Every id must be a valid record in the feed, else
// nothing changes.
func (m *Mock) Invalidate(ids []string) error { return m.restamp(ids, flawNone, flawStatus) }

// Revalidate moves records that Invalidate made invalid to a new, valid
// version stamped by the clock. Every id must be such a record, else
// nothing changes.
func (m *Mock) Revalidate(ids []string) error { return m.restamp(ids, flawStatus, flawNone) }

// restamp gives the records of ids, in the feed with flaw from, a new
// version with flaw to and an updated_at from the clock.
func (m *Mock) restamp(ids []string, from, to uint8) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	idxs := make([]int32, 0, len(ids))
	for _, id := range ids {
		n, err := strconv.ParseUint(strings.TrimPrefix(id, "M"), 10, 31)
		if !strings.HasPrefix(id, "M") || err != nil || n == 0 || n > uint64(len(m.recs)) || m.erpID(int32(n-1)) != id ||
			m.recs[n-1].invalid != from || m.recs[n-1].deleted || slices.Contains(idxs, int32(n-1)) {
			return fmt.Errorf("%w: %q", ErrUnknownID, id)
		}
		idxs = append(idxs, int32(n-1))
	}
	slices.Sort(idxs)
	ua := max(m.clock().UnixMilli(), m.maxUA+1)
	for _, idx := range idxs {
		r := &m.recs[idx]
		m.mutate(r)
		r.invalid = to
		r.version++
		r.ua = ua
		m.order = append(m.order, entry{ua: ua, idx: idx})
		m.stale++
	}
	m.maxUA = ua
	return nil
}
