package syncer

import (
	"context"
	"errors"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/lock"
)

// bundle is what a syncer test works with: its own database, its own lock
// key prefix, and an in-process erpmock.
type bundle struct {
	store  *store.Store
	locks  *lock.Client
	mock   *erpmock.Mock
	erp    *erp.Client
	prefix string
	job    string
}

func setup(t *testing.T, opt erpmock.Options) *bundle {
	t.Helper()
	st, _ := testenv.MigratedStore(t)
	rdb := testenv.Redis(t)
	prefix := testenv.RandomName("erpsync-test:") + ":"
	m := erpmock.New(opt)
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	e, err := erp.New(erp.Config{BaseURL: srv.URL, Token: opt.Token, MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond, MaxRetries: 10, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{store: st, locks: lock.New(rdb, &lock.Options{Prefix: prefix}), mock: m, erp: e, prefix: prefix, job: testenv.RandomName("job-")}
}

func (b *bundle) syncer(t *testing.T, cfg Config) *Syncer {
	t.Helper()
	if cfg.Job == "" {
		cfg.Job = b.job
	}
	s, err := New(cfg, b.erp, b.store, b.locks, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type row struct {
	ErpID, MemberID, ProductCode, Status string
	StartsAt                             time.Time
	EndsAt                               *time.Time
	Version                              int64
	UpdatedAt                            time.Time
}

// assertTruth checks that memberships holds exactly the mock's valid
// records at their latest versions, field by field.
func assertTruth(t *testing.T, b *bundle) {
	t.Helper()
	rows, err := b.store.DB().Raw("SELECT erp_id, member_id, product_code, status, starts_at, ends_at, erp_version, erp_updated_at FROM memberships ORDER BY erp_id").Rows()
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.ErpID, &r.MemberID, &r.ProductCode, &r.Status, &r.StartsAt, &r.EndsAt, &r.Version, &r.UpdatedAt); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	truth := b.mock.Truth()
	sort.Slice(truth, func(i, j int) bool { return truth[i].ErpID < truth[j].ErpID })
	if len(got) != len(truth) {
		t.Fatalf("memberships has %d rows, the ERP %d valid records", len(got), len(truth))
	}
	for i, w := range truth {
		g := got[i]
		same := g.ErpID == w.ErpID && g.MemberID == w.MemberID && g.ProductCode == w.ProductCode && g.Status == w.Status &&
			g.StartsAt.Equal(w.StartsAt) && g.Version == w.Version && g.UpdatedAt.Equal(w.UpdatedAt) &&
			((g.EndsAt == nil) == (w.EndsAt == nil)) && (g.EndsAt == nil || g.EndsAt.Equal(*w.EndsAt))
		if !same {
			t.Fatalf("row %d differs from the ERP:\n got  %+v\n want %+v", i, g, w)
		}
	}
}

func mustRun(t *testing.T, s *Syncer) *Report {
	t.Helper()
	rep, err := s.Run(context.Background())
	if err != nil {
		t.Fatalf("run: %v (report %+v)", err, rep)
	}
	return rep
}

func TestRunCopiesTheFeedExactly(t *testing.T) {
	t.Parallel()
	b := setup(t, erpmock.Options{Records: 3000, Seed: 7})
	rep := mustRun(t, b.syncer(t, Config{Workers: 32, PageSize: 200, ChunkSize: 50}))
	if rep.Status != store.StatusSucceeded || rep.Inserted != 3000 || rep.Fetched != 3000 {
		t.Fatalf("first run: %+v", rep.Counters)
	}
	if l := rep.RecordLatency; l == nil || l.P50 <= 0 || l.P50 > l.P95 || l.P95 > l.P99 || l.P99 > l.Max {
		t.Fatalf("record latency: %+v", l)
	}
	assertTruth(t, b)
	// The checkpoint is the newest updated_at of the feed.
	cp, ok, err := b.store.Checkpoint(context.Background(), b.job)
	truth := b.mock.Truth()
	var newest time.Time
	for _, r := range truth {
		if r.UpdatedAt.After(newest) {
			newest = r.UpdatedAt
		}
	}
	if err != nil || !ok || !cp.Position.Equal(newest) || cp.Fence != rep.Fence {
		t.Fatalf("checkpoint %+v ok=%v err=%v; want position %s fence %d", cp, ok, err, newest, rep.Fence)
	}
	// A second run re-reads only the overlap, and changes nothing.
	rep2 := mustRun(t, b.syncer(t, Config{Workers: 4, Overlap: 10 * time.Millisecond}))
	if rep2.Inserted+rep2.Updated != 0 || rep2.Fetched == 0 || rep2.Fetched > 100 {
		t.Fatalf("second run should re-read a short overlap and write nothing: %+v", rep2.Counters)
	}
	// Changed records are picked up by the next run.
	changed := b.mock.Change(25)
	rep3 := mustRun(t, b.syncer(t, Config{}))
	if rep3.Updated != int64(len(changed)) {
		t.Fatalf("third run updated %d, want %d: %+v", rep3.Updated, len(changed), rep3.Counters)
	}
	assertTruth(t, b)
	runs, _ := b.store.Runs(context.Background(), b.job, 10)
	if len(runs) != 3 || runs[0].Updated != rep3.Updated || runs[0].Status != store.StatusSucceeded {
		t.Fatalf("run history: %+v", runs)
	}
}

func TestFlakyFeedDuplicatesStaleInvalidAndChangesWhilePaging(t *testing.T) {
	t.Parallel()
	b := setup(t, erpmock.Options{Records: 2000, Seed: 3, Faults: erpmock.Faults{
		ErrorRate: 0.1, RateLimitRate: 0.05, TruncateRate: 0.05, DuplicateRate: 0.5, StaleRate: 0.5,
		InvalidRate: 0.02, ChangeRate: 5,
	}})
	b.mock.SetFaults(erpmock.Faults{ErrorRate: 0.1, RateLimitRate: 0.05, RetryAfter: 0, TruncateRate: 0.05,
		DuplicateRate: 0.5, StaleRate: 0.5, ChangeRate: 5})
	rep := mustRun(t, b.syncer(t, Config{Workers: 32, PageSize: 100, ChunkSize: 20}))
	if rep.DuplicatesInFeed == 0 || rep.Invalid == 0 || rep.ERPRetries == 0 || rep.Updated == 0 {
		t.Fatalf("the faults should show in the report: %+v", rep.Counters)
	}
	// Records changed while the run paged came again later in the same run.
	assertTruth(t, b)
	n, _ := b.store.QuarantineCount(context.Background())
	if n != int64(len(b.mock.InvalidIDs())) {
		t.Fatalf("quarantined %d distinct payloads, the feed has %d invalid records", n, len(b.mock.InvalidIDs()))
	}
	var leaked int64
	b.store.DB().Raw("SELECT COUNT(*) FROM memberships WHERE erp_id IN ?", b.mock.InvalidIDs()).Scan(&leaked)
	if leaked != 0 {
		t.Fatalf("%d invalid records reached memberships", leaked)
	}
}

func TestTwoRunsAtOnceOneSkips(t *testing.T) {
	t.Parallel()
	b := setup(t, erpmock.Options{Records: 600, Seed: 1, Faults: erpmock.Faults{Latency: 30 * time.Millisecond}})
	var wg sync.WaitGroup
	reps := make([]*Report, 2)
	start := make(chan struct{})
	for i := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			rep, err := b.syncer(t, Config{PageSize: 50}).Run(context.Background())
			if err != nil {
				t.Errorf("run %d: %v", i, err)
			}
			reps[i] = rep
		}()
	}
	close(start)
	wg.Wait()
	statuses := map[string]int{}
	for _, r := range reps {
		statuses[r.Status]++
	}
	if statuses[store.StatusSucceeded] != 1 || statuses[store.StatusSkipped] != 1 {
		t.Fatalf("statuses %v, want one succeeded and one skipped", statuses)
	}
	assertTruth(t, b)
	runs, _ := b.store.Runs(context.Background(), b.job, 10)
	if len(runs) != 2 {
		t.Fatalf("run history has %d runs, want 2 (the skip recorded)", len(runs))
	}
}

func TestBackfillsBesideARunAndEachOther(t *testing.T) {
	t.Parallel()
	b := setup(t, erpmock.Options{Records: 4000, Seed: 11, Faults: erpmock.Faults{DuplicateRate: 0.3, StaleRate: 0.3}})
	b.mock.SetFaults(erpmock.Faults{DuplicateRate: 0.3, StaleRate: 0.3, ChangeRate: 3})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total store.Counters
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := Config{Mode: ModeBackfill, Since: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), Workers: 8, ChunkSize: 1 + i*40, PageSize: 250}
			if i == 0 {
				cfg = Config{Workers: 8, ChunkSize: 64}
			}
			rep, err := b.syncer(t, cfg).Run(context.Background())
			if err != nil {
				t.Errorf("sync %d: %v", i, err)
				return
			}
			mu.Lock()
			total.Inserted += rep.Inserted
			total.LockContended += rep.LockContended
			total.UniqueViolations += rep.UniqueViolations
			mu.Unlock()
		}()
	}
	wg.Wait()
	// Changes made after a sync's last page are caught by one more run.
	b.mock.SetFaults(erpmock.Faults{})
	mustRun(t, b.syncer(t, Config{Overlap: time.Hour}))
	assertTruth(t, b)
	if total.Inserted != 4000-int64(len(b.mock.InvalidIDs())) {
		t.Fatalf("inserted %d in all, want each record inserted once (%d)", total.Inserted, 4000)
	}
	if total.UniqueViolations != 0 {
		t.Fatalf("with every record locked, no insert should reach the UNIQUE index: %d", total.UniqueViolations)
	}
	t.Logf("lock_contended over 5 overlapping syncs: %d", total.LockContended)
}

