package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/testenv"
)

// Four processes share one --erp-rate: the ERP, which answers 429 above that
// rate, never has to. Without the cap the same load earns 429s.
func TestFourProcessesStayUnderTheSharedRate(t *testing.T) {
	t.Parallel()
	const rate = 40
	e := setup(t, erpmock.Options{Records: 600, Seed: 37})
	ctx := context.Background()
	burst := func(extra ...string) (requests, limited int64, took time.Duration) {
		e.Mock.SetFaults(erpmock.Faults{MaxRate: rate})
		before := e.Mock.Stats()
		start := time.Now()
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				args := append([]string{"backfill", "--since", "2024-01-01T00:00:00Z", "--page-size", "20", "--shard", fmt.Sprintf("%d/4", i)}, extra...)
				if r := e.Run(ctx, args...); r.Code != 0 {
					t.Errorf("backfill %d exit %d: %s", i, r.Code, r.Out())
				}
			}()
		}
		wg.Wait()
		after := e.Mock.Stats()
		return after.Requests - before.Requests, after.Statuses[429] - before.Statuses[429], time.Since(start)
	}
	key := testenv.RandomName("erpsync-test:rate:")
	req, limited, took := burst("--erp-rate", fmt.Sprintf("%d/s", rate), "--erp-rate-key", key)
	t.Logf("with --erp-rate %d/s: %d requests in %s, %d answered 429", rate, req, took, limited)
	if limited != 0 {
		t.Fatalf("%d requests were answered 429 under a shared --erp-rate", limited)
	}
	if min := time.Duration(float64(req-1) / rate * float64(time.Second)); took < min-200*time.Millisecond {
		t.Fatalf("%d requests in %s: faster than %d/s allows", req, took, rate)
	}
	e.assertTruth()
	time.Sleep(1100 * time.Millisecond) // let the mock's bucket refill
	req, limited, took = burst()
	t.Logf("without a cap: %d requests in %s, %d answered 429", req, took, limited)
	if limited == 0 {
		t.Fatalf("the uncapped control earned no 429: the test would not see a broken limiter")
	}
}
