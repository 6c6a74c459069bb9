package capsync

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/captest"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/odata"
	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/testenv"
)

var bin string // path of the erpsync binary built for these tests

func TestMain(m *testing.M) { testenv.MainWithBinary(m, "./cmd/erpsync", &bin) }

// The CAP service's names, as a user writes them on the command line.
const (
	capMap    = "erp_id=MembershipID,member_id=BusinessPartner,product_code=Product,status=LifecycleStatus,starts_at=ValidFrom,ends_at=ValidTo,updated_at=LastChangeDateTime,version="
	capStatus = "active=ACTIVE,suspended=SUSPENDED,cancelled=CANCELLED,expired=EXPIRED"
)

// env is one test's database, lock prefix and job (proctest.Env, whose
// erpmock stays unused) with a CAP server as the ERP.
type env struct {
	*proctest.Env
	cap *captest.Server
	set *captest.EntitySet // the entity set synced: Memberships unless set
	// version is the erp_version a record must have: LastChangeDateTime in
	// microseconds unless set.
	version func(captest.Record) int64
}

// setup starts CAP with opt (basic authentication unless opt.Token is
// set) and an Env whose erpsync processes sync its Memberships through
// OData V4.
func setup(t *testing.T, opt captest.Options) *env { return setupOn(t, opt, odata.Version4) }

// setupOn is setup with the processes reading through OData version v.
func setupOn(t *testing.T, opt captest.Options, v string) *env {
	t.Helper()
	opt.Auth = opt.Token == ""
	e := &env{Env: proctest.New(t, bin, erpmock.Options{}), cap: captest.Start(t, opt)}
	e.set = e.cap.Memberships
	e.version = func(r captest.Record) int64 { return r.LastChangeDateTime.UnixMicro() }
	e.ERPURL = e.cap.On(t, e.cap.URL, v)
	e.Extra = append(e.Extra, "ERPSYNC_ERP_KIND=odata", "ERPSYNC_ERP_MAP="+capMap, "ERPSYNC_ERP_STATUS_MAP="+capStatus)
	if opt.Token != "" {
		e.Extra = append(e.Extra, "ERPSYNC_ERP_TOKEN="+opt.Token)
	} else {
		e.Extra = append(e.Extra, "ERPSYNC_ERP_USERNAME="+e.cap.User, "ERPSYNC_ERP_PASSWORD="+e.cap.Password)
	}
	return e
}

// row is a memberships row as the test compares it.
type row struct {
	member, product, status string
	starts                  time.Time
	ends                    sql.NullTime
	version                 int64
	updated                 time.Time
	deleted                 bool // deleted_at is set
}

func (e *env) rows() map[string]row {
	e.T.Helper()
	out := map[string]row{}
	rs, err := e.DB.Query("SELECT erp_id, member_id, product_code, status, starts_at, ends_at, erp_version, erp_updated_at, deleted_at IS NOT NULL FROM " + e.Table("memberships"))
	if err != nil {
		e.T.Fatal(err)
	}
	defer rs.Close()
	for rs.Next() {
		var id string
		var r row
		if err := rs.Scan(&id, &r.member, &r.product, &r.status, &r.starts, &r.ends, &r.version, &r.updated, &r.deleted); err != nil {
			e.T.Fatal(err)
		}
		if _, dup := out[id]; dup {
			e.T.Errorf("erp_id %s twice", id)
		}
		out[id] = r
	}
	return out
}

