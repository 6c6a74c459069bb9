package guarantee

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/odata"
	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/reconcile"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/lock"
)

// world is a migrated database and the Redis client that feeds use one
// after another; each feed empties the tables first and takes its own
// job name and lock prefix.
type world struct {
	st  *store.Store
	dsn string
	rdb *redis.Client
	// entities are the tables of entities a config file added (typed_test.go).
	entities []string
}

// pool hands out worlds to parallel feeds.
type pool chan *world

func newPool(t testing.TB, n int) pool {
	p := make(pool, n)
	rdb := testenv.Redis(t)
	for range n {
		st, dsn := testenv.MigratedStore(t)
		p <- &world{st: st, dsn: dsn, rdb: rdb}
	}
	return p
}

// postgres reports whether the world's database is PostgreSQL.
func (w *world) postgres() bool { return testenv.IsPostgres(w.dsn) }

func (w *world) reset(t testing.TB) {
	for _, table := range append([]string{"memberships", "sync_checkpoints", "sync_runs", "quarantined_records", "sync_table_owners", "erpsync_events", "erpsync_relay_fence"}, w.entities...) {
		if err := w.st.DB().Exec("DELETE FROM " + table).Error; err != nil {
			t.Fatalf("empty %s: %v", table, err)
		}
	}
}

// versions reads erp_id -> erp_version of every row of tab.
func (w *world) versions(ctx context.Context, tab *table) (map[string]int64, error) {
	return w.versionsWhere(ctx, tab, "TRUE")
}

// versionsWhere reads erp_id -> erp_version of the rows of tab where cond
// holds.
func (w *world) versionsWhere(ctx context.Context, tab *table, cond string) (map[string]int64, error) {
	return rowsWhere(ctx, w, tab, "erp_version", cond, func(v *int64) []any { return []any{v} })
}

// stamp is a row's erp_version and erp_updated_at.
type stamp struct {
	v  int64
	at time.Time
}

// stamps reads erp_id -> (erp_version, erp_updated_at) of every row of
// tab.
func (w *world) stamps(ctx context.Context, tab *table) (map[string]stamp, error) {
	return rowsWhere(ctx, w, tab, "erp_version, erp_updated_at", "TRUE", func(s *stamp) []any { return []any{&s.v, &s.at} })
}

// marks reads erp_id -> quarantined_version of the rows of tab marked
// quarantined.
func (w *world) marks(ctx context.Context, tab *table) (map[string]sql.NullInt64, error) {
	return rowsWhere(ctx, w, tab, "quarantined_version", "quarantined_at IS NOT NULL", func(v *sql.NullInt64) []any { return []any{v} })
}

// rowsWhere reads erp_id -> T of the rows of tab where cond holds: cols
// are the columns after the erp_id, scanned into what dest returns.
func rowsWhere[T any](ctx context.Context, w *world, tab *table, cols, cond string, dest func(*T) []any) (map[string]T, error) {
	rows, err := w.st.DB().WithContext(ctx).Raw("SELECT " + tab.erpID + ", " + cols + " FROM " + tab.name + " WHERE " + cond).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]T{}
	for rows.Next() {
		var id string
		var v T
		if err := rows.Scan(append([]any{&id}, dest(&v)...)...); err != nil {
			return nil, err
		}
		out[id] = v
	}
	return out, rows.Err()
}

var (
	binOnce   sync.Once
	binPath   string
	binRemove func()
	binErr    error
)

// erpsyncBin builds bin/erpsync once per test binary.
func erpsyncBin(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() { binPath, binRemove, binErr = testenv.BuildTemp("./cmd/erpsync") })
	if binErr != nil {
		t.Fatalf("build erpsync: %v", binErr)
	}
	return binPath
}

// feed is one scenario running in a world.
type feed struct {
	t      testing.TB
	w      *world
	sc     *scenario
	erp    *erpSim
	url    string
	job    string
	prefix string
	locks  locker
	odata  *odata.Source // the in-process executions' OData source; nil: the REST API
	// tabs are the tables the feed writes, one per entity: memberships,
	// or those of the scenario's config file (typed_test.go).
	tabs  []*table
	execs atomic.Int64
	stop  chan struct{} // ends the watcher
	downs chan []string // the watcher's findings
	mu    sync.Mutex
	// deletions are the start and the rows soft-deleted of each reconcile
	// without Force, by table: the window's guard counts the deletions of
	// the job's reconciles, and a table is one job's.
	deletions map[string][]deletion
	// running are the processes of the feed that run now (mu).
	running map[*proctest.Proc]bool
	// sink receives the change events of a feed whose entity records them
	// (events_test.go); nil in others.
	sink *sink
}

type deletion struct {
	started time.Time
	deleted int64
}

