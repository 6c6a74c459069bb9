package syncer

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/lock"
)

// The reproduction: the previous page ended with X v5, the next
// one replays it (v4, stale) before its newer copy v6.
func TestDedupeKeepsTheNewestCopyAfterAReplay(t *testing.T) {
	r := &run{s: &Syncer{}}
	_, prev := r.dedupe([]erp.Record{{ErpID: "X", Version: 5}}, nil)
	for _, page := range [][]erp.Record{
		{{ErpID: "X", Version: 4}, {ErpID: "X", Version: 6}},
		{{ErpID: "X", Version: 5}, {ErpID: "X", Version: 6}},
		{{ErpID: "X", Version: 6}, {ErpID: "X", Version: 5}},
		{{ErpID: "X", Version: 5}, {ErpID: "X", Version: 4}, {ErpID: "X", Version: 6}, {ErpID: "X", Version: 6}},
	} {
		out, _ := r.dedupe(page, prev)
		if len(out) != 1 || out[0].Version != 6 {
			t.Errorf("page %v after X v5: queued %v, want X v6 once", page, out)
		}
	}
}

// The property, over random pages: of each erp_id a page queues exactly one
// record, at the page's highest version, unless the previous page already
// carried that version or a higher one; then it queues none.
func TestDedupeProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 3000 {
		shards := 1 + rng.IntN(3)
		r := &run{s: &Syncer{cfg: Config{Shards: shards, Shard: rng.IntN(shards)}}}
		var prev map[string]pageEntry
		prevMax := map[string]int64{}
		for range 1 + rng.IntN(4) {
			page := make([]erp.Record, rng.IntN(12))
			pageMax := map[string]int64{}
			for i := range page {
				id := fmt.Sprintf("r%d", rng.IntN(5))
				v := int64(1 + rng.IntN(6))
				page[i] = erp.Record{ErpID: id, Version: v}
				pageMax[id] = max(pageMax[id], v)
			}
			out, cur := r.dedupe(append([]erp.Record(nil), page...), prev)
			queued := map[string]int64{}
			for _, rec := range out {
				if _, dup := queued[rec.ErpID]; dup {
					t.Fatalf("round %d: page %v queued %s twice: %v", round, page, rec.ErpID, out)
				}
				queued[rec.ErpID] = rec.Version
			}
			for id, m := range pageMax {
				p, carried := prevMax[id]
				mine := shards == 1 || ShardOf(id, shards) == r.s.cfg.Shard
				want := mine && !(carried && p >= m)
				if v, ok := queued[id]; ok != want || (ok && v != m) {
					t.Fatalf("round %d: page %v after %v: %s queued %v at %d, want queued=%v at %d", round, page, prevMax, id, ok, v, want, m)
				}
			}
			for id := range queued {
				if _, ok := pageMax[id]; !ok {
					t.Fatalf("round %d: queued %s that the page does not have", round, id)
				}
			}
			prev, prevMax = cur, pageMax
		}
	}
}

// feedServer serves the ERP API from a list of raw items, every item in
// one page, ordered as given and filtered by updated_since, with its Date
// header set to clock.
type feedServer struct {
	mu    sync.Mutex
	items []map[string]any
	clock time.Time
}

func (f *feedServer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	since, _ := time.Parse(time.RFC3339Nano, req.URL.Query().Get("updated_since"))
	data := []map[string]any{}
	for _, it := range f.items {
		at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(it["updated_at"]))
		if err != nil || !at.Before(since) {
			data = append(data, it)
		}
	}
	w.Header().Set("Date", f.clock.UTC().Format(http.TimeFormat))
	w.Header().Set("Content-Type", "application/json")
	if req.URL.Path == "/api/v1/memberships/count" {
		_ = json.NewEncoder(w).Encode(map[string]any{"count": len(data)})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"data": data, "next_cursor": nil})
}

func (f *feedServer) add(items ...map[string]any) {
	f.mu.Lock()
	f.items = append(f.items, items...)
	sort.SliceStable(f.items, func(i, j int) bool {
		return fmt.Sprint(f.items[i]["updated_at"]) < fmt.Sprint(f.items[j]["updated_at"])
	})
	f.mu.Unlock()
}

func item(id, status string, version int64, updated string) map[string]any {
	return map[string]any{"erp_id": id, "member_id": "m-" + id, "product_code": "P", "status": status,
		"starts_at": "2024-01-01T00:00:00Z", "version": version, "updated_at": updated}
}

