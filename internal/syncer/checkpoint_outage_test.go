package syncer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// TestCheckpointSavedThroughADatabaseOutage: the checkpoint table goes
// away for a while (renamed, on the real server) during a run, and comes
// back. The saves that fail meanwhile are tried again, at the next tick
// or, for the run's last save, until the table answers: the run succeeds
// with its checkpoint at the newest record, where one failed save failed
// the whole run (exit 1) although every record was written. The outage
// falls between the periodic saves of a long run, and on the last save of
// a short one.
func TestCheckpointSavedThroughADatabaseOutage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		records  int
		latency  time.Duration
		want     string // the warning the outage leaves
		outage   time.Duration
		afterReq int64 // the ERP requests before the table goes
	}{
		// 40 pages of 50 ms each: the table is away for 400 ms of the
		// run's 2 s or more.
		{"between the periodic saves", 2000, 50 * time.Millisecond, "checkpoint not saved; trying again at the next tick", 400 * time.Millisecond, 5},
		// One page, a second late (the table goes as soon as it is asked
		// for): the run's writes and its last save fall in the outage.
		{"on the last save", 40, time.Second, "checkpoint not saved; trying again", 2 * time.Second, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, erpmock.Options{Records: c.records, Seed: 12, Faults: erpmock.Faults{Latency: c.latency}})
			var log testenv.SyncBuffer
			s, err := New(Config{Job: b.job, PageSize: 50, ChunkSize: 25, Fetchers: 1, CheckpointEvery: 20 * time.Millisecond}, b.erp, b.store, b.locks, zerolog.New(&log))
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				rep *Report
				err error
			}
			done := make(chan result, 1)
			go func() {
				rep, err := s.Run(context.Background())
				done <- result{rep, err}
			}()
			for deadline := time.Now().Add(time.Minute); b.mock.Requests() < c.afterReq; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the run made fewer than %d ERP requests in a minute", c.afterReq)
				}
			}
			db := b.store.DB()
			if err := db.Exec("ALTER TABLE sync_checkpoints RENAME TO sync_checkpoints_away").Error; err != nil {
				t.Fatal(err)
			}
			time.Sleep(c.outage)
			if err := db.Exec("ALTER TABLE sync_checkpoints_away RENAME TO sync_checkpoints").Error; err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil || r.rep.Status != store.StatusSucceeded || r.rep.Inserted != int64(c.records) {
				t.Fatalf("run: %v, status %s, %+v", r.err, r.rep.Status, r.rep.Counters)
			}
			if !strings.Contains(log.String(), c.want) {
				t.Fatalf("no save failed during the outage (no %q in the log):\n%s", c.want, log.String())
			}
			var newest time.Time
			for _, rec := range b.mock.Truth() {
				if rec.UpdatedAt.After(newest) {
					newest = rec.UpdatedAt
				}
			}
			cp, ok, err := b.store.Checkpoint(context.Background(), b.job)
			if err != nil || !ok || !cp.Position.Equal(newest) || cp.Fence != r.rep.Fence {
				t.Fatalf("checkpoint %+v (found %v, %v); want position %s, fence %d", cp, ok, err, newest, r.rep.Fence)
			}
			assertTruth(t, b)
		})
	}
}
