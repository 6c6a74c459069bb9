package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/redisproc"
)

// erpsync against a Redis Cluster of three masters (--redis-cluster), as
// a team runs it: two runs and a backfill at once give the ERP's truth and
// leave no lock behind on any master; a master that hangs for a moment
// mid-run (SIGSTOP, shorter than the calls' timeouts) delays the run but
// loses nothing; a version watcher sees no row go back.
func TestRedisClusterAcrossThreeMasters(t *testing.T) {
	t.Parallel()
	masters, err := redisproc.StartCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { redisproc.StopAll(masters) })
	e := setup(t, erpmock.Options{Records: 1500, Seed: 43})
	ctx := context.Background()
	cluster := []string{"--redis-cluster", "--redis-addr", strings.Join(redisproc.Addrs(masters), ","), "--lock-ttl", "5s"}
	w := e.Watch()

	done := make(chan string, 3)
	for _, args := range [][]string{{"run"}, {"run"}, {"backfill", "--since", "2024-01-01T00:00:00Z"}} {
		go func() {
			r := e.Run(ctx, append(args, cluster...)...)
			done <- fmt.Sprintf("%v exit %d %s", args, r.Code, r.Out())
		}()
	}
	for range 3 {
		if r := <-done; !strings.Contains(r, "exit 0") {
			t.Fatal(r)
		}
	}
	e.assertTruth()
	e.assertNoLocksOn(redisproc.Addrs(masters))

	e.Mock.Change(40)
	p := e.Start(append([]string{"run"}, cluster...)...)
	masters[0].Pause()
	time.Sleep(1500 * time.Millisecond)
	masters[0].Resume()
	if r := p.Wait(); r.Code != 0 {
		t.Fatalf("run with a master hung for 1.5 s: exit %d %s", r.Code, r.Out())
	}
	if polls, downs := w.Stop(); len(downs) > 0 {
		t.Errorf("erp_version went down (%d polls): %v", polls, downs)
	}
	e.assertTruth()
	e.assertNoLocksOn(redisproc.Addrs(masters))
}
