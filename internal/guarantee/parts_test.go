package guarantee

import (
	"context"
	"hash/fnv"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The feeds of TestPartsGuarantee: every execution reads its window in
// parts (--fetchers 2 to 8; syncer.Plan splits the window with the ERP's
// count, so the boundaries fall where the feed's records are, on times
// that records share: the generator's ties), records change while the
// parts are paged (the adversary), one part in three may stall while the
// others are paged (Stall), processes are killed with parts in flight,
// and several executions of a wave, each with its fetchers, run at once.
// The guarantee is the same as with one fetcher: a checkpoint that passed
// an unfinished part, or a boundary that both of its parts exclude, loses
// records that the settling run (from the checkpoint) does not read
// again, and the table no longer equals the model.

// partsStall is how long a stalled part is held.
const partsStall = 150 * time.Millisecond

// TestPartsGuarantee runs feeds whose executions read in parts.
func TestPartsGuarantee(t *testing.T) {
	p := newPool(t, parallelism())
	feeds := min(*flagFeeds, 60)
	if testing.Short() {
		feeds = min(feeds, 16)
	}
	sweep(t, p, feeds, genParts)
}

// genParts is the feed of seed with fetchers on every execution, smaller
// pages (a part is never smaller than a page) and stalled parts.
func genParts(seed uint64) *scenario {
	o := sweepOpts(seed)
	o.Procs = seed%3 == 1
	o.Sigterm = false
	sc := generate(newSource(seed, nil), o)
	r := rand.New(rand.NewPCG(seed, 0x7061727473))
	if r.IntN(2) == 0 {
		sc.Adv.Stall = 35
	}
	for _, wave := range sc.Waves {
		for i := range wave {
			x := &wave[i]
			x.Fetchers = 2 + r.IntN(7)
			if r.IntN(2) == 0 {
				x.PageSize = 1 + r.IntN(4)
			}
			if !x.Proc && x.Mode != "reconcile" && r.IntN(5) < 2 {
				x.StopAt = 2 + r.IntN(6)
			}
		}
	}
	return sc
}

// stopThenRun runs x in this process with its context ended before its
// StopAt-th page, as a signal would end it with parts in flight, then
// runs it again to the end: a backfill resumes from its checkpoint.
func (f *feed) stopThenRun(x execSpec, tab *table) {
	id := f.newExec()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopAt := x.StopAt // the hook may run after this returns: a request of the stopped run served late
	f.erp.onPage(tab.log(id), func(n int) {
		if n == stopAt {
			cancel()
		}
	})
	if _, err := f.inProcess(ctx, id, x, 2*time.Second); err != nil {
		f.t.Logf("stopped %s (%s): %v", id, x, err)
	}
	again := x
	again.StopAt = 0
	f.executeOn(again, tab)
}

// stall holds a request of execution x for partsStall when it opens a
// part of a window (a first page with an updated_until) that the
// adversary's Stall picks: the part lags while the others are paged.
func (e *erpSim) stall(x, path string, q url.Values, since, until time.Time) {
	if e.adv.Stall == 0 || until.IsZero() || q.Get("cursor") != "" || strings.HasSuffix(path, "/count") {
		return
	}
	h := fnv.New64a()
	h.Write([]byte(x + "|" + since.Format(time.RFC3339Nano) + "|" + until.Format(time.RFC3339Nano)))
	if h.Sum64()%100 < uint64(e.adv.Stall) {
		time.Sleep(partsStall)
	}
}