// runFeed runs sc in w and fails t on every breach of the guarantee.
func runFeed(t testing.TB, w *world, sc *scenario) {
	w.reset(t)
	e := newERP(sc.ERPSeed, sc.Base, sc.Adv)
	for _, r := range sc.Records {
		e.put(r)
	}
	e.invalid = sc.Invalid
	e.face = newFace(sc.OData)
	if sc.Typed != nil {
		e.docs = sc.Typed.DocsOData
	}
	srv := httptest.NewServer(e)
	defer srv.Close()
	f := &feed{
		t: t, w: w, sc: sc, erp: e, url: srv.URL,
		job: testenv.RandomName("guarantee-"), prefix: testenv.RandomName("guarantee:") + ":",
		stop: make(chan struct{}), downs: make(chan []string, 1),
	}
	f.locks, f.odata = f.newLocks(), f.newODataSource()
	f.tabs = sc.tables()
	if sc.Typed != nil && sc.Typed.Both {
		f.job = membershipJob // examples/memberships.yaml's entity keeps the built-in job
	}
	if mon := f.monitorLocks(); mon != nil {
		defer mon.check()
	}
	defer func() {
		f.dropLocks(t)
		if t.Failed() {
			t.Logf("scenario: %s", sc)
		}
	}()
	f.sink = f.startSink()
	go f.watch()
	for i, wave := range sc.Waves {
		e.thaw(sc.Budget)
		var wg sync.WaitGroup
		for _, x := range wave {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f.execute(x)
			}()
		}
		wg.Wait()
		e.freeze()
		var reborn []string
		if sc.Rebirth > 0 {
			live, _ := w.versionsWhere(context.Background(), f.tabs[0], "deleted_at IS NULL")
			reborn = e.deleteOf(sortedKeys(live), sc.Rebirth)
		}
		f.settle(fmt.Sprintf("after wave %d", i))
		e.advance(sc.Advance[i])
		if f.between(reborn) && i == len(sc.Waves)-1 {
			f.settle(fmt.Sprintf("after wave %d's recreations at a lower version and records turned invalid", i))
		}
	}
	f.lives()
	f.inPlace()
	f.linesInPlace()
	if sc.Sigterm {
		f.sigterm()
		f.settle("after the SIGTERM scenario")
	}
	f.sink.finish()
	close(f.stop)
	if downs := <-f.downs; len(downs) > 0 {
		t.Errorf("a row's erp_version went down: %s", strings.Join(downs, "; "))
	}
}

// between changes the frozen ERP after a wave's settling: it recreates
// reborn at a lower version, and turns records with a row invalid (and
// some invalid ones valid again). It reports whether anything changed.
func (f *feed) between(reborn []string) bool {
	f.erp.rebirth(reborn)
	changed := len(reborn) > 0
	if f.sc.Spoil > 0 {
		rows, _ := f.w.versions(context.Background(), f.tabs[0])
		changed = f.erp.spoilOf(sortedKeys(rows), f.sc.Spoil) > 0 || changed
	}
	return changed
}

// lives runs, after the waves, the records that go through a change of
// theirs again (Relive, Climb), on the frozen ERP, each step followed by a
// settling: the Relive ones leave, come back unchanged, leave and come back
// again; the Climb ones are changed, deleted, recreated at a lower version,
// then changed to the version they were deleted at and to one past it, as
// are the records Rebirth recreated.
func (f *feed) lives() {
	if f.sc.Relive == 0 && f.sc.Climb == 0 {
		return
	}
	live, err := f.w.versionsWhere(context.Background(), f.tabs[0], "deleted_at IS NULL")
	if err != nil {
		f.t.Errorf("read live rows: %v", err)
		return
	}
	e := f.erp
	relive := e.pickLives(sortedKeys(live), f.sc.Relive, nil, false)
	climb := e.pickLives(sortedKeys(live), f.sc.Climb, relive, true)
	f.t.Logf("lives: %v leave and come back unchanged, twice; %v climb back in a new life", relive, climb)
	steps := []struct {
		when string
		do   func() bool // reports whether the ERP changed
	}{
		{"after the records that relive left and those that climb changed", func() bool {
			e.leave(relive)
			e.changeEach(climb)
			return len(relive)+len(climb) > 0
		}},
		{"after the records that relive came back unchanged and those that climb left", func() bool {
			e.comeBack(relive)
			e.leave(climb)
			return len(relive)+len(climb) > 0
		}},
		{"after the records that relive left again and those that climb came back at a lower version", func() bool {
			e.leave(relive)
			e.rebirth(climb)
			return len(relive)+len(climb) > 0
		}},
		{"after the records that relive came back unchanged again and the reborn ones climbed to the version they were deleted at", func() bool {
			e.comeBack(relive)
			to := e.climb(0)
			if len(to) > 0 {
				f.t.Logf("lives: reborn records climbed to %v, the versions their previous lives were deleted at", to)
			}
			return len(relive)+len(to) > 0
		}},
		{"after the reborn ones climbed past the version they were deleted at", func() bool {
			return len(e.climb(1)) > 0
		}},
	}
	for _, st := range steps {
		if st.do() {
			f.settle(st.when)
		}
	}
}

