package lock_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/internal/redistest"
	"github.com/erpsync/erpsync/lock"
)

// startCluster3 starts a Redis Cluster of three masters on loopback, the
// slots split between them by redis-cli, and returns a cluster client and
// a direct client of each master.
func startCluster3(t testing.TB) (*redis.ClusterClient, []*redis.Client) {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatalf("redis-cli is needed in PATH for this test: %v", err)
	}
	args := []string{"--cluster", "create"}
	var nodes []*redis.Client
	for range 3 {
		s := redistest.Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000")
		args = append(args, s.Addr)
		nodes = append(nodes, newRedis(t, s.Addr))
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, node := range nodes {
		waitClusterOK(ctx, t, node)
	}
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Options().Addr
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	// The client learns the slot map on its first call; make sure it sees
	// all three masters.
	for {
		var n atomic.Int32 // ForEachMaster calls back concurrently
		err := rdb.ForEachMaster(ctx, func(context.Context, *redis.Client) error {
			n.Add(1)
			return nil
		})
		if err == nil && n.Load() == 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("cluster client sees %d masters: %v", n.Load(), err)
		}
		rdb.ReloadState(ctx)
		time.Sleep(20 * time.Millisecond)
	}
	return rdb, nodes
}

// TestCluster runs the lock against a real three-master cluster: every call
// on keys spread over all masters, each lock key next to its slot's fence
// counter (same slot, same master), mutual exclusion and fences.
func TestCluster(t *testing.T) {
	rdb, masters := startCluster3(t)
	ctx := context.Background()
	prefix := randomPrefix()
	c := lock.New(rdb, &lock.Options{Prefix: prefix})

	keys := make([]string, 300)
	for i := range keys {
		keys[i] = fmt.Sprintf("erp:%d", i)
	}
	slots := map[uint16]bool{}
	for _, k := range keys {
		slots[lock.Slot(lock.LockKey(c, k))] = true
	}
	if len(slots) < lock.ClusterBuckets*9/10 {
		t.Fatalf("only %d slots for %d keys in %d buckets", len(slots), len(keys), lock.ClusterBuckets)
	}

	// fences holds the last fence of every key, across the subtests.
	fences := map[string]int64{}

	t.Run("ObtainMany", func(t *testing.T) {
		for round := range 3 {
			locks, err := c.ObtainMany(ctx, keys, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			for i, l := range locks {
				if l == nil {
					t.Fatalf("round %d: %s not granted", round, keys[i])
				}
				if l.Fence() <= fences[keys[i]] {
					t.Fatalf("round %d: %s fence %d after %d", round, keys[i], l.Fence(), fences[keys[i]])
				}
				fences[keys[i]] = l.Fence()
			}
			if round == 0 {
				checkSpread(t, masters, c, prefix, keys)
				// Another client is refused every key.
				theirs, err := lock.New(rdb, &lock.Options{Prefix: prefix}).ObtainMany(ctx, keys[:50], time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				for i, l := range theirs {
					if l != nil {
						t.Fatalf("%s granted twice", keys[i])
					}
				}
			}
			if n, err := c.ReleaseMany(ctx, locks); err != nil || n != 0 {
				t.Fatalf("ReleaseMany = %d, %v", n, err)
			}
		}
		for _, m := range masters {
			if n := countPrefix(t, m, prefix, false); n != 0 {
				t.Errorf("%s keeps %d lock keys after ReleaseMany", m.Options().Addr, n)
			}
		}
	})

	t.Run("Single", func(t *testing.T) {
		for _, k := range keys[:30] {
			l := mustObtain(t, c, k, time.Minute)
			if l.Fence() <= fences[k] {
				t.Fatalf("%s: fence %d after %d", k, l.Fence(), fences[k])
			}
			fences[k] = l.Fence()
			if err := l.Refresh(ctx, 2*time.Minute); err != nil {
				t.Fatalf("%s: Refresh: %v", k, err)
			}
			if ttl, err := l.TTL(ctx); err != nil || ttl <= time.Minute {
				t.Fatalf("%s: TTL = %v, %v", k, ttl, err)
			}
			if _, err := c.Obtain(ctx, k, time.Minute, nil); !errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("%s: second Obtain: err = %v, want ErrNotObtained", k, err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("%s: Release: %v", k, err)
			}
		}
	})

	t.Run("FenceOnDemand", func(t *testing.T) {
		for _, k := range keys[30:60] {
			l := mustObtainWith(t, c, k, time.Minute, onDemand)
			f, err := l.FetchFence(ctx)
			if err != nil {
				t.Fatalf("%s: FetchFence: %v", k, err)
			}
			if f <= fences[k] {
				t.Fatalf("%s: fetched token %d after %d", k, f, fences[k])
			}
			fences[k] = f
			if err := l.Release(ctx); err != nil {
				t.Fatalf("%s: Release: %v", k, err)
			}
			if next := mustObtain(t, c, k, time.Minute); next.Fence() <= f {
				t.Fatalf("%s: next grant's token %d after the fetched %d", k, next.Fence(), f)
			} else if err := next.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("Hold", func(t *testing.T) {
		const ttl = 300 * time.Millisecond
		var locks []*lock.Lock
		var hctxs []context.Context
		for _, k := range keys[100:103] {
			l := mustObtain(t, c, k, ttl)
			locks = append(locks, l)
			hctxs = append(hctxs, l.Hold(ctx))
		}
		time.Sleep(3 * ttl)
		for i, l := range locks {
			if hctxs[i].Err() != nil {
				t.Errorf("%s: hold context ended: %v", l.Key(), context.Cause(hctxs[i]))
			}
			if err := l.Release(ctx); err != nil {
				t.Errorf("%s: Release after holding: %v", l.Key(), err)
			}
		}
	})

	t.Run("MutualExclusion", func(t *testing.T) {
		lockers := make([]obtainer, 6)
		for i := range lockers {
			lockers[i] = lock.New(rdb, &lock.Options{Prefix: prefix})
		}
		checkMutualExclusion(t, lockers, 30, 20*time.Second, 50*time.Microsecond, func() lock.RetryStrategy {
			return lock.ExponentialBackoff(100*time.Microsecond, 4*time.Millisecond)
		})
	})

	t.Run("ObtainManyShared", func(t *testing.T) {
		testObtainMany(t, rdb, randomPrefix())
	})
}

// checkSpread checks that the lock keys of keys live on all masters, each
// on the master that also has its slot's fence counter, and that a master
// keeps one counter per slot it granted a key in.
func checkSpread(t *testing.T, masters []*redis.Client, c *lock.Client, prefix string, keys []string) {
	t.Helper()
	ctx := context.Background()
	counters := map[string]bool{}
	for _, k := range keys {
		ck, ttl := lock.Counter(c, k)
		if ttl != 0 {
			t.Fatalf("%s: counter %s with TTL %v, want none", k, ck, ttl)
		}
		if lk := lock.LockKey(c, k); lock.Slot(ck) != lock.Slot(lk) {
			t.Fatalf("%s: counter %s in slot %d, lock key in %d", k, ck, lock.Slot(ck), lock.Slot(lk))
		}
		counters[ck] = true
	}
	total := 0
	for _, m := range masters {
		locks, fences := countPrefix(t, m, prefix, false), countPrefix(t, m, prefix, true)
		if locks == 0 {
			t.Errorf("master %s holds no lock key: keys not spread", m.Options().Addr)
		}
		total += fences
	}
	if total != len(counters) {
		t.Errorf("%d fence counters on the masters, want one per slot: %d", total, len(counters))
	}
	for _, k := range keys[:20] {
		lk := lock.LockKey(c, k)
		ck, _ := lock.Counter(c, k)
		for _, m := range masters {
			hasLock := m.Exists(ctx, lk).Val() == 1
			hasFence := m.Exists(ctx, ck).Val() == 1
			if hasLock != hasFence {
				t.Errorf("%s: lock key on %s: %v, fence counter %s: %v", k, m.Options().Addr, hasLock, ck, hasFence)
			}
		}
	}
}

// countPrefix counts the lock keys (or the fence counters, epoch counters
// left out) under prefix on one master.
func countPrefix(t *testing.T, m *redis.Client, prefix string, fences bool) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	iter := m.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		if fences && strings.HasSuffix(k, ":fence") || !fences && !lock.IsCounter(k) {
			n++
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}
