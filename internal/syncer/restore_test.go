package syncer

import (
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/store"
)

// TestRunRestoresSoftDeletedRows soft-deletes rows whose records the feed
// still has (what a reconcile leaves when a record comes back) and checks
// that a backfill over them restores each, counted as restored, through
// the per-record path (one guarded UPDATE) and the chunk path (the
// multi-row upsert), at the same version and at a newer one; a second pass
// finds everything current.
func TestRunRestoresSoftDeletedRows(t *testing.T) {
	t.Parallel()
	for _, chunk := range []int{1, 100} {
		b := setup(t, erpmock.Options{Records: 400, Seed: 11})
		mustRun(t, b.syncer(t, Config{}))
		// 40 rows stay at their version; 10 more have a newer version in
		// the feed.
		newer := b.mock.Change(10)
		if err := b.store.DB().Exec("UPDATE memberships SET deleted_at = ? WHERE erp_id <= 'M0000040' OR erp_id IN ?", time.Now().UTC(), newer).Error; err != nil {
			t.Fatal(err)
		}
		var marked int64
		b.store.DB().Raw("SELECT COUNT(*) FROM memberships WHERE deleted_at IS NOT NULL").Scan(&marked)
		rep := mustRun(t, b.syncer(t, Config{Mode: ModeBackfill, Since: time.Unix(0, 0), ChunkSize: chunk}))
		var deleted int64
		b.store.DB().Raw("SELECT COUNT(*) FROM memberships WHERE deleted_at IS NOT NULL").Scan(&deleted)
		if deleted != 0 {
			t.Fatalf("chunk %d: %d rows still soft-deleted after the backfill", chunk, deleted)
		}
		if marked < 41 || rep.Restored != marked || rep.Updated != 0 || rep.Inserted != 0 {
			t.Fatalf("chunk %d: %+v; want %d restored, nothing else written", chunk, rep.Counters, marked)
		}
		assertTruth(t, b)
		again := mustRun(t, b.syncer(t, Config{Mode: ModeBackfill, Since: time.Unix(0, 0), ChunkSize: chunk}))
		if again.Restored+again.Updated+again.Inserted != 0 || again.Status != store.StatusSucceeded {
			t.Fatalf("chunk %d: second pass wrote: %+v", chunk, again.Counters)
		}
	}
}
