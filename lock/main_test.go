package lock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/erpsync/erpsync/internal/redistest"
	"github.com/erpsync/erpsync/lock"
)

// redisAddr is the shared test Redis; REDIS_ADDR overrides it.
var redisAddr = func() string {
	if a := os.Getenv("REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}()

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperProcess())
	}
	if os.Getenv(manyHelperEnv) != "" {
		os.Exit(manyHelperProcess())
	}
	// A go-redis pool that failed to dial a killed node probes it again
	// from a goroutine that sleeps a second between probes and ends at
	// the first probe after the pool is closed: a test that ends right
	// after killing nodes leaves it for up to a second, longer than
	// goleak waits.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"),
		goleak.Cleanup(func(code int) {
			deleteRunKeys()
			os.Exit(code)
		}))
}

// runPrefix starts every key prefix of this test run (see randomPrefix).
var runPrefix = "erpsync:test:" + randomHex(6) + ":"

// deleteRunKeys deletes the keys this run left in the shared Redis. It
// runs once at the end: the shared Redis may hold millions of other keys,
// and a SCAN through them per test would cost seconds each. Every key the
// lock writes expires anyway (fence counters after an hour).
func deleteRunKeys() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer func() { _ = rdb.Close() }()
	if err := redistest.DeletePrefix(rdb, runPrefix); err != nil {
		fmt.Fprintf(os.Stderr, "delete %s*: %v\n", runPrefix, err)
	}
}

// newRedis returns a client of addr closed at the end of the test. Its
// deadlines come from ctx, as the lock package asks.
func newRedis(t testing.TB, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// randomPrefix returns a key prefix of its own for one test, under
// runPrefix.
func randomPrefix() string { return runPrefix + randomHex(6) + ":" }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

type bundle struct {
	rdb    *redis.Client
	client *lock.Client
	prefix string
}

// setup returns a client of the shared Redis with a key prefix of its own;
// the keys under it are deleted at the end of the run. opt may be nil.
func setup(t testing.TB, opt *lock.Options) *bundle {
	t.Helper()
	rdb := newRedis(t, redisAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("Redis at %s is needed for these tests: %v", redisAddr, err)
	}
	var o lock.Options
	if opt != nil {
		o = *opt
	}
	if o.Prefix == "" {
		o.Prefix = randomPrefix()
	}
	return &bundle{rdb: rdb, client: lock.New(rdb, &o), prefix: o.Prefix}
}

// startCluster starts a one-node Redis Cluster that serves every slot, and
// returns a cluster client of it. A one-node cluster still refuses a script
// whose keys span slots, which is what the batch calls must respect.
func startCluster(t testing.TB) (*redistest.Server, *redis.ClusterClient) {
	t.Helper()
	s := redistest.Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	node := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer func() { _ = node.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := node.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatalf("cluster addslotsrange: %v", err)
	}
	waitClusterOK(ctx, t, node)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{s.Addr},
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	return s, rdb
}

// waitDone waits up to d for ctx to end.
func waitDone(t testing.TB, ctx context.Context, d time.Duration) {
	t.Helper()
	if ctx.Err() != nil {
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
		t.Fatalf("context not done after %v", d)
	}
}

func mustObtain(t testing.TB, c *lock.Client, key string, ttl time.Duration) *lock.Lock {
	t.Helper()
	return mustObtainWith(t, c, key, ttl, nil)
}

func mustObtainWith(t testing.TB, c *lock.Client, key string, ttl time.Duration, opt *lock.ObtainOptions) *lock.Lock {
	t.Helper()
	l, err := c.Obtain(context.Background(), key, ttl, opt)
	if err != nil {
		t.Fatalf("obtain %s: %v", key, err)
	}
	return l
}

// helperEnv starts the test binary as a lock holder process; see
// TestMutualExclusionProcesses.
const helperEnv = "LOCK_TEST_HELPER"

// helperProcess obtains and releases one key many times, writing an enter
// and an exit line around each critical section to a shared log file.
func helperProcess() int {
	prefix, key, logPath := os.Getenv("LOCK_TEST_PREFIX"), os.Getenv("LOCK_TEST_KEY"), os.Getenv("LOCK_TEST_LOG")
	n, _ := strconv.Atoi(os.Getenv("LOCK_TEST_N"))
	onDemand := os.Getenv("LOCK_TEST_ON_DEMAND") == "true"
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	defer func() { _ = rdb.Close() }()
	c := lock.New(rdb, &lock.Options{Prefix: prefix})
	f, err := os.OpenFile(filepath.Clean(logPath), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer func() { _ = f.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pid := os.Getpid()
	for range n {
		l, err := c.Obtain(ctx, key, 5*time.Second, &lock.ObtainOptions{
			Retry:         lock.ExponentialBackoff(200*time.Microsecond, 5*time.Millisecond),
			FenceOnDemand: onDemand,
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "obtain:", err)
			return 1
		}
		fence, err := l.FetchFence(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fetch fence:", err)
			return 1
		}
		fmt.Fprintf(f, "enter %s %d %d\n", key, pid, fence)
		time.Sleep(100 * time.Microsecond)
		fmt.Fprintf(f, "exit %s %d %d\n", key, pid, fence)
		if err := l.Release(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			return 1
		}
	}
	return 0
}

// waitClusterOK waits until node reports cluster_state:ok, or fails t when
// ctx ends first.
func waitClusterOK(ctx context.Context, t testing.TB, node *redis.Client) {
	t.Helper()
	for {
		info, err := node.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("cluster did not come up: %v %q", err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