// watch polls memberships until stop and reports every version that went
// down between two polls, but for a restore by a new life of the record:
// a record the ERP recreated at a lower version, stamped later.
func (f *feed) watch() {
	seen := map[string]stamp{}
	var downs []string
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, tab := range f.tabs {
			vs, err := f.w.stamps(context.Background(), tab)
			if err != nil {
				continue
			}
			for id, s := range vs {
				prev, ok := seen[tab.name+"/"+id]
				if ok && s.v < prev.v && !(s.at.After(prev.at) && f.erp.wasReborn(id)) && len(downs) < 10 {
					downs = append(downs, fmt.Sprintf("%s %s v%d -> v%d", tab.name, id, prev.v, s.v))
				}
				seen[tab.name+"/"+id] = s
			}
		}
		select {
		case <-f.stop:
			f.downs <- downs
			return
		case <-tick.C:
		}
	}
}

func (f *feed) newExec() string { return "e" + strconv.FormatInt(f.execs.Add(1), 10) }

// execute runs one execution of a wave.
func (f *feed) execute(x execSpec) {
	if f.sc.Typed != nil {
		f.executeTyped(x)
		return
	}
	f.executeOn(x, f.tabs[0])
}

// executeOn runs one execution of a wave on the entity of tab.
func (f *feed) executeOn(x execSpec, tab *table) {
	if x.Creep > 0 {
		f.creep(x, tab)
		return
	}
	if x.Proc {
		f.process(x, tab)
		return
	}
	if x.StopAt > 0 {
		f.stopThenRun(x, tab)
		return
	}
	id := f.newExec()
	if x.Mode == "reconcile" {
		f.reconcile(context.Background(), id, x, tab)
		return
	}
	rep, err := f.inProcess(context.Background(), id, x, 2*time.Second)
	if err == nil && rep.Status == store.StatusSucceeded {
		f.checkServed(id, x, "in-process "+x.String(), tab)
	}
}

func (f *feed) syncerConfig(x execSpec, ttl time.Duration) syncer.Config {
	mode := x.Mode
	if mode == "reconcile" {
		mode = syncer.ModeRun // as the cli configures the syncer a reconcile writes through
	}
	return syncer.Config{
		Job: f.job, Mode: mode, Since: x.Since, Until: x.Until, Shard: x.Shard, Shards: x.Shards,
		Workers: x.Workers, Fetchers: x.Fetchers, PageSize: x.PageSize, ChunkSize: x.ChunkSize, LockTTL: ttl,
		Overlap: x.Overlap, CheckpointEvery: 20 * time.Millisecond, MaxAttempts: 20,
	}
}

// syncer returns a syncer of this process that reads the ERP as
// execution id, and its ERP client.
func (f *feed) syncer(id string, x execSpec, ttl time.Duration) (*syncer.Syncer, syncer.Source) {
	c := f.odataSource(id) // nil unless the feed reads the OData face
	if c == nil {
		rc, err := erp.New(erp.Config{BaseURL: f.url + "/x/" + id, Timeout: time.Minute, MinBackoff: time.Millisecond, MaxBackoff: 50 * time.Millisecond})
		if err != nil {
			f.t.Fatalf("erp client: %v", err)
		}
		c = rc
	}
	s, err := syncer.New(f.syncerConfig(x, ttl), c, f.w.st, f.locks, zerolog.Nop())
	if err != nil {
		f.t.Fatalf("syncer: %v", err)
	}
	return s, c
}

// inProcess runs the syncer of this process as execution id.
func (f *feed) inProcess(ctx context.Context, id string, x execSpec, ttl time.Duration) (*syncer.Report, error) {
	s, _ := f.syncer(id, x, ttl)
	return s.Run(ctx)
}

// creep runs a run, then x.Creep reconciles one after the other, each
// after the ERP deleted x.CreepDelete records, as long as it keeps at least
// half as many as the feed began with, and one.
func (f *feed) creep(x execSpec, tab *table) {
	ctx := context.Background()
	rx := execSpec{Mode: "run", PageSize: 50, ChunkSize: 10, Workers: 4, Overlap: 3 * time.Second}
	if _, err := f.runOnce(ctx, f.newExec(), rx, tab); err != nil {
		f.t.Logf("the run before the creeping deletions: %v", err)
	}
	for range x.Creep {
		if len(f.erp.truth())-x.CreepDelete >= max(1, (len(f.sc.Records)+1)/2) { // the rest of the feed needs records
			f.erp.deleteSome(x.CreepDelete)
		}
		f.reconcile(ctx, f.newExec(), x, tab)
	}
}