// assertTruth checks that memberships holds exactly the entity set's
// records as live rows, each at its erp_version (LastChangeDateTime in
// microseconds unless e.version says otherwise), fields mapped, and that
// every other row is soft-deleted; and that `erpsync verify` agrees
// (exit 0).
func (e *env) assertTruth() {
	e.T.Helper()
	ctx := context.Background()
	all, err := e.set.All(ctx)
	if err != nil {
		e.T.Fatal(err)
	}
	rows := e.rows()
	live := 0
	for _, r := range rows {
		if !r.deleted {
			live++
		}
	}
	if live != len(all) {
		e.T.Errorf("%d live rows for %d CAP records", live, len(all))
	}
	bad := 0
	for _, c := range all {
		r, ok := rows[c.MembershipID]
		from, _ := time.Parse(time.DateOnly, c.ValidFrom)
		switch {
		case !ok:
			e.T.Errorf("%s missing", c.MembershipID)
		case r.deleted:
			e.T.Errorf("%s soft-deleted, but CAP has it", c.MembershipID)
		case r.version != e.version(c) || !r.updated.Equal(c.LastChangeDateTime):
			e.T.Errorf("%s: erp_version %d, erp_updated_at %v; want %d (LastChangeDateTime %v)",
				c.MembershipID, r.version, r.updated, e.version(c), c.LastChangeDateTime)
		case r.member != c.BusinessPartner || r.product != c.Product || r.status != strings.ToUpper(c.LifecycleStatus) ||
			!r.starts.Equal(from) || r.ends.Valid != (c.ValidTo != ""):
			e.T.Errorf("%s: row %+v, CAP %+v", c.MembershipID, r, c)
		default:
			continue
		}
		if bad++; bad > 10 {
			e.T.Fatal("too many differences")
		}
	}
	res, code := e.Verify(ctx)
	if code != 0 || !res.OK() || res.FeedRecords != int64(len(all)) || res.Rows != int64(len(all)) || res.SoftDeleted != int64(len(rows)-live) {
		e.T.Errorf("verify exit %d: %+v", code, res)
	}
}

// settle stops the version watcher, fails the test if any row's
// erp_version went down meanwhile, and checks the table equals CAP.
func (e *env) settle(w *proctest.Watcher) {
	e.T.Helper()
	if polls, downs := w.Stop(); len(downs) > 0 {
		e.T.Errorf("erp_version went down (%d polls): %v", polls, downs)
	}
	e.assertTruth()
}

// patch changes n records of recs, one after the other, and returns how
// many it changed.
func (e *env) patch(ctx context.Context, ids []string) int {
	n := 0
	for i, id := range ids {
		if ctx.Err() != nil {
			break
		}
		status := captest.Statuses[i%len(captest.Statuses)]
		if _, err := e.set.Patch(context.Background(), id, map[string]any{"LifecycleStatus": status}); err != nil {
			e.T.Errorf("patch %s: %v", id, err)
			return n
		}
		n++
	}
	return n
}

// every returns the MembershipID of every step-th record of recs from
// the first-th.
func every(recs []captest.Record, first, step int) []string {
	var ids []string
	for i := first; i < len(recs); i += step {
		ids = append(ids, recs[i].MembershipID)
	}
	return ids
}

func TestBackfill20000(t *testing.T) {
	t.Parallel()
	e := setup(t, captest.Options{Records: 20000, Seed: 1})
	report := filepath.Join(t.TempDir(), "report.json")
	// One fetcher: the count of requests is one pass's.
	e.MustRun("backfill", "--since", "2024-01-01T00:00:00Z", "--page-size", "1000", "--fetchers", "1", "--report", report)
	rep, err := proctest.ReadReport(report)
	if err != nil {
		t.Fatal(err)
	}
	if rep["status"] != "succeeded" || rep["fetched"] != float64(20000) || rep["inserted"] != float64(20000) || rep["invalid"] != float64(0) {
		t.Errorf("report %v", rep)
	}
	t.Logf("backfill of 20000 records from CAP: %.0f records/s, %v ERP requests", rep["records_per_second"], rep["erp_requests"])
	// 20 pages of 1000 and the empty page that ends keyset paging, plus
	// the probe and the progress count.
	if n := rep["erp_requests"].(float64); n < 21 || n > 30 {
		t.Errorf("%v ERP requests for 20 pages", n)
	}
	e.assertTruth()
}

// TestRunWhileRecordsChange PATCHes records while a run pages CAP (whose
// pages are capped at 100 rows): keyset paging reads each changed record
// again at the end of the feed and loses no other, so the run ends with
// every record in the table; the next run brings every change in.
func TestRunWhileRecordsChange(t *testing.T) {
	t.Parallel()
	captest.ForVersions(t, func(t *testing.T, v string) {
		e := setupOn(t, captest.Options{Records: 3000, Seed: 2, PageLimit: 100}, v)
		watch := e.Watch()
		recs := captest.Seed(3000, 2)
		ctx, stop := context.WithCancel(context.Background())
		p := e.Start("run", "--page-size", "100", "--workers", "2", "--chunk-size", "50")
		e.WaitRows(200)
		var patched int
		var wg sync.WaitGroup
		wg.Go(func() {
			// Records from the whole feed, early ones included: those are the
			// ones whose move would shift an offset.
			patched = e.patch(ctx, every(recs, 0, 15))
		})
		r := p.Wait()
		stop()
		wg.Wait()
		if r.Code != 0 {
			t.Fatalf("run exit %d: %s", r.Code, r.Stdout)
		}
		if patched == 0 {
			t.Fatal("no record changed during the run")
		}
		if n := len(e.rows()); n != 3000 {
			t.Fatalf("%d rows after a run during which %d records changed, want all 3000", n, patched)
		}
		t.Logf("%d records changed during the run", patched)
		e.MustRun("run")
		e.settle(watch)
	})
}

