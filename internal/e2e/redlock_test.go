package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/syncer"
)

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
	// A run's release returns once a quorum released, and its process may
	// exit before the last node's call lands: that node keeps the job lock
	// until its lease ends. Wait until the two masters that stay up hold
	// none, so that the quorum below is theirs to give.
	for _, m := range masters[1:] {
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr})
		defer rdb.Close()
		pattern := e.Prefix + "*" + syncer.JobLockKey(e.Job)
		if !proctest.Eventually(45*time.Second, func() bool {
			keys, err := rdb.Keys(ctx, pattern).Result()
			return err == nil && len(keys) == 0
		}) {
			t.Fatalf("master %s still holds the job lock %s", m.Addr, pattern)
		}
	}
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