func TestUniqueIndexCatchesARaceWhenLocksAreBypassed(t *testing.T) {
	t.Parallel()
	b := setup(t, erpmock.Options{Records: 300, Seed: 5})
	s := b.syncer(t, Config{ChunkSize: 30, Workers: 4})
	var once sync.Map
	// Another writer, holding no lock, inserts an older version of a
	// record between our read and our insert.
	s.hooks.beforeInsert = func(ctx context.Context, rows []store.Row) {
		m := rows[len(rows)/2]
		if _, loaded := once.LoadOrStore(m.Key, true); loaded {
			return
		}
		old := m
		old.Vals = append([]entity.Value(nil), m.Vals...)
		old.Version, old.Fence, old.Vals[1].S = 0, 1, "INTRUDER"
		if err := b.store.InsertRows(ctx, []store.Row{old}); err != nil {
			t.Errorf("intruder insert: %v", err)
		}
	}
	rep := mustRun(t, s)
	if rep.UniqueViolations != 10 {
		t.Fatalf("unique_violations = %d, want 10 (one per chunk)", rep.UniqueViolations)
	}
	assertTruth(t, b)

	// Two syncers whose locks do not see each other (different prefixes)
	// race on every insert; the UNIQUE index and the version rule still
	// give the truth.
	b2 := setup(t, erpmock.Options{Records: 2000, Seed: 9})
	rdb := testenv.Redis(t)
	var wg sync.WaitGroup
	var uv int64
	var mu sync.Mutex
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			locks := lock.New(rdb, &lock.Options{Prefix: testenv.RandomName("bypass:") + ":"})
			sy, err := New(Config{Job: b2.job, Mode: ModeBackfill, Since: time.Unix(0, 0), ChunkSize: 1 + i, Workers: 16}, b2.erp, b2.store, locks, zerolog.Nop())
			if err != nil {
				t.Error(err)
				return
			}
			rep, err := sy.Run(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			uv += rep.UniqueViolations
			mu.Unlock()
		}()
	}
	wg.Wait()
	assertTruth(t, b2)
	t.Logf("unique_violations with locks bypassed: %d", uv)
}