// limit parses a --max-delete or --max-delete-total value.
func (f *feed) limit(s string) *reconcile.Limit {
	l, err := reconcile.ParseLimit(s)
	if err != nil {
		f.t.Fatalf("limit: %v", err)
	}
	return &l
}

// reconcile runs a reconcile in this process as execution id, wired as
// `erpsync reconcile` wires it. A reconcile the guard refused must have
// written nothing; one must not have soft-deleted a record the ERP held,
// unchanged, from the end of its first pass to its end; one without Force
// must keep the deletions of the feed's reconciles without Force within
// its MaxDeleteTotal.
func (f *feed) reconcile(ctx context.Context, id string, x execSpec, tab *table) (*reconcile.Report, error) {
	cfg := reconcile.Config{PageSize: x.PageSize, Fetchers: x.Fetchers, Force: x.Force}
	if x.MaxDelete != "" {
		cfg.MaxDelete = f.limit(x.MaxDelete)
	}
	if x.MaxDeleteTotal != "" {
		cfg.MaxDeleteTotal = f.limit(x.MaxDeleteTotal)
	}
	var hide []string
	if x.Hide {
		live, _ := f.w.versionsWhere(ctx, tab, "deleted_at IS NULL")
		hide = sortedKeys(live)
	}
	f.erp.reconciling(tab.log(id), hide)
	if f.sc.Typed != nil {
		return f.reconcileChecked(ctx, id, x, tab, func() (*reconcile.Report, error) { return f.reconcileProcess(id, x, tab) })
	}
	s, c := f.syncer(id, x, 2*time.Second)
	if x.Race {
		// The reconcile's first record locks come after its comparison.
		f.erp.deleteSome(2)
		var once sync.Once
		s, _ = syncer.New(f.syncerConfig(x, 2*time.Second), c, f.w.st, &hookLocks{locker: f.locks, before: func() {
			once.Do(func() {
				since := f.erp.clock().Add(-time.Second)
				f.erp.recreateAll()
				bx := execSpec{Mode: "backfill", Since: since, PageSize: 50, ChunkSize: 10, Workers: 4}
				if _, err := f.inProcess(ctx, f.newExec(), bx, 2*time.Second); err != nil {
					f.t.Logf("%s: the racing backfill: %v", id, err)
				}
			})
		}}, zerolog.Nop())
	}
	rc, err := reconcile.New(cfg, s, c, f.w.st, zerolog.Nop())
	if err != nil {
		f.t.Fatalf("reconciler: %v", err)
	}
	return f.reconcileChecked(ctx, id, x, tab, func() (*reconcile.Report, error) { return rc.Run(ctx) })
}

// reconcileChecked runs the reconcile id (run) and checks what it did.
func (f *feed) reconcileChecked(ctx context.Context, id string, x execSpec, tab *table, run func() (*reconcile.Report, error)) (*reconcile.Report, error) {
	before, berr := f.w.versionsWhere(ctx, tab, "deleted_at IS NOT NULL")
	rep, err := run()
	held, hidden := f.erp.endHold(tab.log(id))
	if berr == nil {
		f.checkDeleted(id, x, before, held, hidden, err == nil && rep.Status == store.StatusSucceeded, tab)
	}
	if rep != nil && !x.Force {
		f.checkWindow(id, x, tab, rep)
	}
	if errors.Is(err, reconcile.ErrRefused) && rep != nil {
		if n := rep.Deleted + rep.Inserted + rep.Updated + rep.Restored; n > 0 {
			f.t.Errorf("%s reconcile %s was refused (%s), yet it wrote %d rows", id, x, rep.Refused, n)
		}
	}
	return rep, err
}

func (f *feed) env(id string) *proctest.Env {
	return &proctest.Env{T: f.t, Bin: erpsyncBin(f.t), DSN: f.processDSN(), Postgres: f.w.postgres(), ERPURL: f.erpURL(id), Job: f.job, Prefix: f.prefix}
}

// processDSN is the DSN of the feed's processes: the world's, and, in a
// feed with LockLoss on PostgreSQL or MariaDB, with sessions the server
// ends once idle in a transaction for a second
// (idle_in_transaction_session_timeout, MariaDB's idle_transaction_timeout;
// erpsync's own being the lock TTL and at least 10s): a process paused
// inside a transaction (1.5s, pauseWriters) has it rolled back under it,
// rows and change events, and must write its records again. MySQL has no
// such setting.
func (f *feed) processDSN() string {
	if f.sc.Typed == nil || !f.sc.Typed.LockLoss {
		return f.w.dsn
	}
	idle := "idle_in_transaction_session_timeout=1000"
	if !f.w.postgres() {
		if !testenv.MariaDB(f.t) {
			return f.w.dsn
		}
		idle = "idle_transaction_timeout=1"
	}
	sep := "?"
	if strings.Contains(f.w.dsn, "?") {
		sep = "&"
	}
	return f.w.dsn + sep + idle
}