// TestServerPagingSkipsKeysetDoesNot reads CAP page by page with the
// OData source and changes a record of the first page between two pages.
// CAP's default next link is an offset: the changed record moves to the
// end, every later row moves back by one, and the first row of the next
// page is never served. Keyset paging serves every record.
func TestServerPagingSkipsKeysetDoesNot(t *testing.T) {
	t.Parallel()
	captest.ForVersions(t, func(t *testing.T, v string) {
		srv := captest.Start(t, captest.Options{Records: 40, Seed: 3, PageLimit: 10})
		m, err := erp.ParseMapping(capMap, capStatus)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for i, paging := range []string{odata.PagingServer, odata.PagingKeyset} {
			src, err := odata.New(odata.Config{URL: srv.On(t, srv.URL, v), Mapping: m, Paging: paging, Version: v})
			if err != nil {
				t.Fatal(err)
			}
			p, err := src.Page(ctx, erp.Query{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, r := range p.Records {
				seen[r.ErpID] = true
			}
			if _, err := srv.Memberships.Patch(ctx, p.Records[i].ErpID, map[string]any{"Product": "SPA"}); err != nil {
				t.Fatal(err)
			}
			for q := (erp.Query{Limit: 10, Cursor: p.NextCursor}); q.Cursor != ""; q.Cursor = p.NextCursor {
				if p, err = src.Page(ctx, q); err != nil {
					t.Fatal(err)
				}
				for _, r := range p.Records {
					seen[r.ErpID] = true
				}
			}
			switch {
			case paging == odata.PagingServer && len(seen) != 39:
				t.Errorf("server paging over CAP's offset: %d distinct records of 40, want 39 (one skipped)", len(seen))
			case paging == odata.PagingKeyset && len(seen) != 40:
				t.Errorf("keyset paging: %d distinct records of 40, want 40", len(seen))
			}
		}
	})
}

// TestOverlappingRunsAndBackfill runs two runs and a backfill at once
// while records change; the watcher sees no version go down, and a last
// run leaves the table equal to CAP.
func TestOverlappingRunsAndBackfill(t *testing.T) {
	t.Parallel()
	e := setup(t, captest.Options{Records: 4000, Seed: 4, PageLimit: 200})
	watch := e.Watch()
	recs := captest.Seed(4000, 4)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { e.patch(ctx, every(recs, 7, 40)) })
	procs := []*proctest.Proc{
		e.Start("run", "--page-size", "200"),
		e.Start("run", "--page-size", "200"),
		e.Start("backfill", "--since", "2024-01-01T00:00:00Z", "--page-size", "200", "--workers", "4"),
	}
	for i, p := range procs {
		if r := p.Wait(); r.Code != 0 {
			t.Errorf("process %d exit %d: %s", i, r.Code, r.Stdout)
		}
	}
	stop()
	wg.Wait()
	e.MustRun("run", "--overlap", "1h")
	e.settle(watch)
}

// TestKilledRunResumes kills a run with SIGKILL mid-sync; once its job
// lock has expired, the next run continues from the checkpoint and ends
// with the table equal to CAP.
func TestKilledRunResumes(t *testing.T) {
	t.Parallel()
	captest.ForVersions(t, func(t *testing.T, v string) {
		e := setupOn(t, captest.Options{Records: 5000, Seed: 5, PageLimit: 100}, v)
		p := e.Start("run", "--page-size", "100", "--workers", "1", "--chunk-size", "20", "--lock-ttl", "2s")
		e.WaitRows(300)
		if err := p.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if r := p.Wait(); r.Code != -1 {
			t.Fatalf("killed run exit %d", r.Code)
		}
		if n := len(e.rows()); n >= 5000 {
			t.Fatalf("the run had finished (%d rows) before it was killed", n)
		}
		// The next run skips while the dead run's lock lives, then runs.
		ok := proctest.Eventually(20*time.Second, func() bool {
			e.MustRun("run", "--lock-ttl", "2s")
			return len(e.rows()) == 5000
		})
		if !ok {
			t.Fatalf("no run finished the sync after the kill: %d rows", len(e.rows()))
		}
		e.assertTruth()
	})
}

// TestRefusedAndUnreachableExit2 checks that a wrong password and a
// service that does not answer each exit 2 with one line, before anything
// is written.
func TestRefusedAndUnreachableExit2(t *testing.T) {
	t.Parallel()
	e := setup(t, captest.Options{Records: 10, Seed: 6})
	ctx := context.Background()
	r := e.Run(ctx, "run", "--erp-password", "wrong")
	want := "erpsync: erp at " + e.cap.URL + " refused the credentials (check --erp-username/--erp-password): erp: unauthorized: status 401"
	if lines := proctest.Lines(r.Stderr); r.Code != 2 || len(lines) != 1 || !strings.HasPrefix(lines[0], want) {
		t.Errorf("wrong password: exit %d, stderr %q; want 2 and one line %q...", r.Code, r.Stderr, want)
	}
	if strings.Contains(r.Out(), e.cap.Password) {
		t.Error("the output shows the password")
	}
	url := "http://" + proctest.FreeAddr(t) + "/odata/v4/erp/Memberships"
	r = e.Run(ctx, "run", "--erp-url", url, "--erp-retries", "1")
	want = "erpsync: erp unreachable at " + url + ": "
	if lines := proctest.Lines(r.Stderr); r.Code != 2 || len(lines) != 1 || !strings.HasPrefix(lines[0], want) {
		t.Errorf("unreachable: exit %d, stderr %q; want 2 and one line %q...", r.Code, r.Stderr, want)
	}
	if n := len(e.rows()); n != 0 {
		t.Errorf("%d rows written", n)
	}
	if runs := e.Count("SELECT COUNT(*) FROM %s", "sync_runs"); runs != 0 {
		t.Errorf("%d runs recorded", runs)
	}
}

// TestBearerVersionedServerPaging syncs VersionedMemberships, whose
// ChangeCounter is mapped as the version, with a bearer token and server
// paging over CAP's reliable (key-based) next links, while records change:
// the run misses none, and the next one ends with every row at its
// ChangeCounter. A schedule then keeps it so until SIGTERM.
func TestBearerVersionedServerPaging(t *testing.T) {
	t.Parallel()
	e := setup(t, captest.Options{VersionedRecords: 1500, Seed: 7, PageLimit: 50, ReliablePaging: true, Token: "t0k3n-" + testenv.RandomName("")})
	e.set = e.cap.Versioned
	e.version = func(r captest.Record) int64 { return int64(r.ChangeCounter) }
	e.ERPURL = e.cap.Versioned.URL
	e.Extra = append(e.Extra, "ERPSYNC_ERP_MAP="+strings.Replace(capMap, "version=", "version=ChangeCounter", 1), "ERPSYNC_ERP_PAGING=server")
	watch := e.Watch()
	recs := captest.SeedVersioned(1500, 7)
	ctx, stop := context.WithCancel(context.Background())
	p := e.Start("run", "--page-size", "50", "--workers", "2", "--chunk-size", "25")
	e.WaitRows(100)
	var wg sync.WaitGroup
	patched := 0
	wg.Go(func() { patched = e.patch(ctx, every(recs, 3, 25)) })
	r := p.Wait()
	stop()
	wg.Wait()
	if r.Code != 0 {
		t.Fatalf("run exit %d: %s", r.Code, r.Stdout)
	}
	if n := len(e.rows()); n != 1500 {
		t.Fatalf("%d rows after a run during which %d records changed, want all 1500", n, patched)
	}
	sched := e.Start("schedule", "--every", "1s", "--http-addr", proctest.FreeAddr(t))
	e.patch(context.Background(), every(recs, 1, 100))
	ok := proctest.Eventually(time.Minute, func() bool {
		all, err := e.set.All(context.Background())
		if err != nil {
			return false
		}
		rows := e.rows()
		for _, c := range all {
			if rows[c.MembershipID].version != int64(c.ChangeCounter) {
				return false
			}
		}
		return true
	})
	if err := sched.Signal(syscall.SIGTERM); err != nil {
		r := sched.Wait()
		t.Fatalf("schedule ended by itself, exit %d: %s", r.Code, r.Stdout)
	}
	if r := sched.Wait(); r.Code != 0 || !ok {
		t.Fatalf("schedule exit %d, caught up %v: %s", r.Code, ok, r.Stdout)
	}
	e.settle(watch)
}