func TestStaleFenceIsRetriedNotDropped(t *testing.T) {
	t.Parallel()
	b := setup(t, erpmock.Options{Records: 50, Seed: 2})
	ctx := context.Background()
	// A writer from the future: a row with an older version but a fencing
	// token a little ahead of every grant made now (as a paused holder's
	// replacement would have). Our newer version must still land.
	truth := b.mock.Truth()
	target := truth[10]
	probe, err := b.locks.Obtain(ctx, "probe", time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	probe.Release(ctx)
	// 2 s ahead: on a loaded machine the run may start hundreds of ms late.
	ahead := probe.Fence() + int64(2*time.Second/time.Microsecond)
	m := store.Membership{ErpID: target.ErpID, MemberID: "OLD", ProductCode: "X", Status: "ACTIVE",
		StartsAt: target.StartsAt, Version: target.Version - 1, UpdatedAt: target.UpdatedAt, Fence: ahead}
	if m.Version < 1 {
		m.Version = 0
	}
	if err := b.store.Insert(ctx, []store.Membership{m}); err != nil {
		t.Fatal(err)
	}
	rep := mustRun(t, b.syncer(t, Config{ChunkSize: 10, MaxAttempts: 12}))
	if rep.StaleRejected == 0 {
		t.Fatalf("the write under an older token should have been refused first: %+v", rep.Counters)
	}
	assertTruth(t, b)
}

func TestFailedRecordHoldsTheCheckpointBack(t *testing.T) {
	t.Parallel()
	b := setup(t, erpmock.Options{Records: 1000, Seed: 4})
	truth := b.mock.Truth()
	bad := truth[500] // erp_id order is feed order for an unchanged feed
	s := b.syncer(t, Config{PageSize: 100, ChunkSize: 25, MaxAttempts: 2})
	s.hooks.failWrite = func(id string) error {
		if id == bad.ErpID {
			return errors.New("injected write failure")
		}
		return nil
	}
	rep, err := s.Run(context.Background())
	if err == nil || rep.Status != store.StatusFailed || rep.Failed != 1 || len(rep.FailedIDs) != 1 || rep.FailedIDs[0] != bad.ErpID {
		t.Fatalf("run with a failing record: err %v, report %+v %v", err, rep.Counters, rep.FailedIDs)
	}
	cp, ok, _ := b.store.Checkpoint(context.Background(), b.job)
	if ok && !cp.Position.Before(bad.UpdatedAt) {
		t.Fatalf("checkpoint %s moved past the failed record's updated_at %s", cp.Position, bad.UpdatedAt)
	}
	// The next run, without the fault, writes it and moves on.
	rep2 := mustRun(t, b.syncer(t, Config{Overlap: time.Millisecond}))
	if rep2.Inserted != 1 {
		t.Fatalf("the failed record should be inserted by the next run: %+v", rep2.Counters)
	}
	assertTruth(t, b)
}

func TestTrackerWatermark(t *testing.T) {
	var tr tracker
	t0 := time.Unix(1000, 0)
	p0 := tr.addPage(0, t0)
	p1 := tr.addPage(0, t0.Add(time.Second))
	tr.addChunk(0, p0)
	tr.addChunk(0, p1)
	tr.seal(0, p0, false, false)
	tr.seal(0, p1, false, false)
	tr.done(0, p1, false)
	if wm, moved := tr.take(); moved || !wm.IsZero() {
		t.Fatalf("watermark moved past an unfinished page: %v", wm)
	}
	tr.done(0, p0, false)
	if wm, moved := tr.take(); !moved || !wm.Equal(t0.Add(time.Second)) {
		t.Fatalf("watermark %v moved=%v, want both pages", wm, moved)
	}
	p2 := tr.addPage(0, t0.Add(2*time.Second))
	p3 := tr.addPage(0, t0.Add(3*time.Second))
	tr.seal(0, p2, true, false)
	tr.seal(0, p3, false, true)
	if wm, _ := tr.take(); !wm.Equal(t0.Add(time.Second)) {
		t.Fatalf("watermark passed a failed page: %v", wm)
	}
}

func TestUnstorableDatesAreQuarantined(t *testing.T) {
	ok := erp.Record{ErpID: "A", StartsAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), UpdatedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	old := ok
	old.ErpID = "B"
	old.StartsAt = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	future := ok
	future.ErpID = "C"
	future.UpdatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) // 9999-12-31T23:59:59-23:59
	recs, inv := erp.SplitUnstorable([]erp.Record{ok, old, future}, nil)
	if len(recs) != 1 || recs[0].ErpID != "A" || len(inv) != 2 || inv[0].ErpID != "B" || inv[1].ErpID != "C" {
		t.Fatalf("split: %v %v", recs, inv)
	}
	for _, q := range inv {
		if q.Reason == "" || len(q.Raw) == 0 {
			t.Errorf("quarantine entry without a reason or a payload: %+v", q)
		}
	}
}