func processArgs(x execSpec, report string) []string {
	args := []string{x.Mode, "--page-size", strconv.Itoa(x.PageSize), "--chunk-size", strconv.Itoa(x.ChunkSize),
		"--workers", strconv.Itoa(x.Workers), "--lock-ttl", "1s", "--max-attempts", "20", "--report", report,
		"--max-invalid", "100%"} // the model serves invalid items freely
	if x.Fetchers > 0 {
		args = append(args, "--fetchers", strconv.Itoa(x.Fetchers))
	}
	switch x.Mode {
	case "run":
		return append(args, "--overlap", x.Overlap.String())
	case "reconcile":
		return append(args, reconcileArgs(x)...)
	}
	args = append(args, "--since", x.Since.Format(time.RFC3339Nano))
	if !x.Until.IsZero() {
		args = append(args, "--until", x.Until.Format(time.RFC3339Nano))
	}
	if x.Shards > 1 {
		args = append(args, "--shard", fmt.Sprintf("%d/%d", x.Shard, x.Shards))
	}
	return args
}

// process runs x as a bin/erpsync process, killed with SIGKILL before its
// KillAt-th page when KillAt is set and then run again until it is not
// skipped.
func (f *feed) process(x execSpec, tab *table) {
	dir := f.t.TempDir()
	for attempt := 0; attempt < 30; attempt++ {
		id := f.newExec()
		report := filepath.Join(dir, id+".json")
		env := f.env(id)
		var proc atomic.Pointer[proctest.Proc]
		started := make(chan struct{})
		kill := attempt == 0 && x.KillAt > 0
		if kill {
			f.erp.onPage(tab.log(id), func(n int) {
				if n == x.KillAt {
					<-started
					proc.Load().Signal(syscall.SIGKILL)
					proc.Load().Wait()
				}
			})
		}
		began := time.Now()
		p := env.Start(append(processArgs(x, report), f.procFlags(tab)...)...)
		proc.Store(p)
		close(started)
		res := f.wait(p)
		f.t.Logf("process %s (%s): exit %d after %s", id, x, res.Code, time.Since(began).Round(time.Millisecond))
		if res.Code == -1 {
			continue // killed: run it again
		}
		rep, err := proctest.ReadReport(report)
		if err != nil {
			f.t.Errorf("process %s (%s) exit %d: %v\n%s", id, x, res.Code, err, res.Stdout)
			return
		}
		switch rep["status"] {
		case store.StatusSucceeded:
			f.checkServed(id, x, "process "+x.String(), tab)
			return
		case store.StatusSkipped:
			time.Sleep(200 * time.Millisecond)
			continue
		default:
			return // failed: the guarantee promises nothing of it
		}
	}
}

// wait waits for p, one of the running processes meanwhile.
func (f *feed) wait(p *proctest.Proc) proctest.Result {
	f.mu.Lock()
	if f.running == nil {
		f.running = map[*proctest.Proc]bool{}
	}
	f.running[p] = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.running, p)
		f.mu.Unlock()
	}()
	return p.Wait()
}

// checkServed checks that every valid version execution id was served is
// in the table at that version or higher, now that it succeeded.
func (f *feed) checkServed(id string, x execSpec, what string, tab *table) {
	served, requests := f.erp.served(tab.log(id))
	vs, err := f.w.versions(context.Background(), tab)
	if err != nil {
		f.t.Errorf("read versions: %v", err)
		return
	}
	var lost []string
	for _, erpID := range sortedKeys(served) {
		if x.Shards > 1 && syncer.ShardOf(tab.keyText(erpID), x.Shards) != x.Shard {
			continue
		}
		if v := served[erpID]; vs[erpID] < v {
			lost = append(lost, fmt.Sprintf("%s served v%d, table v%d", erpID, v, vs[erpID]))
		}
	}
	if len(lost) > 0 {
		f.t.Errorf("%s %s reported succeeded after %d pages, yet %s is behind what it was served: %s",
			id, what, requests, tab.name, strings.Join(lost, "; "))
	}
}

// hookLocks runs before ahead of every batch of record locks.
type hookLocks struct {
	locker
	before func()
}

func (h *hookLocks) ObtainMany(ctx context.Context, keys []string, ttl time.Duration) ([]*lock.Lock, error) {
	h.before()
	return h.locker.ObtainMany(ctx, keys, ttl)
}

