package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/proctest"
)

// assertNoLocksOn fails the test if a Redis at one of addrs holds a lock
// under the test's prefix: what a topology's masters must look like once
// every process has exited.
func (e *env) assertNoLocksOn(addrs []string) {
	e.T.Helper()
	for _, a := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: a})
		keys, err := rdb.Keys(context.Background(), e.Prefix+"{*").Result()
		_ = rdb.Close()
		if err != nil || len(keys) > 0 {
			e.T.Fatalf("%s holds %d locks after every process exited (%v), e.g. %q", a, len(keys), err, keys[:min(len(keys), 3)])
		}
	}
}

func TestRedlockAcrossThreeMasters(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 1500, Seed: 41})
	var addrs []string
	var masters []*proctest.Redis
	for i := 0; i < 3; i++ {
		r := proctest.StartRedis(t)
		addrs, masters = append(addrs, r.Addr), append(masters, r)
	}
	ctx := context.Background()
	list := strings.Join(addrs, ",")
	// Two runs and a backfill at once over Redlock: the truth, one skip at most.
	done := make(chan string, 3)
	for _, args := range [][]string{{"run"}, {"run"}, {"backfill", "--since", "2024-01-01T00:00:00Z"}} {
		go func() {
			r := e.Run(ctx, append(args, "--redis-addrs", list, "--lock-ttl", "5s")...)
			done <- fmt.Sprintf("%v exit %d %s", args, r.Code, r.Out())
		}()
	}
	for i := 0; i < 3; i++ {
		if r := <-done; !strings.Contains(r, "exit 0") {
			t.Fatal(r)
		}
	}
	e.assertTruth()
	// A process that exits leaves no lock behind on any master, the
	// slowest included: Release waits for every master, and erpsync waits
	// for the calls to slower masters that returned at a quorum (record
	// releases) before it exits. The quorum below, of the two masters that
	// stay up, needs the job lock gone from both.
	e.assertNoLocksOn(addrs)
	// One master down: the quorum (2 of 3) still locks.
	masters[0].Kill()
	e.Mock.Change(40)
	if r := e.Run(ctx, "run", "--redis-addrs", list); r.Code != 0 {
		t.Fatalf("run with 2 of 3 masters: exit %d %s", r.Code, r.Out())
	}
	e.assertTruth()
	// Two down: no quorum, a clear error at start, exit 2.
	masters[1].Kill()
	r := e.Run(ctx, "run", "--redis-addrs", list)
	if r.Code != 2 || !strings.Contains(r.Out(), "1 of 3 Redlock masters answer") {
		t.Fatalf("run with 1 of 3 masters: exit %d %s", r.Code, r.Out())
	}
}