func TestLatencyHistogram(t *testing.T) {
	var h latencyHist
	if h.summary() != nil {
		t.Fatal("summary of nothing")
	}
	for i := 1; i <= 100; i++ {
		h.observe(time.Duration(i)*time.Millisecond, 1)
	}
	s := h.summary()
	// Buckets are 20% wide: each percentile within 20% above the truth.
	for _, c := range []struct{ got, want float64 }{{s.P50, 50}, {s.P95, 95}, {s.P99, 99}, {s.Max, 100}} {
		if c.got < c.want || c.got > c.want*1.2 {
			t.Fatalf("summary %+v: %v not within 20%% above %v", s, c.got, c.want)
		}
	}
	h.observe(time.Hour, 1000) // weighted by records
	if s := h.summary(); s.P50 < 3600e3*0.99 {
		t.Fatalf("1000 records at 1h should own the median: %+v", s)
	}
}

func TestMaxDurationEndsASlowRunCleanly(t *testing.T) {
	t.Parallel()
	// 40 pages of 50 at 100 ms each: about 4 s, cut at 1 s.
	b := setup(t, erpmock.Options{Records: 2000, Seed: 8, Faults: erpmock.Faults{Latency: 100 * time.Millisecond}})
	rep, err := b.syncer(t, Config{PageSize: 50, ChunkSize: 25, MaxDuration: time.Second}).Run(context.Background())
	if !errors.Is(err, ErrMaxDuration) || rep.Status != store.StatusFailed {
		t.Fatalf("want ErrMaxDuration and status failed, got %v, %+v", err, rep)
	}
	if rep.Fetched == 0 || rep.Fetched >= 2000 || rep.Inserted != rep.Fetched || rep.Failed != 0 {
		t.Fatalf("the run should have written what it fetched, and not all: %+v", rep.Counters)
	}
	// Every lock was released: another run takes the job lock at once and
	// finishes from the checkpoint.
	b.mock.SetFaults(erpmock.Faults{})
	rep2 := mustRun(t, b.syncer(t, Config{}))
	if rep2.Status != store.StatusSucceeded || rep2.Inserted != 2000-rep.Inserted {
		t.Fatalf("next run: %+v, first run inserted %d", rep2.Counters, rep.Inserted)
	}
	assertTruth(t, b)
	runs, _ := b.store.Runs(context.Background(), b.job, 10)
	if len(runs) != 2 || runs[1].Status != store.StatusFailed || runs[1].Error == nil {
		t.Fatalf("run history: %+v", runs)
	}
}