// checkDeleted checks, after reconcile id, that it soft-deleted no record
// the ERP held, unchanged, from the end of its first pass to its end (held;
// hidden is the record it hid during its first pass), and, when it
// succeeded, no row at a version the ERP made after its scan began: such a
// row was written after the comparison read it, and the writer must win.
// before holds the rows soft-deleted before it started; reconciles of a job
// run one at a time.
func (f *feed) checkDeleted(id string, x execSpec, before map[string]int64, held map[string]bool, hidden string, succeeded bool, tab *table) {
	after, err := f.w.versionsWhere(context.Background(), tab, "deleted_at IS NOT NULL")
	if err != nil {
		f.t.Errorf("read soft-deleted rows: %v", err)
		return
	}
	var bad, heldGone []string
	for _, erpID := range sortedKeys(after) {
		v := after[erpID]
		if _, was := before[erpID]; was {
			continue
		}
		if succeeded && f.erp.bornAfter(erpID, v, tab.log(id)) {
			bad = append(bad, fmt.Sprintf("%s v%d", erpID, v))
		}
		switch {
		case held[erpID] && erpID == hidden:
			heldGone = append(heldGone, fmt.Sprintf("%s v%d (hidden from its first pass)", erpID, v))
		case held[erpID]:
			heldGone = append(heldGone, fmt.Sprintf("%s v%d", erpID, v))
		}
	}
	if len(bad) > 0 {
		f.t.Errorf("%s reconcile %s soft-deleted versions the ERP made after its scan began (written after its comparison) in %s: %s",
			id, x, tab.name, strings.Join(bad, "; "))
	}
	if len(heldGone) > 0 {
		f.t.Errorf("%s reconcile %s soft-deleted records the ERP held, unchanged, from the end of its first pass to its end, in %s: %s",
			id, x, tab.name, strings.Join(heldGone, "; "))
	}
}

// checkWindow checks, after reconcile id without Force of tab, that the
// rows soft-deleted by the feed's reconciles of tab without Force started
// before it, plus its own, stay within its MaxDeleteTotal when that is a
// count (the feed runs within the default window), and records its
// deletions.
func (f *feed) checkWindow(id string, x execSpec, tab *table, rep *reconcile.Report) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var earlier int64
	for _, d := range f.deletions[tab.name] {
		if d.started.Before(rep.StartedAt) {
			earlier += d.deleted
		}
	}
	if x.MaxDeleteTotal != "" {
		if l := f.limit(x.MaxDeleteTotal); !l.IsPercent && earlier+rep.Deleted > l.Count {
			f.t.Errorf("%s reconcile %s (%s) soft-deleted %d rows of %s after the feed's earlier reconciles of it without --force soft-deleted %d: %d in the window, above --max-delete-total %s",
				id, x, rep.Status, rep.Deleted, tab.name, earlier, earlier+rep.Deleted, x.MaxDeleteTotal)
		}
	}
	if f.deletions == nil {
		f.deletions = map[string][]deletion{}
	}
	f.deletions[tab.name] = append(f.deletions[tab.name], deletion{started: rep.StartedAt, deleted: rep.Deleted})
}

// settle runs `run` on the frozen ERP until one succeeds, then a forced
// reconcile until one succeeds, then compares the table with the model.
func (f *feed) settle(when string) {
	var wg sync.WaitGroup
	for _, tab := range f.tabs { // the entities of a config file at once
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.settleOn(when, tab)
		}()
	}
	wg.Wait()
}

// settleOn is settle on the entity of tab.
func (f *feed) settleOn(when string, tab *table) {
	x := execSpec{Mode: "run", PageSize: 50, ChunkSize: 10, Workers: 4, Overlap: 3 * time.Second}
	rows, rerr := f.w.versions(context.Background(), tab)
	ok := f.untilSucceeded(when, "run", func(id string) (string, error) {
		status, err := f.runOnce(context.Background(), id, x, tab)
		if err == nil && status == store.StatusSucceeded {
			f.checkServed(id, x, "the run "+when, tab)
			if rerr == nil {
				f.checkMarked(id, when, rows, tab)
			}
		}
		return status, err
	})
	if !ok {
		return
	}
	rx := execSpec{Mode: "reconcile", PageSize: 50, ChunkSize: 10, Workers: 4, Force: true}
	if f.sc.Reconcile && !f.untilSucceeded(when, "reconcile", func(id string) (string, error) {
		rep, err := f.reconcile(context.Background(), id, rx, tab)
		if rep == nil {
			return "", err
		}
		return rep.Status, err
	}) {
		return
	}
	f.compare(when, f.sc.Reconcile, tab)
	f.sink.once(when)
}

