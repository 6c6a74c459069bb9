package store_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// testDSN is a fresh database of the matrix (testenv.DSN).
func testDSN(t testing.TB) string { return testenv.DSN(t) }

func setup(t *testing.T) *store.Store {
	s, _ := testenv.MigratedStore(t)
	return s
}

// pick is my on MySQL, pg on PostgreSQL: the statements a test expects
// of s's dialect.
func pick(s *store.Store, my, pg []string) []string {
	if s.Dialect() == store.Postgres {
		return pg
	}
	return my
}

// nowSQL is the database's clock in UTC to the millisecond, in s's
// dialect: for rows a test writes by hand.
func nowSQL(s *store.Store) string {
	if s.Dialect() == store.Postgres {
		return "CURRENT_TIMESTAMP(3)"
	}
	return "UTC_TIMESTAMP(3)"
}

// mysqlStore is MigratedStore on MySQL whatever the matrix says: for the
// tests of what only MySQL has (collations, sql_mode).
func mysqlStore(t *testing.T) (*store.Store, string) {
	t.Helper()
	return migratedStore(t, testenv.MySQLDSN(t))
}

// migratedStore migrates the database of dsn and opens it.
func migratedStore(t *testing.T, dsn string) (*store.Store, string) {
	t.Helper()
	ctx := context.Background()
	if _, err := store.Migrate(ctx, dsn); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	s, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dsn
}

func TestMigrateConcurrentAndIdempotent(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	applied := make(chan int, 6)
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := store.Migrate(ctx, dsn)
			if err != nil {
				errs <- err
				return
			}
			applied <- len(res.Applied)
		}()
	}
	wg.Wait()
	close(errs)
	close(applied)
	for err := range errs {
		t.Fatalf("concurrent migrate: %v", err)
	}
	total := 0
	for n := range applied {
		total += n
	}
	ms, _ := store.Migrations()
	if total != len(ms) {
		t.Fatalf("migrations applied %d times in all, want each once (%d)", total, len(ms))
	}
	res, err := store.Migrate(ctx, dsn)
	if err != nil || len(res.Applied) != 0 {
		t.Fatalf("second migrate: applied %v, err %v", res, err)
	}
	s, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CheckSchema(ctx); err != nil {
		t.Fatalf("CheckSchema after migrate: %v", err)
	}
}

func TestCheckSchemaNotMigrated(t *testing.T) {
	t.Parallel()
	s := emptyDatabase(t)
	ctx := context.Background()
	if err := s.CheckSchema(ctx); !errors.Is(err, store.ErrNotMigrated) {
		t.Fatalf("CheckSchema on empty database = %v, want ErrNotMigrated", err)
	}
}

// emptyDatabase returns a store on a database that exists and holds no
// table.
func emptyDatabase(t *testing.T) *store.Store {
	dsn := testDSN(t)
	ctx := context.Background()
	testenv.CreateDatabase(t, dsn)
	s, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	_, err := store.Open(context.Background(), "root@tcp(127.0.0.1:1)/x", &store.Options{PingTimeout: time.Second})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open on a closed port = %v, want ErrUnavailable", err)
	}
}

func m(id string, version, fence int64) store.Membership {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	return store.Membership{ErpID: id, MemberID: "U" + id, ProductCode: "P", Status: "ACTIVE",
		StartsAt: now, Version: version, UpdatedAt: now.Add(time.Duration(version) * time.Millisecond), Fence: fence}
}

// guards is what c holds of the version, fence and soft-delete guards.
func guards(c store.Current) store.Current {
	return store.Current{Version: c.Version, Fence: c.Fence, Deleted: c.Deleted}
}

