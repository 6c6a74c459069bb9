package syncer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/erpsync/erpsync/internal/erp"
)

// Counter is what plan uses of a Source that can count the records of a
// window of updated_at: [since, until), zero times leaving a bound open.
// The REST client and the OData source both can; erp.ErrNoCount says a
// source has no count after all.
type Counter interface {
	Count(ctx context.Context, since, until time.Time) (int64, error)
}

// Pager is what Plan needs of a feed besides its count: a page.
type Pager interface {
	Page(ctx context.Context, q erp.Query) (*erp.Page, error)
}

// Part is one part of a window of the feed: the records whose updated_at
// is in [Since, Until), half-open so that a time shared by two parts, the
// boundary's, belongs to one of them only; zero times leave a bound open.
type Part struct {
	Since, Until time.Time
	// from and to are where a split may cut: Since and Until, the open
	// ends closed at the feed's first record and at the clock.
	from, to time.Time
	n        int64 // records the source counted, -1 when unknown
}

// partsPerFetcher is how many parts plan aims at per fetcher: parts of
// about the same count, several a fetcher, so that the fetchers that
// finish early take the parts that remain while a slow or dense one is
// paged.
const partsPerFetcher = 4

// Plan splits the window [since, until) for n fetchers: one part when n
// is 1 or the window holds a page or less; else parts of the feed's own
// count (Counter) of about target = total/(4n) records, at most one and a
// half times that, and never less than a page: the range cut into as many
// pieces of equal time as the count says it holds targets (4n at first),
// each counted, and each piece that holds more cut again the same way
// while it is wider than a millisecond (a dense day, a busy hour),
// neighbours that together hold no more merged. Every round of counts is
// a round trip to the ERP before the first page: cutting a range into as
// many pieces as it needs at once, not in halves or n-ths, keeps them few,
// and the slack above the target keeps a piece a little over it from
// being cut again. A part whose range
// cannot be split (every record at one time) stays one part, paged on its
// own keyset. Without a count the range is cut into 4n parts of equal
// time, as when a count fails after its retries (the window's or a
// piece's). The cuts begin at the window's first record (one page of one
// record is read to learn it, at the same time as the window's count); a
// window open at the end is cut up
// to now, its last part staying open. The parts cover the window exactly,
// in order. seen is that page of one record, when it was read: a record
// of the first part, which its reader may take as read.
func Plan(ctx context.Context, src Pager, since, until time.Time, n, pageSize int) (parts []Part, seen *erp.Page, err error) {
	parts, err = plan(ctx, src, since, until, n, pageSize, &seen)
	return parts, seen, err
}

func plan(ctx context.Context, src Pager, since, until time.Time, n, pageSize int, seen **erp.Page) ([]Part, error) {
	one := []Part{{Since: since, Until: until, n: -1}}
	if n <= 1 {
		return one, nil
	}
	from, to := since, until
	c, counts := src.(Counter)
	var total int64
	countErr := errors.ErrUnsupported
	// The window's count and its first record at once: two round trips
	// in the time of one.
	var counted sync.WaitGroup
	if counts {
		counted.Add(1)
		go func() {
			defer counted.Done()
			total, countErr = c.Count(ctx, since, until)
		}()
	}
	defer counted.Wait()
	// The window's first record: where its records start, which a window
	// since 2000 says nothing of.
	p, err := src.Page(ctx, erp.Query{Since: since, Until: until, Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("plan the parts: first record: %w", err)
	}
	*seen = p
	var first time.Time
	switch {
	case len(p.Records) > 0:
		first = p.Records[0].UpdatedAt
	case len(p.Invalid) > 0:
		first = p.Invalid[0].UpdatedAt
	}
	if first.IsZero() {
		return one, nil
	}
	if first.After(from) {
		from = first
	}
	if to.IsZero() {
		to = time.Now()
	}
	from = from.UTC().Truncate(time.Millisecond)
	to = to.UTC()
	if to.Sub(from) < 2*time.Millisecond {
		return one, nil
	}
	whole := Part{Since: since, Until: until, from: from, to: to, n: -1}
	counted.Wait()
	if err := countErr; err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("plan the parts: count: %w", err)
		}
		return evenParts(whole, n*partsPerFetcher), nil
	}
	if total <= int64(pageSize) {
		return one, nil
	}
	whole.n = total
	target := max(int64(pageSize), (total+int64(n*partsPerFetcher)-1)/int64(n*partsPerFetcher))
	sp := splitter{c: c, target: target, ways: n * partsPerFetcher, sem: make(chan struct{}, 2*n)}
	parts, err := sp.split(ctx, whole, geometricCuts)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("plan the parts: count: %w", err)
	case err != nil:
		// A count that failed after its retries: the parts only lose
		// their sizes.
		return evenParts(whole, n*partsPerFetcher), nil
	}
	return merge(parts, slack(target)), nil
}