func feedBundle(t *testing.T, f *feedServer) *bundle {
	t.Helper()
	st, _ := testenv.MigratedStore(t)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	e, err := erp.New(erp.Config{BaseURL: srv.URL, MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	prefix := testenv.RandomName("erpsync-test:") + ":"
	return &bundle{store: st, locks: lock.New(testenv.Redis(t), &lock.Options{Prefix: prefix}), erp: e, prefix: prefix, job: testenv.RandomName("job-")}
}

func (b *bundle) checkpoint(t *testing.T) time.Time {
	t.Helper()
	cp, ok, err := b.store.Checkpoint(context.Background(), b.job)
	if err != nil || !ok {
		t.Fatalf("checkpoint: %v (found %v)", err, ok)
	}
	return cp.Position
}

// Quarantined items, however far in the future they are dated, never move
// the checkpoint: the change the ERP makes after them is synced.
func TestInvalidItemsNeverMoveTheCheckpoint(t *testing.T) {
	t.Parallel()
	f := &feedServer{clock: time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)}
	f.add(item("A", "ACTIVE", 1, "2024-06-01T10:00:00Z"),
		item("BAD", "BOGUS", 1, "2999-01-01T00:00:00Z"),
		item("FAR", "ACTIVE", 1, "9999-12-31T23:59:59-23:59"))
	b := feedBundle(t, f)
	rep := mustRun(t, b.syncer(t, Config{Overlap: time.Second}))
	if rep.Inserted != 1 || rep.Invalid != 2 {
		t.Fatalf("first run: %+v", rep.Counters)
	}
	if cp := b.checkpoint(t); !cp.Equal(time.Date(2024, 6, 1, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("checkpoint %s, want the valid record's 2024-06-01T10:00:00Z", cp)
	}
	f.add(item("B", "ACTIVE", 1, "2024-06-01T11:00:00Z"))
	if rep := mustRun(t, b.syncer(t, Config{Overlap: time.Second})); rep.Inserted != 1 {
		t.Fatalf("the change after the bad items was not synced: %+v", rep.Counters)
	}
}

// A valid record dated past the ERP's clock is written, but the checkpoint
// stops at the clock: records the ERP changes later, stamped with its
// clock, are still read.
func TestCheckpointNeverPassesTheERPClock(t *testing.T) {
	t.Parallel()
	clock := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	f := &feedServer{clock: clock}
	f.add(item("A", "ACTIVE", 1, "2024-06-01T10:00:00Z"), item("FUTURE", "ACTIVE", 1, "2999-01-01T00:00:00Z"))
	b := feedBundle(t, f)
	if rep := mustRun(t, b.syncer(t, Config{Overlap: time.Second})); rep.Inserted != 2 {
		t.Fatalf("first run: %+v", rep.Counters)
	}
	if cp := b.checkpoint(t); !cp.Equal(clock.Add(ClockAllowance)) {
		t.Fatalf("checkpoint %s, want the ERP's clock %s plus %s", cp, clock, ClockAllowance)
	}
	f.mu.Lock()
	f.clock = clock.Add(time.Minute)
	f.mu.Unlock()
	f.add(item("B", "ACTIVE", 1, "2024-06-01T12:00:30Z"))
	rep := mustRun(t, b.syncer(t, Config{Overlap: time.Second}))
	if rep.Inserted != 1 || rep.Unchanged != 1 {
		t.Fatalf("second run: %+v; want B inserted and the future record re-read unchanged", rep.Counters)
	}
}

// After a signal the job lock stays renewed while the records in hand are
// written for the grace period, even with a lease shorter than the grace:
// no second run starts meanwhile.
func TestJobLockHeldThroughTheGracePeriod(t *testing.T) {
	t.Parallel()
	f := &feedServer{clock: time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)}
	for i := range 40 {
		f.add(item(fmt.Sprintf("R%03d", i), "ACTIVE", 1, "2024-06-01T10:00:00Z"))
	}
	b := feedBundle(t, f)
	const ttl = 300 * time.Millisecond
	s := b.syncer(t, Config{LockTTL: ttl, Grace: 10 * time.Second, ChunkSize: 10, Workers: 1, DBWriters: 1})
	writing := make(chan struct{})
	var once sync.Once
	release := make(chan struct{})
	s.hooks.failWrite = func(string) error {
		once.Do(func() { close(writing) })
		<-release
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *Report)
	go func() {
		rep, _ := s.Run(ctx)
		done <- rep
	}()
	<-writing
	cancel() // the signal: the run now writes what it holds for up to Grace
	time.Sleep(3 * ttl)
	second, err := b.syncer(t, Config{LockTTL: ttl}).Run(context.Background())
	if err != nil || second.Status != store.StatusSkipped {
		t.Fatalf("a second run during the first one's grace period: status %s, err %v; want skipped", second.Status, err)
	}
	close(release)
	rep := <-done
	if rep.Status != store.StatusInterrupted {
		t.Fatalf("first run: status %s, want interrupted", rep.Status)
	}
	if _, err := b.locks.Obtain(context.Background(), JobLockKey(b.job), ttl, nil); err != nil {
		t.Fatalf("the job lock was not released after the run: %v", err)
	}
}

// An unfinished backfill resumes a millisecond before its checkpoint: a
// record of the checkpoint's own millisecond that was not written yet is
// read again, even when the server rounded the stored position up (MySQL 8
// rounds DATETIME(3), MariaDB truncates).
func TestBackfillResumesWithAMargin(t *testing.T) {
	t.Parallel()
	f := &feedServer{clock: time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)}
	f.add(item("A", "ACTIVE", 1, "2024-06-01T10:00:00.0006Z"))
	b := feedBundle(t, f)
	s := b.syncer(t, Config{Mode: ModeBackfill, Since: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)})
	rounded := time.Date(2024, 6, 1, 10, 0, 0, 1e6, time.UTC)
	if err := b.store.AdvanceCheckpoint(context.Background(), BackfillCheckpointName(s.Config()), rounded, "earlier"); err != nil {
		t.Fatal(err)
	}
	rep := mustRun(t, s)
	if rep.ResumedFrom == nil || !rep.ResumedFrom.Equal(rounded.Add(-ResumeMargin)) || rep.Inserted != 1 {
		t.Fatalf("resumed from %v, counters %+v; want %s and A inserted", rep.ResumedFrom, rep.Counters, rounded.Add(-ResumeMargin))
	}
}
