package guarantee

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
)

var (
	flagFeeds = flag.Int("guarantee.feeds", 300, "feeds TestGuaranteeSweep generates")
	flagSeed  = flag.Int("guarantee.seed", -1, "run only this seed of TestGuaranteeSweep")
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	stopTopology()
	if binRemove != nil {
		binRemove()
	}
	os.Exit(code)
}

// sweepOpts sizes the feed of a seed: small feeds, processes in one of
// eight, the SIGTERM scenario in one of forty.
func sweepOpts(seed uint64) opts {
	return opts{MaxRecords: 24, MaxWaves: 2, MaxExecs: 3, Procs: seed%8 == 5, Sigterm: seed%40 == 17}
}

// parallelism is -test.parallel: how many feeds run at once.
func parallelism() int {
	n, err := strconv.Atoi(flag.Lookup("test.parallel").Value.String())
	if err != nil || n < 1 {
		return 2
	}
	return n
}

// TestGuaranteeSweep runs the feeds of seeds 0 to -guarantee.feeds - 1
// (at most 30 with -short).
func TestGuaranteeSweep(t *testing.T) {
	p := newPool(t, parallelism())
	feeds := *flagFeeds
	if testing.Short() {
		feeds = min(feeds, 30)
	}
	sweep(t, p, feeds, func(seed uint64) *scenario { return generate(newSource(seed, nil), sweepOpts(seed)) })
}

// sweep runs the feeds that gen makes of seeds 0 to feeds - 1 (only
// -guarantee.seed when given), in parallel, each in a world of p.
func sweep(t *testing.T, p pool, feeds int, gen func(seed uint64) *scenario) {
	for seed := range feeds {
		if *flagSeed >= 0 && seed != *flagSeed {
			continue
		}
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			w := <-p
			defer func() { p <- w }()
			runFeed(t, w, gen(uint64(seed)))
		})
	}
}

// FuzzGuarantee generates a feed from a seed and bytes; the bytes decide
// the generator's first choices.
func FuzzGuarantee(f *testing.F) {
	f.Add(uint64(0), []byte{})
	p := newPool(f, 1)
	fuzzing := flag.Lookup("test.fuzz").Value.String() != ""
	f.Fuzz(func(t *testing.T, seed uint64, data []byte) {
		w := <-p
		defer func() { p <- w }()
		o := sweepOpts(seed)
		if fuzzing {
			// A fuzz worker runs neither erpsync processes nor the SIGTERM
			// scenario: a worker exited with status 2 during it. `go test`
			// runs the seed corpus with both.
			o.Procs, o.Sigterm = false, false
		}
		runFeed(t, w, generate(newSource(seed, data), o))
	})
}

// TestSigtermKeepsTheJobLock is the SIGTERM scenario on its own: a run
// whose records in hand are held up after SIGTERM keeps the job lock
// through its grace period, longer than its lock TTL, so a second run
// started meanwhile is skipped.
func TestSigtermKeepsTheJobLock(t *testing.T) {
	p := newPool(t, 1)
	sc := generate(newSource(17, nil), opts{MaxRecords: 24, MaxWaves: 1, MaxExecs: 1, Sigterm: true})
	runFeed(t, <-p, sc)
}

// sigterm stops a run with SIGTERM while row locks the test holds
// keep its records in hand from being written, waits past its job lock's
// TTL, starts a second run, then lets the writes through. The second run
// must have been skipped: the first still held the job lock, renewed
// through its grace period.
func (f *feed) sigterm() {
	ctx := context.Background()
	f.erp.freeze()
	if len(f.erp.truth()) == 0 {
		// The adversary deleted every valid record: the run would have
		// nothing in hand at its SIGTERM. They come back first.
		f.erp.recreateAll()
	}
	f.erp.changeAll()
	db, err := f.w.st.DB().DB()
	if err != nil {
		f.t.Fatalf("sql db: %v", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		f.t.Fatalf("begin: %v", err)
	}
	defer tx.Rollback()
	var held int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM (SELECT erp_id FROM memberships FOR UPDATE) AS held").Scan(&held); err != nil {
		f.t.Fatalf("lock rows: %v", err)
	}
	id := f.newExec()
	report := filepath.Join(f.t.TempDir(), id+".json")
	// --max-invalid 100%: a window whose first page holds only invalid
	// items would otherwise stop the run there (exit 2), before it has
	// records in hand.
	first := f.env(id).Start(append([]string{"run", "--lock-ttl", "1s", "--grace", "20s", "--page-size", "7", "--chunk-size", "5",
		"--overlap", "3s", "--max-invalid", "100%", "--report", report}, f.procFlags(f.tabs[0])...)...)
	if !proctest.Eventually(30*time.Second, func() bool { return f.erp.done(id) }) {
		f.t.Fatalf("the first run never read the feed to its end")
	}
	time.Sleep(300 * time.Millisecond) // its records are in hand, waiting for the row locks
	termAt := time.Now()
	if err := first.Signal(syscall.SIGTERM); err != nil {
		res := first.Wait()
		f.t.Fatalf("the first run ended (exit %d) before its SIGTERM, with %d rows held up: %v\n%s", res.Code, held, err, res.Stdout)
	}
	time.Sleep(3500 * time.Millisecond) // more than three TTLs of the job lock
	type result struct {
		rep *syncer.Report
		err error
	}
	second := make(chan result, 1)
	go func() {
		x := execSpec{Mode: "run", PageSize: 50, ChunkSize: 10, Workers: 4, Overlap: 3 * time.Second}
		rep, err := f.inProcess(ctx, f.newExec(), x, time.Second)
		second <- result{rep, err}
	}()
	time.Sleep(time.Second)
	tx.Rollback()
	res := first.Wait()
	r2 := <-second
	rep, err := proctest.ReadReport(report)
	if err != nil {
		f.t.Fatalf("first run exit %d: %v\n%s", res.Code, err, res.Stdout)
	}
	checkInterruptExit(f.t, res, rep)
	finished, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(rep["finished_at"]))
	if r2.rep == nil {
		f.t.Fatalf("second run: %v", r2.err)
	}
	firstErr, _ := rep["error"].(string)
	switch {
	case r2.rep.Status == store.StatusSkipped || !r2.rep.StartedAt.Before(finished):
	case strings.Contains(firstErr, "job lock"):
		// The first run's watchdog missed a renewal (a loaded machine):
		// a lease cannot promise more, and fencing keeps the rows right.
		f.t.Logf("the first run lost its job lock (%s); the second run's start proves nothing", firstErr)
	default:
		f.t.Errorf("two runs of the job at once: the first (%d rows held up, SIGTERM at %s, grace 20s, lock TTL 1s) wrote until %s (%s %s), "+
			"yet a second run took the job lock at %s and ended %s",
			held, termAt.UTC().Format(tsLayout), finished.Format(tsLayout), rep["status"], firstErr, r2.rep.StartedAt.Format(tsLayout), r2.rep.Status)
	}
}