// slack is the most a part of a target holds: one and a half times it.
func slack(target int64) int64 { return target + target/2 }

// splitter cuts parts by time while the count says they are too large,
// each into as many pieces of equal time as it holds targets, at most
// ways (a search for where the records are that narrows a range that many
// times a round of counts, not twice), with at most cap(sem) counts at
// once.
type splitter struct {
	c      Counter
	target int64
	ways   int
	sem    chan struct{}
}

func (sp *splitter) split(ctx context.Context, p Part, cutAt func(p Part, i, ways int) time.Time) ([]Part, error) {
	if p.n <= slack(sp.target) {
		return []Part{p}, nil
	}
	ways := int(min(int64(sp.ways), max(2, (p.n+sp.target-1)/sp.target)))
	// The pieces' bounds: p's own at the ends, whole milliseconds between.
	cuts := []time.Time{p.from}
	for i := 1; i < ways; i++ {
		cut := cutAt(p, i, ways).Truncate(time.Millisecond)
		if cut.After(cuts[len(cuts)-1]) && cut.Before(p.to) {
			cuts = append(cuts, cut)
		}
	}
	if len(cuts) == 1 {
		return []Part{p}, nil // one millisecond: its own keyset
	}
	cuts = append(cuts, p.to)
	pieces := make([]Part, len(cuts)-1)
	for i := range pieces {
		pieces[i] = Part{Since: cuts[i], Until: cuts[i+1], from: cuts[i], to: cuts[i+1]}
	}
	pieces[0].Since, pieces[len(pieces)-1].Until = p.Since, p.Until
	// Count every piece but the last, which holds the rest.
	errs := make([]error, len(pieces))
	var wg sync.WaitGroup
	for i := range pieces[:len(pieces)-1] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sp.sem <- struct{}{}
			pieces[i].n, errs[i] = sp.c.Count(ctx, pieces[i].Since, pieces[i].Until)
			<-sp.sem
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	rest := p.n
	for _, pc := range pieces[:len(pieces)-1] {
		rest -= pc.n
	}
	pieces[len(pieces)-1].n = max(rest, 0)
	// Then split each piece that is still too large.
	outs := make([][]Part, len(pieces))
	for i := range pieces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = sp.split(ctx, pieces[i], evenCuts)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var out []Part
	for _, o := range outs {
		out = append(out, o...)
	}
	return out, nil
}

// evenCuts cuts p into ways pieces of equal time: the i-th bound.
func evenCuts(p Part, i, ways int) time.Time {
	return p.from.Add(p.to.Sub(p.from) / time.Duration(ways) * time.Duration(i))
}

