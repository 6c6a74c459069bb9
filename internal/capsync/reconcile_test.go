package capsync

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/captest"
	"github.com/erpsync/erpsync/internal/proctest"
)

// same reports whether two rows hold the same data, version and
// soft-delete state.
func (r row) same(o row) bool {
	return r.member == o.member && r.product == o.product && r.status == o.status && r.starts.Equal(o.starts) &&
		r.ends.Valid == o.ends.Valid && r.ends.Time.Equal(o.ends.Time) && r.version == o.version &&
		r.updated.Equal(o.updated) && r.deleted == o.deleted
}

// remove DELETEs the records ids from CAP.
func (e *env) remove(ids []string) {
	e.T.Helper()
	for _, id := range ids {
		if err := e.set.Delete(context.Background(), id); err != nil {
			e.T.Fatalf("delete %s: %v", id, err)
		}
	}
}

// recreate POSTs rec again and returns it as CAP stored it.
func (e *env) recreate(rec captest.Record) captest.Record {
	e.T.Helper()
	c, err := e.set.Post(context.Background(), rec)
	if err != nil {
		e.T.Fatalf("recreate %s: %v", rec.MembershipID, err)
	}
	return c
}

// reconcile runs `erpsync reconcile args...`, wants exit code, and returns
// the process's result and its report.
func (e *env) reconcile(code int, args ...string) (proctest.Result, map[string]any) {
	e.T.Helper()
	report := filepath.Join(e.T.TempDir(), "reconcile.json")
	r := e.Run(context.Background(), append([]string{"reconcile", "--report", report}, args...)...)
	if r.Code != code {
		e.T.Fatalf("reconcile %v: exit %d, want %d: %s", args, r.Code, code, r.Out())
	}
	rep, err := proctest.ReadReport(report)
	if err != nil {
		e.T.Fatal(err)
	}
	return r, rep
}

// assertUnchanged fails the test unless every row of before is in the
// table as it was, and no other row is.
func (e *env) assertUnchanged(before map[string]row, what string) {
	e.T.Helper()
	now := e.rows()
	if len(now) != len(before) {
		e.T.Errorf("%s: %d rows, were %d", what, len(now), len(before))
	}
	bad := 0
	for id, b := range before {
		if r := now[id]; !r.same(b) {
			e.T.Errorf("%s: %s changed: %+v, was %+v", what, id, r, b)
			if bad++; bad > 10 {
				e.T.FailNow()
			}
		}
	}
}

// TestReconcileSoftDeletesAndRestores syncs 400 records, DELETEs 12 of
// them in CAP and reconciles: exactly those rows get deleted_at and keep
// their data and version, the others stay as they were, and verify is
// clean. A deleted record POSTed again comes back at its new version
// (LastChangeDateTime), made live by a reconcile, another by a run.
func TestReconcileSoftDeletesAndRestores(t *testing.T) {
	t.Parallel()
	captest.ForVersions(t, func(t *testing.T, v string) {
		e := setupOn(t, captest.Options{Records: 400, Seed: 11, PageLimit: 100}, v)
		recs := captest.Seed(400, 11)
		e.MustRun("run", "--page-size", "100")
		e.assertTruth()
		before := e.rows()

		gone := every(recs, 5, 33) // 12 records: 3% of 400, under the 5% guard
		e.remove(gone)
		_, rep := e.reconcile(0)
		if rep["status"] != "succeeded" || rep["deleted"] != float64(len(gone)) || rep["restored"] != float64(0) || rep["repaired"] != float64(0) {
			t.Errorf("reconcile report %v; want %d deleted, nothing else", rep, len(gone))
		}
		after := e.rows()
		isGone := map[string]bool{}
		for _, id := range gone {
			isGone[id] = true
			want := before[id]
			want.deleted = true
			if r := after[id]; !r.same(want) {
				t.Errorf("%s after the reconcile: %+v; want its data and version kept, soft-deleted: %+v", id, r, want)
			}
		}
		for id, b := range before {
			if !isGone[id] && !after[id].same(b) {
				t.Errorf("live row %s changed: %+v, was %+v", id, after[id], b)
			}
		}
		if n := e.Count("SELECT COUNT(*) FROM %s WHERE deleted_at IS NOT NULL", "memberships"); n != int64(len(gone)) {
			t.Errorf("%d soft-deleted rows, want %d", n, len(gone))
		}
		e.assertTruth()

		// A second reconcile finds nothing to do.
		if _, rep := e.reconcile(0); rep["deleted"] != float64(0) || rep["restored"] != float64(0) || rep["repaired"] != float64(0) {
			t.Errorf("second reconcile report %v; want nothing done", rep)
		}
		e.assertUnchanged(after, "after a reconcile with nothing to do")

		// Recreated: one made live by a reconcile, one by a run.
		byID := map[string]captest.Record{}
		for _, r := range recs {
			byID[r.MembershipID] = r
		}
		for i, via := range []string{"reconcile", "run"} {
			c := e.recreate(byID[gone[i]])
			if !c.LastChangeDateTime.After(byID[gone[i]].LastChangeDateTime) {
				t.Fatalf("recreated %s at %v, not after %v", c.MembershipID, c.LastChangeDateTime, byID[gone[i]].LastChangeDateTime)
			}
			if via == "reconcile" {
				if _, rep := e.reconcile(0); rep["restored"] != float64(1) || rep["deleted"] != float64(0) {
					t.Errorf("reconcile after recreating %s: report %v; want 1 restored", c.MembershipID, rep)
				}
			} else {
				e.MustRun("run", "--page-size", "100")
			}
			r := e.rows()[c.MembershipID]
			if r.deleted || r.version != c.LastChangeDateTime.UnixMicro() || r.version <= before[c.MembershipID].version {
				t.Errorf("%s recreated, then a %s: row %+v; want live at version %d", c.MembershipID, via, r, c.LastChangeDateTime.UnixMicro())
			}
		}
		e.assertTruth()
	})
}

