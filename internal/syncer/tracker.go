package syncer

import (
	"sync"
	"time"
)

// tracker computes the checkpoint's low watermark over the parts of a run's
// window (see plan), which are paged at once: the updated_at of the last
// page such that it and every page before it, in its part and in every
// earlier part, are fully committed. Within a part pages arrive in feed
// order, which is ascending updated_at; the parts are in the order of
// their windows, which do not overlap. The watermark never passes a part
// that has not been paged to its end and written whole: a run stopped with
// parts in flight resumes from the earliest of them.
type tracker struct {
	mu        sync.Mutex
	parts     []partState
	next      int // the earliest part not yet complete
	watermark time.Time
	moved     bool // watermark moved since last take
}

type partState struct {
	pages     []pageState // index = page number - base
	base      int         // page number of pages[0]
	watermark time.Time   // of the pages committed in order
	paged     bool        // the part's last page was fetched and sealed
	blocked   bool        // a page failed: the watermark will not pass it
}

type pageState struct {
	open    int // chunks not yet finished
	sealed  bool
	failed  bool
	maxSeen time.Time
}

// setParts makes the tracker follow n parts (1 before it is called).
func (t *tracker) setParts(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.parts = make([]partState, n)
}

func (t *tracker) part(i int) *partState {
	if t.parts == nil {
		t.parts = make([]partState, 1)
	}
	return &t.parts[i]
}

// addPage registers the next page of part i (numbered from 0, in order)
// with its newest updated_at; chunks are added with addChunk before seal.
func (t *tracker) addPage(i int, maxSeen time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := t.part(i)
	ps.pages = append(ps.pages, pageState{maxSeen: maxSeen})
	return ps.base + len(ps.pages) - 1
}

func (t *tracker) addChunk(i, p int) {
	t.mu.Lock()
	ps := t.part(i)
	ps.pages[p-ps.base].open++
	t.mu.Unlock()
}

// seal says page p of part i has no more chunks coming; last that it is
// the part's last page.
func (t *tracker) seal(i, p int, failed, last bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := t.part(i)
	pg := &ps.pages[p-ps.base]
	pg.sealed = true
	pg.failed = pg.failed || failed
	ps.paged = ps.paged || last
	t.advance()
}

// done marks one chunk of page p of part i finished; failed when any of
// its records failed after their retries.
func (t *tracker) done(i, p int, failed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := t.part(i)
	pg := &ps.pages[p-ps.base]
	pg.open--
	pg.failed = pg.failed || failed
	t.advance()
}

// advance moves each part's watermark over its committed pages, then the
// run's over the complete parts and into the earliest incomplete one.
func (t *tracker) advance() {
	for t.next < len(t.parts) {
		ps := &t.parts[t.next]
		for len(ps.pages) > 0 && !ps.blocked {
			pg := ps.pages[0]
			if !pg.sealed || pg.open > 0 {
				break
			}
			if pg.failed {
				ps.blocked = true
				break
			}
			if pg.maxSeen.After(ps.watermark) {
				ps.watermark = pg.maxSeen
			}
			ps.pages = ps.pages[1:]
			ps.base++
		}
		if ps.watermark.After(t.watermark) {
			t.watermark = ps.watermark
			t.moved = true
		}
		if !ps.paged || ps.blocked || len(ps.pages) > 0 {
			return
		}
		t.next++
	}
}

// keep undoes the last take's reset of moved: the watermark it returned
// was not saved.
func (t *tracker) keep() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.moved = true
}

// take returns the watermark and whether it moved since the last take.
func (t *tracker) take() (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	moved := t.moved
	t.moved = false
	return t.watermark, moved
}
