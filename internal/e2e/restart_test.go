package e2e

import (
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/proctest"
)

// Redis restarted empty under a run: the run ends with a clear exit code,
// no row's version ever goes down, fencing tokens keep rising (the next run
// is not refused), and the next run brings the table to the truth.
func TestRedisRestartedEmptyMidRun(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 3000, Seed: 43, Faults: erpmock.Faults{Latency: 40 * time.Millisecond}})
	e.Mock.SetFaults(erpmock.Faults{Latency: 40 * time.Millisecond, ChangeRate: 3})
	rs := proctest.StartRedis(t)
	addr := rs.Addr
	watch := e.Watch()
	c := e.Start("run", "--redis-addr", addr, "--page-size", "50", "--lock-ttl", "3s")
	e.WaitRows(500)
	rs.Kill()
	time.Sleep(300 * time.Millisecond)
	rs.Start()
	r := c.Wait()
	if r.Code != 0 && r.Code != 1 {
		t.Fatalf("run under a Redis restart exit %d, want 0 or 1:\n%s", r.Code, r.Stdout)
	}
	t.Logf("run under a Redis restart: exit %d", r.Code)
	e.settle(watch, "--redis-addr", addr)
	if stale := e.Count("SELECT COUNT(*) FROM %s WHERE fence_token <= 0", "memberships"); stale != 0 {
		t.Fatalf("%d rows without a fencing token", stale)
	}
}
