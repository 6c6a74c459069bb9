package verify

import (
	"context"
	"sync"
	"time"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
)

// ScanParts pages the whole feed of a table of dialect d; the highest
// version of each erp_id wins. With keep, the feed keeps each record
// (CompareSnapshot's Diff lists them for a repair); without, a hash of
// its fields. The feed is split into parts by updated_at (syncer.Plan), up
// to fetchers of them paged at once. A record that changes during the scan
// moves to the end of the feed: once every part is done, a last pass pages
// again from the newest updated_at the last part saw to the end, so that
// the scan sees it as one pass would. fetchers 1 is one pass.
func ScanParts(ctx context.Context, e Pager, d store.Dialect, pageSize, fetchers int, keep bool) (*Feed, error) {
	return newFeed(d, nil).scanParts(ctx, e, pageSize, fetchers, keep)
}

// ScanNewer is ScanParts that keeps, of the records it pages, those newer
// than base's copy of their erp_id, or that base lacks (Feed.Kept): what
// changed in the ERP since base was scanned, for a repair. Of the others
// it keeps a hash, as ScanParts without keep.
func ScanNewer(ctx context.Context, e Pager, d store.Dialect, pageSize, fetchers int, base *Feed) (*Feed, error) {
	return newFeed(d, base).scanParts(ctx, e, pageSize, fetchers, true)
}

// newFeed is an empty feed of a table of dialect d; base, when not nil,
// is the feed whose records it keeps only the newer of (ScanNewer).
func newFeed(d store.Dialect, base *Feed) *Feed {
	return &Feed{started: time.Now().UTC(), byID: map[string]*want{}, quarantined: map[string]erp.Invalid{}, noNUL: d == store.Postgres, base: base}
}

// scanParts pages the feed into f (ScanParts).
func (f *Feed) scanParts(ctx context.Context, e Pager, pageSize, fetchers int, keep bool) (*Feed, error) {
	parts, seen, err := syncer.Plan(ctx, e, time.Time{}, time.Time{}, fetchers, pageSize)
	if err != nil {
		return nil, err
	}
	if seen != nil {
		f.add(seen, keep, false) // the first part counts it
	}
	if len(parts) == 1 {
		_, err := f.scan(ctx, e, erp.Query{Limit: pageSize}, keep, true)
		if err != nil {
			return nil, err
		}
		f.dropSuperseded()
		return f, nil
	}
	last := len(parts) - 1
	tail := parts[last].Since
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int, len(parts))
	for i := range parts {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range min(fetchers, len(parts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				newest, err := f.scan(sctx, e, erp.Query{Since: parts[i].Since, Until: parts[i].Until, Limit: pageSize}, keep, true)
				if err != nil {
					cancel(err)
					return
				}
				if i == last && newest.After(tail) {
					tail = newest
				}
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(sctx); err != nil {
		return nil, err
	}
	if _, err := f.scan(ctx, e, erp.Query{Since: tail, Limit: pageSize}, keep, false); err != nil {
		return nil, err
	}
	f.dropSuperseded()
	return f, nil
}