// runOnce runs x once as execution id on the entity of tab: the syncer of
// this process, or, in a feed of a config file, a bin/erpsync process. It
// returns the run's status.
func (f *feed) runOnce(ctx context.Context, id string, x execSpec, tab *table) (string, error) {
	if f.sc.Typed != nil {
		return f.runProcess(id, x, tab)
	}
	rep, err := f.inProcess(ctx, id, x, 2*time.Second)
	if rep == nil {
		return "", err
	}
	return rep.Status, err
}

// checkMarked checks, after the run id of a settling succeeded, that each
// row it found (rows: erp_id -> erp_version, read before it began) below
// the version of the invalid current copy of its record it was served is
// marked quarantined, at that version when it is readable.
func (f *feed) checkMarked(id, when string, rows map[string]int64, tab *table) {
	served, spoilt := f.erp.servedSpoilt(tab.log(id)), f.erp.spoilt()
	marks, err := f.w.marks(context.Background(), tab)
	if err != nil {
		f.t.Errorf("read marks: %v", err)
		return
	}
	var missed []string
	for _, erpID := range sortedKeys(served) {
		v, had := rows[erpID]
		it, ok := spoilt[erpID]
		if !had || !ok || it.ver != served[erpID] || it.ver > 0 && v >= it.ver {
			continue
		}
		if m, marked := marks[erpID]; !marked || it.ver > 0 && m.Int64 != it.ver {
			missed = append(missed, fmt.Sprintf("%s row v%d, served invalid at %s stamped %s, mark %s", erpID, v, verString(it.ver), it.at.Format(tsLayout), markString(m, marked)))
		}
	}
	if len(missed) > 0 {
		f.t.Errorf("%s: the run %s succeeded, yet rows of %s it was served the invalid current copy of are not marked quarantined at its version: %s; the rows now: %s",
			when, id, tab.name, strings.Join(missed, "; "), f.w.rowStates(tab, missed))
	}
}

// rowStates describes, for a failure's message, the rows of tab whose
// erp_ids begin the entries of missed: their guard columns as they are now.
func (w *world) rowStates(tab *table, missed []string) string {
	var out []string
	for _, m := range missed {
		id, _, _ := strings.Cut(m, " ")
		var v, fence int64
		var at time.Time
		var deleted, marked bool
		err := w.st.DB().Raw("SELECT erp_version, fence_token, erp_updated_at, deleted_at IS NOT NULL, quarantined_at IS NOT NULL FROM "+tab.name+" WHERE "+tab.erpID+" = ?", id).
			Row().Scan(&v, &fence, &at, &deleted, &marked)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", id, err))
			continue
		}
		out = append(out, fmt.Sprintf("%s v%d fence %d erp_updated_at %s deleted %t marked %t", id, v, fence, at.UTC().Format(tsLayout), deleted, marked))
	}
	return strings.Join(out, "; ")
}

func verString(v int64) string {
	if v == 0 {
		return "an unreadable version"
	}
	return fmt.Sprintf("v%d", v)
}

func markString(m sql.NullInt64, marked bool) string {
	switch {
	case !marked:
		return "none"
	case !m.Valid:
		return "quarantined_version NULL"
	}
	return fmt.Sprintf("quarantined_version %d", m.Int64)
}

