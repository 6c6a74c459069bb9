package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
)

// v2Env configures erpsync for erpmock's FaceV2 through the environment
// alone, paging by paging ("cursor" or "offset"); rev false maps no
// version, which then comes from modified.
func v2Env(paging string, rev bool) []string {
	version := "rev"
	if !rev {
		version = ""
	}
	return []string{
		"ERPSYNC_ERP_PATH=/v2/members/changes",
		"ERPSYNC_ERP_COUNT_PATH=/v2/members/count",
		"ERPSYNC_ERP_PARAM=since=changedAfter,until=changedBefore,cursor=page_token,limit=limit,offset=offset",
		"ERPSYNC_ERP_REST_PAGING=" + paging,
		"ERPSYNC_ERP_RECORDS_PATH=result.items",
		"ERPSYNC_ERP_CURSOR_PATH=result.next",
		"ERPSYNC_ERP_COUNT_FIELD=result.total",
		"ERPSYNC_ERP_MAP=erp_id=id,member_id=customer,product_code=plan,status=state,starts_at=from,ends_at=to,version=" + version + ",updated_at=modified",
		"ERPSYNC_ERP_STATUS_MAP=active=ACTIVE,paused=SUSPENDED,cancelled=CANCELLED,expired=EXPIRED",
	}
}

// faultyV2 are the faults of the homegrown API's runs.
var faultyV2 = erpmock.Faults{ErrorRate: 0.1, RateLimitRate: 0.05, TruncateRate: 0.02, DuplicateRate: 0.3, StaleRate: 0.3, ChangeRate: 2}

// syncTogether runs a run and two overlapping backfills at once; each
// must exit 0.
func (e *env) syncTogether(args ...string) {
	e.T.Helper()
	ctx := context.Background()
	cmds := [][]string{
		append([]string{"run"}, args...),
		append([]string{"backfill", "--since", "2024-01-01T00:00:00Z", "--workers", "8"}, args...),
		append([]string{"backfill", "--since", "2024-01-01T00:00:00Z", "--chunk-size", "50"}, args...),
	}
	var wg sync.WaitGroup
	for _, c := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := e.Run(ctx, c...); r.Code != 0 {
				e.T.Errorf("%v: exit %d: %s", c, r.Code, r.Out())
			}
		}()
	}
	wg.Wait()
	if e.T.Failed() {
		e.T.FailNow()
	}
}

// verifyClean runs verify, which must find the table equal to the feed.
func (e *env) verifyClean() {
	e.T.Helper()
	if res, code := e.Verify(context.Background()); code != 0 || !res.OK() {
		e.T.Fatalf("verify: exit %d, %+v", code, res)
	}
}

func TestHomegrownRESTByCursor(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 3000, Seed: 41, Face: erpmock.FaceV2, Faults: erpmock.Faults{InvalidRate: 0.01}})
	e.Extra = v2Env("cursor", true)
	e.Mock.SetFaults(faultyV2)
	watch := e.Watch()
	e.syncTogether("--page-size", "200")
	if q := e.Count("SELECT COUNT(DISTINCT erp_id) FROM %s", "quarantined_records"); q == 0 {
		t.Error("no invalid record of the homegrown API quarantined")
	}
	e.settle(watch)
	e.verifyClean()
}

// Offset paging skips a record whenever an earlier one changes while the
// pages are read; the incremental runs do not see it again (it kept its
// old modified). A backfill of the window reads it, with the ERP quiet.
func TestHomegrownRESTByOffsetWithoutCount(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 3000, Seed: 43, Face: erpmock.FaceV2, Faults: erpmock.Faults{InvalidRate: 0.01}})
	e.Extra = append(v2Env("offset", true), "ERPSYNC_ERP_COUNT_PATH=")
	e.Mock.SetFaults(faultyV2)
	watch := e.Watch()
	e.syncTogether("--page-size", "200")
	e.Mock.SetFaults(erpmock.Faults{})
	res, _ := e.Verify(context.Background())
	t.Logf("after the runs under changes: %d missing, %d stale (offset paging's skips)", res.Missing.Count, res.Stale.Count)
	if r := e.Run(context.Background(), "backfill", "--since", "2024-01-01T00:00:00Z"); r.Code != 0 {
		t.Fatalf("backfill exit %d: %s", r.Code, r.Out())
	}
	if _, downs := watch.Stop(); len(downs) > 0 {
		t.Errorf("erp_version went down: %v", downs)
	}
	e.assertTruth()
	e.verifyClean()
}

func TestHomegrownRESTWithoutRev(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 1500, Seed: 47, Face: erpmock.FaceV2, NoRev: true})
	e.Extra = v2Env("cursor", false)
	e.Mock.SetFaults(faultyV2)
	e.syncTogether()
	e.Mock.SetFaults(erpmock.Faults{})
	if r := e.Run(context.Background(), "run", "--overlap", "1h"); r.Code != 0 {
		t.Fatalf("final run exit %d: %s", r.Code, r.Out())
	}
	// The versions are modified in microseconds, not the mock's rev:
	// verify, which reads the feed as the runs do, is the judge.
	e.verifyClean()
	if n := e.Count("SELECT COUNT(*) FROM %s", "memberships"); n != int64(len(e.Mock.Truth())) {
		t.Fatalf("%d rows, want %d", n, len(e.Mock.Truth()))
	}
}

func TestBadRESTSettingsExit2WithOneLine(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 10, Seed: 1, Face: erpmock.FaceV2})
	e.Extra = v2Env("cursor", true)
	for _, c := range []struct{ flag, value string }{
		{"--erp-rest-paging", "pages"},
		{"--erp-param", "since=changedAfter,after=x"},
		{"--erp-records-path", "result..items"},
		{"--erp-path", "v2/members/changes"},
	} {
		r := e.Run(context.Background(), "run", c.flag, c.value)
		msg := strings.TrimSpace(r.Stderr)
		if r.Code != 2 || strings.Contains(msg, "\n") || !strings.Contains(msg, c.flag) {
			t.Errorf("%s %q: exit %d, stderr %q; want 2 and one line naming the flag", c.flag, c.value, r.Code, r.Stderr)
		}
	}
	// The spec's count path on the homegrown API: the probe gets a 404,
	// exit 2.
	if r := e.Run(context.Background(), "run", "--erp-count-path", "/api/v1/memberships/count"); r.Code != 2 {
		t.Errorf("the wrong count path: exit %d, want 2: %s", r.Code, r.Out())
	}
	if n := e.Count("SELECT COUNT(*) FROM %s", "sync_runs"); n != 0 {
		t.Fatalf("bad settings recorded %d runs", n)
	}
}