func TestGuardedWrites(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	if err := s.Insert(ctx, []store.Membership{m("A", 2, 10), m("B", 1, 10)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Insert(ctx, []store.Membership{m("C", 1, 10), m("A", 3, 11)}); !errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("insert over an existing erp_id = %v, want ErrDuplicate", err)
	}
	if v, _ := s.Versions(ctx, []string{"C"}); len(v) != 0 {
		t.Fatalf("a failed multi-row insert left rows: %v", v)
	}
	cases := []struct {
		name    string
		w       store.Membership
		want    bool
		version int64
	}{
		{"lower version refused", m("A", 1, 20), false, 2},
		{"same version refused", m("A", 2, 20), false, 2},
		{"older fence refused", m("A", 5, 9), false, 2},
		{"higher version, newer fence", m("A", 5, 20), true, 5},
		{"same fence, higher version", m("A", 6, 20), true, 6},
	}
	for _, c := range cases {
		ok, err := s.Update(ctx, c.w)
		if err != nil || ok != c.want {
			t.Fatalf("%s: Update = %v, %v; want %v", c.name, ok, err, c.want)
		}
		v, _ := s.Versions(ctx, []string{"A"})
		if v["A"].Version != c.version {
			t.Fatalf("%s: version %d, want %d", c.name, v["A"].Version, c.version)
		}
	}
	// Multi-row upsert: B newer (lands), A older fence (refused), D absent (inserted).
	if err := s.Upsert(ctx, []store.Membership{m("B", 4, 30), m("A", 9, 1), m("D", 1, 30)}); err != nil {
		t.Fatal(err)
	}
	v, _ := s.Versions(ctx, []string{"A", "B", "D"})
	if guards(v["A"]) != (store.Current{Version: 6, Fence: 20}) || guards(v["B"]) != (store.Current{Version: 4, Fence: 30}) || v["D"].Version != 1 {
		t.Fatalf("after upsert: %v", v)
	}
}

// The fenced checkpoint write detects its refusal whatever the DSN says:
// with clientFoundRows=true MySQL reports a row it found and left as it
// was as affected.
func TestCheckpointFencing(t *testing.T) {
	t.Parallel()
	foundRows := []bool{false, true}
	if testenv.Postgres() {
		foundRows = foundRows[:1] // a go-sql-driver setting
	}
	for _, foundRows := range foundRows {
		t.Run(fmt.Sprintf("clientFoundRows=%v", foundRows), func(t *testing.T) {
			t.Parallel()
			_, dsn := testenv.MigratedStore(t)
			if foundRows {
				dsn += "&clientFoundRows=true"
			}
			s, err := store.Open(context.Background(), dsn, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			checkpointFencing(t, s)
		})
	}
}

func checkpointFencing(t *testing.T, s *store.Store) {
	ctx := context.Background()
	t0 := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	if _, ok, _ := s.Checkpoint(ctx, "j"); ok {
		t.Fatal("checkpoint before any save")
	}
	if err := s.SaveCheckpoint(ctx, "j", t0, 100, "r1"); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveCheckpoint(ctx, "j", t0, 100, "r1"); err != nil {
		t.Fatalf("the same values again: %v", err)
	}
	if err := s.SaveCheckpoint(ctx, "j", t0.Add(time.Hour), 100, "r1"); err != nil {
		t.Fatalf("same fence again: %v", err)
	}
	if err := s.SaveCheckpoint(ctx, "j", t0.Add(2*time.Hour), 200, "r2"); err != nil {
		t.Fatal(err)
	}
	for _, pos := range []time.Time{t0.Add(5 * time.Hour), t0.Add(2 * time.Hour)} {
		err := s.SaveCheckpoint(ctx, "j", pos, 100, "r1")
		if !errors.Is(err, store.ErrFenced) {
			t.Fatalf("older fence at %s = %v, want ErrFenced", pos, err)
		}
	}
	cp, _, _ := s.Checkpoint(ctx, "j")
	if !cp.Position.Equal(t0.Add(2*time.Hour)) || cp.Fence != 200 || cp.RunID != "r2" {
		t.Fatalf("checkpoint moved by an older fence: %+v", cp)
	}
	// A position is stored truncated to the millisecond, never rounded up
	// past a record not yet read.
	if err := s.SaveCheckpoint(ctx, "j", t0.Add(3*time.Hour+999_900*time.Microsecond/1000), 300, "r3"); err != nil {
		t.Fatal(err)
	}
	if cp, _, _ := s.Checkpoint(ctx, "j"); !cp.Position.Equal(t0.Add(3 * time.Hour)) {
		t.Fatalf("position %s, want %s truncated", cp.Position, t0.Add(3*time.Hour))
	}
}

func TestQuarantineDedupes(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	q := []store.Quarantined{{ErpID: "X", Reason: "status: not in enum", Payload: []byte(`{"erp_id":"X","status":"NOPE"}`)}}
	for i := 0; i < 3; i++ {
		if err := s.Quarantine(ctx, "j", "r", q); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.QuarantineCount(ctx)
	if err != nil || n != 1 {
		t.Fatalf("quarantine count = %d, %v; want 1", n, err)
	}
	var seen int64
	s.DB().Raw("SELECT seen_count FROM quarantined_records").Scan(&seen)
	if seen != 3 {
		t.Fatalf("seen_count = %d, want 3", seen)
	}
}

// TestInvalidCopiesSince: each Quarantine of a job takes the job's next
// number, and the copies it stored or counted are read back by it, placed
// by the version and updated_at they had (truncated to the millisecond, as
// a mark keeps it); copies that cannot be placed, and an updated_at no
// DATETIME holds, are not. A payload quarantined again moves to the new
// number.
func TestInvalidCopiesSince(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	at := time.Date(2025, 3, 4, 5, 6, 7, 891_234_000, time.UTC)
	q := func(id string, v int64, u time.Time, payload string) store.Quarantined {
		return store.Quarantined{ErpID: id, Reason: "bad", Payload: []byte(payload), Version: v, UpdatedAt: u}
	}
	seq := func(job string, want int64) {
		t.Helper()
		if got, err := s.QuarantineSeq(ctx, job); err != nil || got != want {
			t.Fatalf("QuarantineSeq(%q) = %d, %v; want %d", job, got, err, want)
		}
	}
	since := func(after, upto int64, want ...store.InvalidCopy) {
		t.Helper()
		got, err := s.InvalidCopiesSince(ctx, "j", after, upto)
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(got, func(x, y store.InvalidCopy) int {
			return cmp.Or(strings.Compare(x.ErpID, y.ErpID), cmp.Compare(x.Version, y.Version))
		})
		ok := len(got) == len(want)
		for i := range want {
			ok = ok && got[i].ErpID == want[i].ErpID && got[i].Version == want[i].Version && got[i].UpdatedAt.Equal(want[i].UpdatedAt)
		}
		if !ok {
			t.Fatalf("copies of (%d, %d] = %+v, want %+v", after, upto, got, want)
		}
	}
	seq("j", 0)
	if err := s.Quarantine(ctx, "j", "r", []store.Quarantined{
		q("A", 7, at, `{"a":1}`),
		q("A", 0, at.Add(time.Hour), `{"a":2}`),
		q("B", 0, time.Time{}, `{"b":1}`), // cannot be placed
		q("C", 3, time.Date(900, 1, 1, 0, 0, 0, 0, time.UTC), `{"c":1}`),
		q("D", 0, time.Date(900, 1, 1, 0, 0, 0, 0, time.UTC), `{"d":1}`), // nothing left to place it by
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Quarantine(ctx, "other", "r", []store.Quarantined{q("A", 8, at, `{"a":4}`)}); err != nil {
		t.Fatal(err)
	}
	seq("j", 1)
	seq("other", 1)
	since(0, 1,
		store.InvalidCopy{ErpID: "A", UpdatedAt: store.Millis(at.Add(time.Hour))},
		store.InvalidCopy{ErpID: "A", Version: 7, UpdatedAt: store.Millis(at)},
		store.InvalidCopy{ErpID: "C", Version: 3})
	if err := s.Quarantine(ctx, "j", "r2", []store.Quarantined{q("A", 7, at, `{"a":1}`), q("E", 1, at, `{"e":1}`)}); err != nil {
		t.Fatal(err)
	}
	seq("j", 2)
	since(1, 2,
		store.InvalidCopy{ErpID: "A", Version: 7, UpdatedAt: store.Millis(at)},
		store.InvalidCopy{ErpID: "E", Version: 1, UpdatedAt: store.Millis(at)})
	since(0, 1,
		store.InvalidCopy{ErpID: "A", UpdatedAt: store.Millis(at.Add(time.Hour))},
		store.InvalidCopy{ErpID: "C", Version: 3})
}

func TestRunHistory(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	start := time.Now().UTC().Truncate(time.Millisecond)
	r := &store.Run{RunID: "a", Job: "j", Mode: "run", Status: store.StatusRunning, Host: "h", PID: 1, StartedAt: start}
	if err := s.StartRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	fin := start.Add(time.Second)
	r.Status, r.FinishedAt, r.Inserted = store.StatusSucceeded, &fin, 42
	if err := s.FinishRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	sk := &store.Run{RunID: "b", Job: "j", Mode: "run", Status: store.StatusSkipped, Host: "h", PID: 2, StartedAt: fin, FinishedAt: &fin}
	if err := s.StartRun(ctx, sk); err != nil {
		t.Fatal(err)
	}
	runs, err := s.Runs(ctx, "j", 10)
	if err != nil || len(runs) != 2 {
		t.Fatalf("Runs = %v, %v", runs, err)
	}
	if runs[0].RunID != "b" || runs[0].Status != store.StatusSkipped || runs[1].Inserted != 42 || runs[1].Status != store.StatusSucceeded {
		t.Fatalf("history newest first with counters: %+v", runs)
	}
}

// A running run's row carries a heartbeat from its start; Heartbeat moves
// it to the database's clock with the counters so far while the row says
// running, and not after its finish, which keeps the last one; a row not
// heard from for longer than Lost's bound is lost, a finished one never.
func TestRunHeartbeat(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	start := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	r := &store.Run{RunID: "hb", Job: "j", Mode: "run", Status: store.StatusRunning, Host: "h", PID: 1, StartedAt: start}
	if err := s.StartRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	if r.HeartbeatAt != nil {
		t.Errorf("StartRun set the caller's HeartbeatAt: the report carries none")
	}
	row := func() store.Run { return newestRun(t, s, "j") }
	if got := row(); got.HeartbeatAt == nil || !got.HeartbeatAt.Equal(start) {
		t.Fatalf("heartbeat at start %v, want %v", got.HeartbeatAt, start)
	}
	now, err := s.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := row(); !got.Lost(now, 59*time.Minute) || got.Lost(now, 2*time.Hour) {
		t.Errorf("a run last heard from an hour ago: Lost(59m) %v, Lost(2h) %v; want true, false", got.Lost(now, 59*time.Minute), got.Lost(now, 2*time.Hour))
	}
	if ok, err := s.Heartbeat(ctx, "hb", &store.Counters{Fetched: 7, Inserted: 5, Quarantined: 1}); err != nil || !ok {
		t.Fatalf("Heartbeat = %v, %v", ok, err)
	}
	got := row()
	if got.HeartbeatAt == nil || got.HeartbeatAt.Before(now.Add(-time.Second)) || got.Fetched != 7 || got.Inserted != 5 || got.Quarantined != 1 {
		t.Fatalf("after a heartbeat: at %v (database clock %v), fetched %d, inserted %d, quarantined %d", got.HeartbeatAt, now, got.Fetched, got.Inserted, got.Quarantined)
	}
	if got.Lost(now, time.Minute) {
		t.Errorf("a run heard from now is lost")
	}
	if ok, err := s.Heartbeat(ctx, "hb", nil); err != nil || !ok || row().Fetched != 7 {
		t.Fatalf("a heartbeat without counters: %v, %v, fetched %d; want the counters kept", ok, err, row().Fetched)
	}
	last := *row().HeartbeatAt
	fin := time.Now().UTC()
	r.Status, r.FinishedAt, r.Fetched = store.StatusSucceeded, &fin, 9
	if err := s.FinishRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Heartbeat(ctx, "hb", &store.Counters{Fetched: 1}); err != nil || ok {
		t.Fatalf("Heartbeat after the finish = %v, %v; want nothing written", ok, err)
	}
	got = row()
	if got.Status != store.StatusSucceeded || got.Fetched != 9 || got.HeartbeatAt == nil || !got.HeartbeatAt.Equal(last) {
		t.Fatalf("finished row: %s, fetched %d, heartbeat %v; want succeeded, 9, the last beat %v", got.Status, got.Fetched, got.HeartbeatAt, last)
	}
	if got.Lost(now.Add(24*time.Hour), time.Minute) {
		t.Errorf("a finished run is lost")
	}
	sk := &store.Run{RunID: "hb-skip", Job: "j", Mode: "run", Status: store.StatusSkipped, Host: "h", PID: 2, StartedAt: fin, FinishedAt: &fin}
	if err := s.StartRun(ctx, sk); err != nil {
		t.Fatal(err)
	}
	if got := row(); got.RunID != "hb-skip" || got.HeartbeatAt != nil {
		t.Errorf("a skipped run's row: %s, heartbeat %v; want none", got.RunID, got.HeartbeatAt)
	}
}

// newestRun is job's newest run; the test fails unless it has one.
func newestRun(t *testing.T, s *store.Store, job string) store.Run {
	t.Helper()
	runs, err := s.Runs(context.Background(), job, 1)
	if err != nil || len(runs) != 1 {
		t.Fatalf("Runs = %v, %v", runs, err)
	}
	return runs[0]
}

// Beat writes heartbeats with the snapshot's counters while it runs, and
// none once stop has returned.
func TestBeat(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	start := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	if err := s.StartRun(ctx, &store.Run{RunID: "beat", Job: "j", Mode: "run", Status: store.StatusRunning, Host: "h", PID: 1, StartedAt: start}); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	stop := s.Beat(ctx, "beat", 20*time.Millisecond, func() store.Counters { return store.Counters{Fetched: n.Add(1)} }, func(err error) { t.Error(err) })
	row := func() store.Run { return newestRun(t, s, "j") }
	deadline := time.Now().Add(time.Minute)
	for r := row(); r.Fetched < 3; r = row() {
		if time.Now().After(deadline) {
			t.Fatalf("no third heartbeat within a minute: %+v", r)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	after := row()
	if after.HeartbeatAt == nil || !after.HeartbeatAt.After(start) {
		t.Fatalf("heartbeat %v, want after the start %v", after.HeartbeatAt, start)
	}
	time.Sleep(100 * time.Millisecond)
	if again := row(); again.Fetched != after.Fetched || !again.HeartbeatAt.Equal(*after.HeartbeatAt) {
		t.Fatalf("a heartbeat after stop: %+v, then %+v", after, again)
	}
	stop() // a second stop returns
}

// Instances quarantine the same replayed payloads at once; none may fail.
func TestQuarantineConcurrently(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	var qs []store.Quarantined
	for i := 0; i < 20; i++ {
		qs = append(qs, store.Quarantined{ErpID: fmt.Sprint("X", i), Reason: "bad", Payload: []byte(fmt.Sprintf(`{"erp_id":"X%d"}`, i))})
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8*20)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := append([]store.Quarantined(nil), qs...)
			if g%2 == 1 {
				slices.Reverse(mine)
			}
			for i := 0; i < 20; i++ {
				if err := s.Quarantine(ctx, "j", fmt.Sprint("r", g), mine); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent quarantine: %v", err)
	}
	if n, _ := s.QuarantineCount(ctx); n != 20 {
		t.Fatalf("quarantine count %d, want 20", n)
	}
}

// A batch that carries one payload twice stores it once, seen twice: on
// PostgreSQL, whose upsert refuses a batch with one key twice, as on MySQL.
func TestQuarantineDuplicateInBatch(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	dup := store.Quarantined{ErpID: "X", Reason: "bad", Payload: []byte(`{"erp_id":"X"}`)}
	other := store.Quarantined{ErpID: "Y", Reason: "bad", Payload: []byte(`{"erp_id":"Y"}`)}
	for round, want := range []int64{2, 4} {
		if err := s.Quarantine(ctx, "j", fmt.Sprint("r", round), []store.Quarantined{dup, other, dup}); err != nil {
			t.Fatal(err)
		}
		var seen []int64
		if err := s.DB().Raw("SELECT seen_count FROM quarantined_records ORDER BY erp_id").Scan(&seen).Error; err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(seen, []int64{want, want / 2}) {
			t.Fatalf("round %d: seen_count %v, want [%d %d]", round, seen, want, want/2)
		}
	}
}

// The deletion guard's window sums the deletions of the job's reconciles
// since a time, forced ones not counted; a checkpoint reset obeys the
// fence; QuarantinedRows counts the live rows marked.
func TestDeletedSinceResetAndMarkedRows(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	t0 := time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)
	for i, r := range []store.Run{
		{RunID: "old", Mode: "reconcile", StartedAt: t0.Add(-time.Hour), Counters: store.Counters{Deleted: 100}},
		{RunID: "a", Mode: "reconcile", StartedAt: t0, Counters: store.Counters{Deleted: 3}},
		{RunID: "forced", Mode: "reconcile", StartedAt: t0.Add(time.Minute), Forced: true, Counters: store.Counters{Deleted: 50}},
		{RunID: "b", Mode: "reconcile", StartedAt: t0.Add(2 * time.Minute), Counters: store.Counters{Deleted: 4}},
		{RunID: "run", Mode: "run", StartedAt: t0.Add(3 * time.Minute), Counters: store.Counters{Deleted: 1000}},
	} {
		r.Job, r.Status, r.Host, r.PID = "j", store.StatusSucceeded, "h", i
		if err := s.StartRun(ctx, &r); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.ReconcileDeletedSince(ctx, "j", "reconcile", t0); err != nil || n != 7 {
		t.Fatalf("deleted since: %d, %v; want 7", n, err)
	}
	if n, err := s.ReconcileDeletedSince(ctx, "other", "reconcile", t0); err != nil || n != 0 {
		t.Fatalf("deleted since, another job: %d, %v; want 0", n, err)
	}

	if err := s.SaveCheckpoint(ctx, "w", t0, 10, "r1"); err != nil {
		t.Fatal(err)
	}
	if err := s.ResetCheckpoint(ctx, "w", 9, "r0"); err != nil {
		t.Fatal(err)
	}
	if cp, _, _ := s.Checkpoint(ctx, "w"); !cp.Position.Equal(t0) {
		t.Fatalf("an older token reset the checkpoint: %+v", cp)
	}
	if err := s.ResetCheckpoint(ctx, "w", 10, "r2"); err != nil {
		t.Fatal(err)
	}
	if cp, _, _ := s.Checkpoint(ctx, "w"); !cp.Position.Equal(store.CheckpointStart) || cp.RunID != "r2" {
		t.Fatalf("reset: %+v, want at %s", cp, store.CheckpointStart)
	}

	for _, row := range []struct{ id, marked, deleted string }{{"A", nowSQL(s), "NULL"}, {"B", nowSQL(s), nowSQL(s)}, {"C", "NULL", "NULL"}} {
		err := s.DB().Exec(`INSERT INTO memberships (erp_id, member_id, product_code, status, starts_at, erp_version, erp_updated_at, fence_token,
 created_at, updated_at, quarantined_at, deleted_at) VALUES (?, 'U', 'P', 'ACTIVE', `+nowSQL(s)+`, 1, `+nowSQL(s)+`, 1, `+nowSQL(s)+`, `+nowSQL(s)+`, `+row.marked+`, `+row.deleted+`)`, row.id).Error
		if err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.QuarantinedRows(ctx); err != nil || n != 1 {
		t.Fatalf("quarantined rows: %d, %v; want 1 (A: B is deleted, C unmarked)", n, err)
	}
}