// untilSucceeded runs exec as new executions until one succeeds, and
// reports whether one did.
func (f *feed) untilSucceeded(when, what string, exec func(id string) (string, error)) bool {
	for failed, skipped := 0, 0; ; {
		status, err := exec(f.newExec())
		if err == nil && status == store.StatusSucceeded {
			return true
		}
		if status == store.StatusSkipped {
			skipped++ // a killed process's job lock, until its TTL ends
		} else {
			failed++
		}
		if failed == 3 || skipped == 20 {
			f.t.Errorf("%s: no %s succeeded on the frozen ERP: last %s %v", when, what, status, err)
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// compare checks that memberships is the model: one live row per valid
// record of the ERP, at its latest version and fields, not marked
// quarantined; for each record whose current copy is invalid that has a
// row, a live one with the data of a valid version the ERP had, marked at
// the invalid copy's version when a reconcile (reconciled) followed the
// last change; a soft-deleted row for each record the ERP deleted that has
// a row, with the data of a version the ERP had, no newer than its last;
// nothing else.
func (f *feed) compare(when string, reconciled bool, tab *table) {
	got, err := tab.read(context.Background(), f.w)
	if err != nil {
		f.t.Errorf("%s: read %s: %v", when, tab.name, err)
		return
	}
	truth, gone, spoilt := f.erp.truth(), f.erp.deleted(), f.erp.spoilt()
	var diffs []string
	seen := map[string]bool{}
	for _, r := range got {
		g, deleted, marked, mark := r.rec, r.deleted, r.marked, r.mark
		if seen[g.ID] {
			diffs = append(diffs, "two rows for "+g.ID)
		}
		seen[g.ID] = true
		if r.flaw != "" {
			diffs = append(diffs, fmt.Sprintf("%s at %s: %s", g.ID, g, r.flaw))
		}
		w, ok := truth[g.ID]
		d, isGone := gone[g.ID]
		inv, isBad := spoilt[g.ID]
		if marked && !isBad {
			diffs = append(diffs, fmt.Sprintf("%s at %s is marked quarantined (%s), yet the ERP's current copy of it is valid or gone", g.ID, g, markString(mark, marked)))
		}
		switch {
		case isBad && deleted:
			diffs = append(diffs, fmt.Sprintf("%s is soft-deleted at %s, the ERP's current copy of it is invalid (%s)", g.ID, g, verString(inv.ver)))
		case isBad && !f.erp.had(g):
			diffs = append(diffs, fmt.Sprintf("%s is %s, no valid version the ERP had (its current copy is invalid, %s)", g.ID, g, verString(inv.ver)))
		case isBad && reconciled && (!marked || inv.ver > 0 && mark.Int64 != inv.ver):
			diffs = append(diffs, fmt.Sprintf("%s at %s is marked %s after a reconcile, the ERP's current copy of it is invalid at %s, updated %s", g.ID, g, markString(mark, marked), verString(inv.ver), inv.at.Format(time.RFC3339Nano)))
		case isBad:
		case ok && deleted:
			diffs = append(diffs, fmt.Sprintf("%s is soft-deleted at %s, the ERP has %s", g.ID, g, w))
		case ok && !sameRecord(g, w):
			diffs = append(diffs, fmt.Sprintf("%s is %s, the ERP has %s", g.ID, g, w))
		case ok:
		case isGone && !deleted:
			diffs = append(diffs, fmt.Sprintf("%s is live at %s, the ERP deleted it at %s", g.ID, g, d))
		case isGone && (g.Version > d.Version || !f.erp.had(g)):
			diffs = append(diffs, fmt.Sprintf("%s is soft-deleted at %s, not a version the ERP had before deleting it at %s", g.ID, g, d))
		case isGone:
		default:
			diffs = append(diffs, fmt.Sprintf("a row for %s, which is no valid record", g.ID))
		}
	}
	for _, id := range sortedKeys(truth) {
		if !seen[id] {
			diffs = append(diffs, fmt.Sprintf("no row for %s (the ERP has %s)", id, truth[id]))
		}
	}
	if len(diffs) > 0 {
		cp, _, _ := f.w.st.Checkpoint(context.Background(), tab.jobOf(f))
		f.t.Errorf("%s: %s differs from the ERP's latest records in %d ways (job checkpoint %s, ERP clock %s): %s",
			when, tab.name, len(diffs), cp.Position.Format(tsLayout), f.erp.clock().Format(tsLayout), strings.Join(diffs[:min(len(diffs), 8)], "; "))
	}
}

// row is one row of an entity's table as the model reads it: the record
// it holds, its marks, and what is wrong with it on its own ("": nothing).
type row struct {
	rec             record
	deleted, marked bool
	mark            sql.NullInt64
	flaw            string
}

// readMemberships reads every row of memberships.
func readMemberships(ctx context.Context, w *world) ([]row, error) {
	return scanRows(ctx, w, "SELECT erp_id, member_id, product_code, status, starts_at, ends_at, erp_version, erp_updated_at, deleted_at IS NOT NULL, quarantined_at IS NOT NULL, quarantined_version FROM memberships",
		func(rows *sql.Rows) (row, error) {
			var r row
			g := &r.rec
			err := rows.Scan(&g.ID, &g.Member, &g.Product, &g.Status, &g.Starts, &g.Ends, &g.Version, &g.Updated, &r.deleted, &r.marked, &r.mark)
			return r, err
		})
}

// scanRows runs query and reads each of its rows with scan.
func scanRows(ctx context.Context, w *world, query string, scan func(*sql.Rows) (row, error)) ([]row, error) {
	rows, err := w.st.DB().WithContext(ctx).Raw(query).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		r, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func sameRecord(a, b record) bool {
	return a.ID == b.ID && a.Member == b.Member && a.Product == b.Product && a.Status == b.Status &&
		a.Starts.Equal(b.Starts) && a.Version == b.Version && a.Updated.Equal(b.Updated) &&
		(a.Ends == nil) == (b.Ends == nil) && (a.Ends == nil || a.Ends.Equal(*b.Ends)) && a.Lines == b.Lines
}

func (r record) String() string {
	s := fmt.Sprintf("v%d (%s %s %s updated %s)", r.Version, r.Status, r.Member, r.Product, r.Updated.Format(tsLayout))
	if r.Lines > 0 {
		s += fmt.Sprintf(" lines r%d", r.Lines)
	}
	return s
}