// geometricCuts cuts p into ways pieces each about as much longer than
// the one before as the first is long, from a millisecond after p.from to
// p.to: the i-th bound. It is the first cut of a window, which the first
// record and the clock bound: a feed whose records crowd one end of it
// (a backfill since 2000 of changes made this year, or of a system loaded
// in one afternoon) is found in a round of counts, where pieces of equal
// time would find it one round of counts for each ways-fold narrowing.
// Records spread evenly fill the last pieces, which the next round cuts
// evenly.
func geometricCuts(p Part, i, ways int) time.Time {
	span := float64(p.to.Sub(p.from) / time.Millisecond)
	if span <= 1 {
		return evenCuts(p, i, ways)
	}
	return p.from.Add(time.Duration(math.Pow(span, float64(i)/float64(ways)) * float64(time.Millisecond)))
}

// merge joins neighbours that together hold no more than target.
func merge(parts []Part, target int64) []Part {
	out := parts[:1]
	for _, p := range parts[1:] {
		last := &out[len(out)-1]
		if last.n+p.n <= target {
			last.Until, last.to, last.n = p.Until, p.to, last.n+p.n
			continue
		}
		out = append(out, p)
	}
	return out
}

// evenParts cuts p's range into k parts of equal time, whole milliseconds.
func evenParts(p Part, k int) []Part {
	step := (p.to.Sub(p.from) / time.Duration(k)).Truncate(time.Millisecond)
	if step <= 0 {
		step = time.Millisecond
	}
	var out []Part
	lo := p.Since
	for cut := p.from.Add(step); cut.Before(p.to) && len(out) < k-1; cut = cut.Add(step) {
		out = append(out, Part{Since: lo, Until: cut, n: -1})
		lo = cut
	}
	return append(out, Part{Since: lo, Until: p.Until, n: -1})
}

// fetchParts plans the window [since, until) and pages its parts into
// queue, up to Config.Fetchers at once, each part on its own (see fetch),
// the earliest first. The first part to fail stops the others fetching;
// its error is returned.
func (r *run) fetchParts(ctx, hand context.Context, since, until time.Time, queue chan<- chunk) error {
	cfg := r.s.cfg
	parts, seen, err := Plan(ctx, r.s.erp, since, until, cfg.Fetchers, cfg.PageSize)
	if err != nil {
		return err
	}
	if len(parts) == 1 {
		r.t.setParts(1)
		return r.fetch(ctx, hand, 0, since, until, seen, queue)
	}
	// A window open at the end gets a tail: see below.
	tail := len(parts)
	r.t.setParts(len(parts) + 1)
	r.newest = make([]time.Time, len(parts)+1)
	r.log.Info().Int("parts", len(parts)).Int("fetchers", min(cfg.Fetchers, len(parts))).Msg("window split into parts")
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int, len(parts))
	for i := range parts {
		next <- i
	}
	close(next)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range min(cfg.Fetchers, len(parts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if fctx.Err() != nil {
					return
				}
				var head *erp.Page
				if i == 0 {
					head = seen
				}
				if err := r.fetch(fctx, hand, i, parts[i].Since, parts[i].Until, head, queue); err != nil {
					mu.Lock()
					if first == nil && (ctx.Err() != nil || fctx.Err() == nil) {
						first = err
					}
					mu.Unlock()
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	switch {
	case first != nil:
		return first
	case ctx.Err() != nil:
		return ctx.Err()
	}
	// A record that changed while the parts were paged moved to the end
	// of the feed, past a last part that may have finished first: read
	// once more from after the newest record the last part saw to the end, so
	// that the run ends where one pass ends. A window with an end has no
	// tail: a record moved past it is no longer in the window.
	// (A record of that millisecond the last part did not see was
	// committed late with an older time: the overlap of the next run
	// reads it, as it would after one pass.)
	from := parts[tail-1].Since
	if after := r.newest[tail-1].Add(time.Millisecond); after.After(from) && !r.newest[tail-1].IsZero() {
		from = after
	}
	if !until.IsZero() {
		r.t.seal(tail, r.t.addPage(tail, time.Time{}), false, true) // nothing to read
		return nil
	}
	return r.fetch(ctx, hand, tail, from, until, nil, queue)
}
