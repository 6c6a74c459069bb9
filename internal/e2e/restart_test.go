package e2e

import (
	"bytes"
	"context"
	"os/exec"
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
	e.mock.SetFaults(erpmock.Faults{Latency: 40 * time.Millisecond, ChangeRate: 3})
	rs := proctest.StartRedis(t)
	addr := rs.Addr
	stop := make(chan struct{})
	watch := e.watchVersions(stop)
	ctx := context.Background()
	c := e.cmd(ctx, "run", "--redis-addr", addr, "--page-size", "50", "--lock-ttl", "3s")
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	e.waitRows(500)
	rs.Kill()
	time.Sleep(300 * time.Millisecond)
	rs.Start()
	err := c.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != 0 && code != 1 {
		t.Fatalf("run under a Redis restart exit %d, want 0 or 1:\n%s", code, out.String())
	}
	t.Logf("run under a Redis restart: exit %d", code)
	e.settle(stop, watch, "--redis-addr", addr)
	var stale int64
	e.store.DB().Raw("SELECT COUNT(*) FROM memberships WHERE fence_token <= 0").Scan(&stale)
	if stale != 0 {
		t.Fatalf("%d rows without a fencing token", stale)
	}
}
