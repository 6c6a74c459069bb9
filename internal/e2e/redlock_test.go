package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/erpmock"
)

// startRedis starts a redis-server without persistence on a free port and
// returns its address and a function that kills it.
func startRedis(t *testing.T) (string, func()) {
	t.Helper()
	addr := freeAddr(t)
	port := addr[strings.LastIndex(addr, ":")+1:]
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	kill := func() { cmd.Process.Kill(); cmd.Wait() }
	t.Cleanup(kill)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	for i := 0; rdb.Ping(context.Background()).Err() != nil; i++ {
		if i > 200 {
			t.Fatalf("redis-server on %s never answered", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return addr, kill
}

func TestRedlockAcrossThreeMasters(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 1500, Seed: 41})
	var addrs []string
	var kills []func()
	for i := 0; i < 3; i++ {
		a, k := startRedis(t)
		addrs, kills = append(addrs, a), append(kills, k)
	}
	ctx := context.Background()
	list := strings.Join(addrs, ",")
	// Two runs and a backfill at once over Redlock: the truth, one skip at most.
	done := make(chan string, 3)
	for _, args := range [][]string{{"run"}, {"run"}, {"backfill", "--since", "2024-01-01T00:00:00Z"}} {
		go func() {
			out, code := e.run(ctx, append(args, "--redis-addrs", list)...)
			done <- fmt.Sprintf("%v exit %d %s", args, code, out)
		}()
	}
	for i := 0; i < 3; i++ {
		if r := <-done; !strings.Contains(r, "exit 0") {
			t.Fatal(r)
		}
	}
	e.assertTruth()
	// One master down: the quorum (2 of 3) still locks.
	kills[0]()
	e.mock.Change(40)
	if out, code := e.run(ctx, "run", "--redis-addrs", list); code != 0 {
		t.Fatalf("run with 2 of 3 masters: exit %d %s", code, out)
	}
	e.assertTruth()
	// Two down: no quorum, a clear error at start, exit 2.
	kills[1]()
	out, code := e.run(ctx, "run", "--redis-addrs", list)
	if code != 2 || !strings.Contains(out, "1 of 3 Redlock masters answer") {
		t.Fatalf("run with 1 of 3 masters: exit %d %s", code, out)
	}
}