// TestReconcileGuard DELETEs 10% of the records: a reconcile exits 1 with
// one line and writes nothing; --dry-run writes nothing either, even
// where the guard would let it through; --force deletes.
func TestReconcileGuard(t *testing.T) {
	t.Parallel()
	e := setup(t, captest.Options{Records: 400, Seed: 12, PageLimit: 100})
	recs := captest.Seed(400, 12)
	e.MustRun("run", "--page-size", "100")
	gone := every(recs, 2, 10) // 40 records: 10%
	e.remove(gone)
	before := e.rows()
	runs := e.Count("SELECT COUNT(*) FROM %s", "sync_runs")

	r, rep := e.reconcile(1)
	want := "erpsync: reconcile: refused by the deletion guard: would delete 40 of 400 live rows (10.0%), above --max-delete 5% (20 rows); nothing changed (--dry-run lists them, --force goes past the guard)"
	// Besides the JSON log lines (the summary among them), one line.
	var plain []string
	for _, l := range proctest.Lines(r.Stderr) {
		if !strings.HasPrefix(l, "{") {
			plain = append(plain, l)
		}
	}
	if len(plain) != 1 || plain[0] != want {
		t.Errorf("refused reconcile: stderr %q; want one line besides the log, %q", r.Stderr, want)
	}
	if rep["status"] != "failed" || rep["deleted"] != float64(0) || rep["refused"] == nil {
		t.Errorf("refused reconcile report %v", rep)
	}
	e.assertUnchanged(before, "after a refused reconcile")
	if n := e.Count("SELECT COUNT(*) FROM %s WHERE mode = 'reconcile' AND status = 'failed'", "sync_runs"); n != 1 {
		t.Errorf("%d failed reconciles recorded, want 1", n)
	}
	runs++

	r, _ = e.reconcile(1, "--dry-run")
	if !strings.HasPrefix(r.Stdout, "DRY RUN, nothing changed. The guard would REFUSE this reconcile: would delete 40 of 400") ||
		!regexp.MustCompile(`(?m)^  delete +40 `).MatchString(r.Stdout) {
		t.Errorf("dry run output:\n%s", r.Stdout)
	}
	r, _ = e.reconcile(0, "--dry-run", "--max-delete", "50%")
	if !strings.HasPrefix(r.Stdout, "DRY RUN, nothing changed. The guard would let this reconcile through.") ||
		!strings.Contains(r.Stdout, gone[0]) {
		t.Errorf("dry run past the guard, output:\n%s", r.Stdout)
	}
	e.assertUnchanged(before, "after dry runs")
	if n := e.Count("SELECT COUNT(*) FROM %s", "sync_runs"); n != runs {
		t.Errorf("%d runs recorded after dry runs, want %d (none for a dry run)", n, runs)
	}

	if _, rep := e.reconcile(0, "--force"); rep["deleted"] != float64(40) || rep["forced"] == nil {
		t.Errorf("forced reconcile report %v; want 40 deleted, forced", rep)
	}
	rows := e.rows()
	for _, id := range gone {
		if !rows[id].deleted {
			t.Errorf("%s not soft-deleted by --force", id)
		}
	}
	e.assertTruth()
}