// A first load reads versions before locking only until a chunk shows the
// table holds none of the records; a re-run reads them first, always, and
// takes no lock.
func TestPreReadOnlyWhenItPays(t *testing.T) {
	t.Parallel()
	b := setup(t, erpmock.Options{Records: 2000, Seed: 12})
	var obtained atomic.Int64
	b.locks = lock.New(testenv.Redis(t), &lock.Options{Prefix: b.prefix, Hooks: &lock.Hooks{
		Obtained: func(key string, _ time.Duration) {
			if strings.HasPrefix(key, "rec:") {
				obtained.Add(1)
			}
		},
	}})
	var preReads atomic.Int64
	run := func() *Report {
		s := b.syncer(t, Config{Workers: 1, PageSize: 500, ChunkSize: 100})
		s.hooks.preRead = func() { preReads.Add(1) }
		return mustRun(t, s)
	}
	if rep := run(); rep.Inserted != 2000 {
		t.Fatalf("first load: %+v", rep.Counters)
	}
	if n := preReads.Load(); n != 1 {
		t.Errorf("first load of 20 chunks read before locking %d times, want once", n)
	}
	if n := obtained.Load(); n != 2000 {
		t.Errorf("first load took %d record locks, want 2000", n)
	}
	assertTruth(t, b)
	preReads.Store(0)
	obtained.Store(0)
	if rep := run(); rep.Unchanged == 0 || rep.Inserted+rep.Updated != 0 {
		t.Fatalf("re-run: %+v", rep.Counters)
	}
	if n := obtained.Load(); n != 0 {
		t.Errorf("a re-run over current rows took %d record locks, want 0", n)
	}
	if preReads.Load() == 0 {
		t.Error("the re-run never read before locking")
	}
}

