package syncer

import (
	"sync"
	"time"
)

// tracker computes the checkpoint's low watermark: the updated_at of the
// last page such that it and every page before it are fully committed.
// Pages arrive in feed order, which is ascending updated_at.
type tracker struct {
	mu        sync.Mutex
	pages     []pageState // index = page number - base
	base      int         // page number of pages[0]
	watermark time.Time
	moved     bool // watermark moved since last take
	blocked   bool // a page failed: the watermark will not pass it
}

type pageState struct {
	open    int // chunks not yet finished
	sealed  bool
	failed  bool
	maxSeen time.Time
}

// addPage registers page p (numbered from 0, in order) with its newest
// updated_at; chunks are added with addChunk before seal.
func (t *tracker) addPage(maxSeen time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pages = append(t.pages, pageState{maxSeen: maxSeen})
	return t.base + len(t.pages) - 1
}

func (t *tracker) addChunk(p int) {
	t.mu.Lock()
	t.pages[p-t.base].open++
	t.mu.Unlock()
}

// seal says page p has no more chunks coming.
func (t *tracker) seal(p int, failed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := &t.pages[p-t.base]
	ps.sealed = true
	ps.failed = ps.failed || failed
	t.advance()
}

// done marks one chunk of page p finished; failed when any of its records
// failed after their retries.
func (t *tracker) done(p int, failed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := &t.pages[p-t.base]
	ps.open--
	ps.failed = ps.failed || failed
	t.advance()
}

func (t *tracker) advance() {
	for len(t.pages) > 0 && !t.blocked {
		ps := t.pages[0]
		if !ps.sealed || ps.open > 0 {
			return
		}
		if ps.failed {
			t.blocked = true
			return
		}
		if ps.maxSeen.After(t.watermark) {
			t.watermark = ps.maxSeen
			t.moved = true
		}
		t.pages = t.pages[1:]
		t.base++
	}
}

// take returns the watermark and whether it moved since the last take.
func (t *tracker) take() (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	moved := t.moved
	t.moved = false
	return t.watermark, moved
}