// TestRunRacingReconcile deletes 90 of 3000 records, then reconciles
// while runs write PATCHed records and records that are POSTed again: no
// run's write is lost. At the end the live rows are CAP's records, at
// their versions, and the rows of the records still gone are
// soft-deleted.
func TestRunRacingReconcile(t *testing.T) {
	t.Parallel()
	e := setup(t, captest.Options{Records: 3000, Seed: 13, PageLimit: 100})
	recs := captest.Seed(3000, 13)
	e.MustRun("run", "--page-size", "100", "--workers", "2")
	watch := e.Watch()
	var gone []captest.Record
	for i := 4; i < len(recs); i += 33 {
		gone = append(gone, recs[i])
	}
	for _, r := range gone {
		e.remove([]string{r.MembershipID})
	}

	ctx, stop := context.WithCancel(context.Background())
	report := filepath.Join(t.TempDir(), "reconcile.json")
	rc := e.Start("reconcile", "--page-size", "100", "--workers", "2", "--chunk-size", "20", "--report", report)
	var wg sync.WaitGroup
	var patched, recreated, runs int
	isGone := map[string]bool{}
	for _, r := range gone {
		isGone[r.MembershipID] = true
	}
	var live []string
	for _, id := range every(recs, 1, 20) {
		if !isGone[id] {
			live = append(live, id)
		}
	}
	wg.Go(func() { patched = e.patch(ctx, live) })
	wg.Go(func() {
		// Recreate every third deleted record, early and late in the feed.
		for i := 0; i < len(gone) && ctx.Err() == nil; i += 3 {
			if _, err := e.set.Post(context.Background(), gone[i]); err != nil {
				t.Errorf("recreate %s: %v", gone[i].MembershipID, err)
				return
			}
			recreated++
			time.Sleep(200 * time.Millisecond)
		}
	})
	wg.Go(func() {
		for ctx.Err() == nil {
			if r := e.Run(context.Background(), "run", "--page-size", "100", "--workers", "2", "--chunk-size", "20"); r.Code != 0 {
				t.Errorf("run beside the reconcile: exit %d: %s", r.Code, r.Out())
				return
			}
			runs++
		}
	})
	r := rc.Wait()
	stop()
	wg.Wait()
	if r.Code != 0 {
		t.Fatalf("reconcile exit %d: %s", r.Code, r.Out())
	}
	if patched == 0 || recreated == 0 || runs == 0 {
		t.Fatalf("nothing raced the reconcile: %d patched, %d recreated, %d runs", patched, recreated, runs)
	}
	rep, err := proctest.ReadReport(report)
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := rep["plan"].(map[string]any)
	t.Logf("during the reconcile: %d records patched, %d recreated, %d runs finished; it deleted %v, restored %v, repaired %v, kept %v",
		patched, recreated, runs, rep["deleted"], rep["restored"], rep["repaired"], plan["kept"])
	if rep["deleted"] == float64(0) {
		t.Errorf("the reconcile deleted nothing: %v", rep)
	}
	// A row soft-deleted at the version CAP serves is a run's write the
	// reconcile lost: that version was written after the record came
	// back, so after the scan began.
	all, err := e.set.All(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rows := e.rows()
	for _, c := range all {
		if r := rows[c.MembershipID]; r.deleted && r.version == e.version(c) {
			t.Errorf("%s: the reconcile soft-deleted a run's write (version %d), CAP has it", c.MembershipID, r.version)
		}
	}
	// The records changed after the last racing run began; a run brings
	// them in. With a 1ms overlap it reads no row it wrote before again,
	// so a row the reconcile wrongly deleted stays so and settle sees it.
	e.MustRun("run", "--page-size", "100", "--overlap", "1ms")
	e.settle(watch)
}