// A first load inserts each chunk before reading it. A chunk holding a row
// that exists already is refused whole by the UNIQUE index, takes the read
// path and ends right. A row written before under an earlier grant of its
// lock is no race; one written under a later grant than the chunk's (as
// when the chunk's lease ran out) counts as a unique violation. After a
// refused chunk the next ones read, twice as many after each refusal,
// before inserting first again.
func TestFirstLoadInsertsBeforeReading(t *testing.T) {
	t.Parallel()
	b := setup(t, erpmock.Options{Records: 2000, Seed: 14})
	feed := feedOrder(b.mock)
	// An older version under an earlier grant, and the latest version
	// under a grant later than any this run will get.
	w, l := feed[len(feed)/4], feed[3*len(feed)/4]
	rows := []store.Membership{
		earlierRow(w),
		{ErpID: l.ErpID, MemberID: l.MemberID, ProductCode: l.ProductCode, Status: l.Status,
			StartsAt: l.StartsAt, EndsAt: l.EndsAt, Version: l.Version, UpdatedAt: l.UpdatedAt, Fence: 1 << 62},
	}
	if err := b.store.Insert(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	var reads atomic.Int64
	s := b.syncer(t, Config{Workers: 1, PageSize: 500, ChunkSize: 100})
	s.hooks.readLocked = func() { reads.Add(1) }
	rep := mustRun(t, s)
	if rep.Inserted != int64(len(feed))-2 || rep.Updated != 1 || rep.Unchanged != 1 || rep.UniqueViolations != 1 {
		t.Fatalf("first load over an earlier and a later row: %+v", rep.Counters)
	}
	// The first chunk; the chunk of the earlier row and the 2 after it;
	// the chunk of the later row and the 4 after it.
	if n := reads.Load(); n != 9 {
		t.Errorf("20 chunks read under their locks %d times, want 9", n)
	}
	assertTruth(t, b)
}

// New records with a row that exists in every fourth chunk: each refused
// insert-first doubles the clean reads before the next try, so few chunks
// pay for an insert that is rolled back.
func TestInsertFirstBacksOffWhenChunksHoldRows(t *testing.T) {
	t.Parallel()
	b := setup(t, erpmock.Options{Records: 4000, Seed: 15})
	feed := feedOrder(b.mock)
	var rows []store.Membership
	for i := 350; i < len(feed); i += 400 {
		rows = append(rows, earlierRow(feed[i]))
	}
	if err := b.store.Insert(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	s := b.syncer(t, Config{Workers: 1, PageSize: 500, ChunkSize: 100})
	s.hooks.refused = func() { refused.Add(1) }
	rep := mustRun(t, s)
	if rep.Updated != int64(len(rows)) || rep.Inserted != int64(len(feed)-len(rows)) {
		t.Fatalf("%+v", rep.Counters)
	}
	// Refusals at the first two rows (chunks 3 and 7, after 1 and 2 clean
	// reads); the next try waits for 4 clean reads in a row, which rows 4
	// chunks apart never leave. Without the back-off all 10 refuse.
	if n := refused.Load(); n != 2 {
		t.Errorf("%d of %d rows refused an insert-first, want 2", n, len(rows))
	}
	assertTruth(t, b)
}

// feedOrder returns the mock's records in the order the feed serves them.
func feedOrder(m *erpmock.Mock) []erpmock.Record {
	feed := m.Truth()
	sort.Slice(feed, func(i, j int) bool {
		if !feed[i].UpdatedAt.Equal(feed[j].UpdatedAt) {
			return feed[i].UpdatedAt.Before(feed[j].UpdatedAt)
		}
		return feed[i].ErpID < feed[j].ErpID
	})
	return feed
}

// earlierRow is w's row one version back, written under the oldest grant.
func earlierRow(w erpmock.Record) store.Membership {
	return store.Membership{ErpID: w.ErpID, MemberID: "EARLIER", ProductCode: w.ProductCode, Status: w.Status,
		StartsAt: w.StartsAt, Version: w.Version - 1, UpdatedAt: w.UpdatedAt, Fence: 1}
}

// A run writes its heartbeat and its counters so far to its row while it
// runs, and its final counters once it has finished, which no later
// heartbeat overwrites.
func TestRunBeatsWhileRunning(t *testing.T) {
	t.Parallel()
	b := setup(t, erpmock.Options{Records: 400, Seed: 5, Faults: erpmock.Faults{Latency: 30 * time.Millisecond}})
	s := b.syncer(t, Config{Mode: ModeRun, PageSize: 20, Fetchers: 1, Workers: 2, ChunkSize: 20, HeartbeatEvery: 20 * time.Millisecond})
	done := make(chan *Report, 1)
	go func() {
		rep, err := s.Run(context.Background())
		if err != nil {
			t.Errorf("run: %v", err)
		}
		done <- rep
	}()
	row := func() store.Run { // the zero Run until the run has its row
		runs, err := b.store.Runs(context.Background(), b.job, 1)
		if err != nil {
			t.Errorf("Runs: %v", err)
		}
		if len(runs) == 0 {
			return store.Run{}
		}
		return runs[0]
	}
	var beats []store.Run
	for rep := (*Report)(nil); rep == nil; {
		select {
		case rep = <-done:
			fin := row()
			if fin.Status != store.StatusSucceeded || fin.HeartbeatAt == nil || fin.Fetched != rep.Fetched || fin.Fetched < 400 {
				t.Fatalf("finished row: %s, fetched %d; report fetched %d", fin.Status, fin.Fetched, rep.Fetched)
			}
			time.Sleep(100 * time.Millisecond)
			if again := row(); again.Fetched != fin.Fetched || !again.HeartbeatAt.Equal(*fin.HeartbeatAt) {
				t.Fatalf("the row changed after the finish: %+v, then %+v", fin, again)
			}
		case <-time.After(5 * time.Millisecond):
			if r := row(); r.Status == store.StatusRunning && r.Fetched > 0 && r.Fetched < 400 {
				beats = append(beats, r)
			}
		}
	}
	// At 30 ms a page of 20, the 400 records take 600 ms or more: a beat
	// every 20 ms shows the run part way through, its heartbeat moving.
	if len(beats) < 2 || !beats[len(beats)-1].HeartbeatAt.After(*beats[0].HeartbeatAt) || beats[len(beats)-1].Fetched <= beats[0].Fetched {
		t.Fatalf("%d rows seen part way through, want two or more with the heartbeat and fetched moving on: %+v", len(beats), beats)
	}
}
