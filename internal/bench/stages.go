package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/lock"
)

// Stages measures each step of the syncer's chunked write path alone, at
// the syncer's concurrency (workers goroutines, chunks of chunk records),
// in this process, through the same store, lock and erp packages: the
// single fetcher paging the feed, ObtainMany + ReleaseMany, the version
// read, the multi-row INSERT, and the four together without the fetch.
// The slowest stage bounds the backfill.
func Stages(ctx context.Context, cfg Config, workers, chunk, page int) ([]*Result, error) {
	workers, chunk, page = cmpOr(workers, 16), cmpOr(chunk, 100), cmpOr(page, 500)
	ip, err := startInProcess(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer ip.close()
	b, mock, st, rdb, e := ip.bench, ip.mock, ip.store, ip.rdb, ip.erp
	locks := lock.New(rdb, &lock.Options{Prefix: "erpsync-bench:" + b.job + ":"})

	truth := mock.Truth()
	ms := make([]store.Membership, len(truth))
	for i, r := range truth {
		ms[i] = membershipOf(r)
	}
	var chunks [][]store.Membership
	for i := 0; i < len(ms); i += chunk {
		chunks = append(chunks, ms[i:min(i+chunk, len(ms))])
	}
	// As the lock package names them: prefix, {key}.
	ids := func(c []store.Membership) []string {
		out := make([]string, len(c))
		for i, m := range c {
			out[i] = "rec:" + m.ErpID
		}
		return out
	}
	// The Redis keys the lock package would use, for the variants.
	lockKeys := func(c []store.Membership) []string {
		out := ids(c)
		for i, k := range out {
			out[i] = "erpsync-bench:" + b.job + ":{" + k + "}"
		}
		return out
	}
	erpIDs := func(c []store.Membership) []string {
		out := make([]string, len(c))
		for i, m := range c {
			out[i] = m.ErpID
		}
		return out
	}
	ttl := 30 * time.Second
	var out []*Result
	setting := fmt.Sprintf("%d workers, chunks of %d", workers, chunk)

	// The fetcher: one goroutine paging the feed.
	b.logf("stage fetch")
	meter := startCPU(b.ports)
	start := time.Now()
	q := erp.Query{Limit: page}
	var fetched int64
	var pageTimes []float64
	for {
		t := time.Now()
		p, err := e.Page(ctx, q)
		if err != nil {
			return out, err
		}
		pageTimes = append(pageTimes, float64(time.Since(t))/float64(time.Millisecond))
		fetched += int64(len(p.Records))
		if p.NextCursor == "" {
			break
		}
		q.Cursor = p.NextCursor
	}
	r := result(fmt.Sprintf("stage fetch: one goroutine pages the feed, %d a page, decoded", page), fetched, time.Since(start))
	r.CPU = meter.stop()
	r.Note = "page " + latencyNote(pageTimes)
	out = append(out, r)

	stage := func(name string, prepare func() error, op func(c []store.Membership) error) error {
		if prepare != nil {
			if err := prepare(); err != nil {
				return err
			}
		}
		b.logf("stage %s", name)
		var next atomic.Int64
		var mu sync.Mutex
		var lat []float64
		var firstErr error
		var wg sync.WaitGroup
		meter := startCPU(b.ports)
		start := time.Now()
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []float64
				for {
					i := int(next.Add(1)) - 1
					if i >= len(chunks) {
						break
					}
					t := time.Now()
					if err := op(chunks[i]); err != nil {
						mu.Lock()
						firstErr = cmpOrErr(firstErr, err)
						mu.Unlock()
						return
					}
					mine = append(mine, float64(time.Since(t))/float64(time.Millisecond))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		if firstErr != nil {
			return fmt.Errorf("stage %s: %w", name, firstErr)
		}
		r := result("stage "+name+", "+setting, int64(len(ms)), time.Since(start))
		r.CPU = meter.stop()
		r.Note = "chunk " + latencyNote(lat)
		out = append(out, r)
		return nil
	}
	lockChunk := func(c []store.Membership) ([]*lock.Lock, error) {
		ls, err := locks.ObtainMany(ctx, ids(c), ttl)
		if err != nil {
			return nil, err
		}
		held := ls[:0]
		for _, l := range ls {
			if l != nil {
				held = append(held, l)
			}
		}
		return held, nil
	}
	empty := func() error { return b.empty(ctx, b.memberships("")) }
	steps := []struct {
		name    string
		prepare func() error
		op      func(c []store.Membership) error
	}{
		{"locks: ObtainMany + ReleaseMany", nil, func(c []store.Membership) error {
			ls, err := lockChunk(c)
			if err != nil {
				return err
			}
			_, err = locks.ReleaseMany(ctx, ls)
			return err
		}},
		{"locks, floor: leases only, no fencing", nil, func(c []store.Membership) error {
			return leasesOnly(ctx, rdb, lockKeys(c))
		}},
		{"versions: SELECT ... IN, empty table", empty, func(c []store.Membership) error {
			_, err := st.Versions(ctx, erpIDs(c))
			return err
		}},
		{"insert: multi-row INSERT, empty table", empty, func(c []store.Membership) error {
			return st.Insert(ctx, c)
		}},
		{"versions: SELECT ... IN, full table", nil, func(c []store.Membership) error {
			_, err := st.Versions(ctx, erpIDs(c))
			return err
		}},
		{"write path: lock, versions, insert, release, empty table", empty, func(c []store.Membership) error {
			ls, err := lockChunk(c)
			if err != nil {
				return err
			}
			if _, err := st.Versions(ctx, erpIDs(c)); err != nil {
				return err
			}
			if err := st.Insert(ctx, c); err != nil {
				return err
			}
			_, err = locks.ReleaseMany(ctx, ls)
			return err
		}},
		{"re-run path: lock, versions, release, full table", nil, func(c []store.Membership) error {
			ls, err := lockChunk(c)
			if err != nil {
				return err
			}
			if _, err := st.Versions(ctx, erpIDs(c)); err != nil {
				return err
			}
			_, err = locks.ReleaseMany(ctx, ls)
			return err
		}},
	}
	for _, s := range steps {
		if err := stage(s.name, s.prepare, s.op); err != nil {
			return out, err
		}
	}
	return out, nil
}

func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func cmpOrErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// latencyNote gives p50, p99 and max of ms.
func latencyNote(ms []float64) string {
	if len(ms) == 0 {
		return "-"
	}
	slices.Sort(ms)
	q := func(p float64) float64 { return ms[min(int(p*float64(len(ms))), len(ms)-1)] }
	return fmt.Sprintf("p50 %.1f ms, p99 %.1f ms, max %.1f ms", q(0.5), q(0.99), ms[len(ms)-1])
}
