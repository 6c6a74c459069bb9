package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/testenv"
)

// erpmock's records: four to a millisecond from 2025-01-01, so every
// boundary of a part falls on a time that four records share.
var feedFrom = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// --fetchers 8 writes every record as --fetchers 1 does: the same table,
// the ERP's truth, over a feed whose every millisecond is a tie, records
// changing while the parts are paged.
func TestFetchersWriteWhatOneFetcherWrites(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"1", "8"} {
		t.Run("fetchers="+n, func(t *testing.T) {
			t.Parallel()
			e := setup(t, erpmock.Options{Records: 6000, Seed: 71})
			e.Mock.SetFaults(erpmock.Faults{Latency: 2 * time.Millisecond, ChangeRate: 1, DuplicateRate: 0.2, StaleRate: 0.2})
			watch := e.Watch()
			report := t.TempDir() + "/report.json"
			if r := e.Run(context.Background(), "backfill", "--since", "2024-01-01T00:00:00Z", "--fetchers", n, "--page-size", "100", "--report", report); r.Code != 0 {
				t.Fatalf("backfill --fetchers %s exit %d: %s", n, r.Code, r.Out())
			}
			t.Logf("--fetchers %s: %v ERP requests", n, e.report(report)["erp_requests"])
			// The records changed while the backfill paged are newer than
			// its window's end, as a run would next read them.
			e.settle(watch, "--fetchers", n)
		})
	}
}

// The early parts of a backfill's window stall while the later ones are
// written; the process is killed (SIGKILL) then. The checkpoint must not
// have passed the stalled parts, and the backfill run again (the ERP
// healed) writes every record: nothing is lost.
func TestFetchersStalledPartKilledLosesNothing(t *testing.T) {
	t.Parallel()
	const records = 8000 // 2,000 ms of the feed
	e := setup(t, erpmock.Options{Records: records, Seed: 73})
	stall := feedFrom.Add(125 * time.Millisecond) // the first parts: the plan cuts from the first record
	e.Mock.SetFaults(erpmock.Faults{StallUntil: stall, Hang: time.Hour})
	args := []string{"backfill", "--since", feedFrom.Format(time.RFC3339Nano), "--until", feedFrom.Add(2 * time.Second).Format(time.RFC3339Nano),
		"--fetchers", "8", "--page-size", "50", "--erp-timeout", "10m"}
	p := e.Start(args...)
	// The parts after the stall are written: rows of records past it only.
	if !proctest.Eventually(2*time.Minute, func() bool {
		return e.Count("SELECT COUNT(*) FROM %s", "memberships") >= records/4
	}) {
		p.Signal(syscall.SIGKILL)
		t.Fatalf("the parts after the stall were not written: %s", p.Wait().Out())
	}
	// Let the checkpoint ticker run (every second) over the written parts.
	time.Sleep(1500 * time.Millisecond)
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	// Where the parts are cut is the plan's: a part that ends past the
	// stall is written, though it starts before; the parts that end
	// before it are held.
	before := 0
	for _, r := range e.Mock.Truth() {
		if r.UpdatedAt.Before(stall) {
			before++
		}
	}
	if early := e.Count(fmt.Sprintf("SELECT COUNT(*) FROM %%s WHERE erp_updated_at < '%s'", stall.Format("2006-01-02 15:04:05.000")), "memberships"); early >= int64(before) {
		t.Fatalf("all %d rows before the stall were written: the stall held no part", early)
	}
	var pos time.Time
	row := e.DB.QueryRow("SELECT position FROM " + e.Table("sync_checkpoints") + " WHERE name LIKE 'backfill:%'")
	err := row.Scan(&pos)
	t.Logf("checkpoint %v %v", pos, err)
	if err == nil && !pos.Before(stall) {
		t.Fatalf("checkpoint %s passed the stalled parts (before %s)", pos, stall)
	}
	e.Mock.SetFaults(erpmock.Faults{})
	if r := e.Run(context.Background(), args...); r.Code != 0 {
		t.Fatalf("backfill run again exit %d: %s", r.Code, r.Out())
	}
	e.assertTruth()
}

// --fetchers 0 or negative is exit 2 naming the flag, from the flag or the
// environment; 1 and the default are taken.
func TestFetchersOutOfRange(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 10, Seed: 74})
	ctx := context.Background()
	for _, args := range [][]string{
		{"run", "--fetchers", "0"},
		{"backfill", "--since", "2024-01-01T00:00:00Z", "--fetchers", "-3"},
		{"reconcile", "--fetchers", "0"},
		{"verify", "--fetchers", "0"},
	} {
		r := e.Run(ctx, args...)
		if r.Code != 2 || !strings.Contains(r.Stderr, "--fetchers") {
			t.Errorf("%v: exit %d, want 2 naming --fetchers: %s", args, r.Code, r.Out())
		}
	}
	e.Extra = []string{"ERPSYNC_FETCHERS=0"}
	if r := e.Run(ctx, "run"); r.Code != 2 || !strings.Contains(r.Stderr, "ERPSYNC_FETCHERS") {
		t.Errorf("ERPSYNC_FETCHERS=0: exit %d, want 2 naming the variable: %s", r.Code, r.Out())
	}
	e.Extra = nil
	if r := e.Run(ctx, "run", "--fetchers", "1"); r.Code != 0 {
		t.Errorf("--fetchers 1: exit %d: %s", r.Code, r.Out())
	}
}

// Two processes of eight fetchers each share one --erp-rate: the ERP,
// which answers 429 above that rate, never has to.
func TestFetchersShareTheRate(t *testing.T) {
	t.Parallel()
	const rate = 40
	e := setup(t, erpmock.Options{Records: 2000, Seed: 75})
	e.Mock.SetFaults(erpmock.Faults{MaxRate: rate})
	key := testenv.RandomName("erpsync-test:rate:")
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.Run(context.Background(), "backfill", "--since", "2024-01-01T00:00:00Z", "--page-size", "50", "--shard", fmt.Sprintf("%d/2", i),
				"--fetchers", "8", "--erp-rate", fmt.Sprintf("%d/s", rate), "--erp-rate-key", key)
			if r.Code != 0 {
				t.Errorf("backfill %d exit %d: %s", i, r.Code, r.Out())
			}
		}()
	}
	wg.Wait()
	st := e.Mock.Stats()
	t.Logf("two processes of 8 fetchers under --erp-rate %d/s: %d requests, %d answered 429", rate, st.Requests, st.Statuses[429])
	if st.Statuses[429] != 0 {
		t.Fatalf("%d requests were answered 429 under a shared --erp-rate", st.Statuses[429])
	}
	e.assertTruth()
}
