package lock_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/lock"
)

func BenchmarkObtainRelease(b *testing.B) {
	bb := setup(b, nil)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		l, err := bb.client.Obtain(ctx, "erp:"+strconv.Itoa(i%1000), time.Minute, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkObtainReleaseParallel(b *testing.B) {
	bb := setup(b, nil)
	ctx := context.Background()
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			// Distinct keys: this measures throughput, not contention.
			l, err := bb.client.Obtain(ctx, "erp:"+strconv.FormatInt(next.Add(1)%100_000, 10), time.Minute, nil)
			if err != nil {
				b.Error(err)
				return
			}
			if err := l.Release(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

const chunk = 500

// BenchmarkObtainMany obtains and releases a chunk of 250 keys per op: on a
// single server with one script call (the default) and with a pipeline of
// one call per key, and on a one-node cluster with one call per slot (the
// default there) and one per key.
func BenchmarkObtainMany(b *testing.B) {
	b.Run("server/one-call", func(b *testing.B) {
		bb := setup(b, nil)
		benchObtainMany(b, bb.client)
	})
	b.Run("server/per-key", func(b *testing.B) {
		bb := setup(b, nil)
		lock.SplitByKey(bb.client)
		benchObtainMany(b, bb.client)
	})
	b.Run("cluster/per-slot", func(b *testing.B) {
		_, rdb := startCluster(b)
		benchObtainMany(b, lock.New(rdb, &lock.Options{Prefix: randomPrefix()}))
	})
	b.Run("cluster/per-key", func(b *testing.B) {
		_, rdb := startCluster(b)
		c := lock.New(rdb, &lock.Options{Prefix: randomPrefix()})
		lock.SplitByKey(c)
		benchObtainMany(b, c)
	})
}

// BenchmarkObtainManyCluster3 obtains and releases a chunk per op on a
// three-master cluster: one call per slot (each key its own hash tag) and
// with the keys in a number of buckets, each a hash tag.
func BenchmarkObtainManyCluster3(b *testing.B) {
	rdb, _ := startCluster3(b)
	for _, n := range []int{0, 16, 48, 128, 0, 16, 48, 128} {
		b.Run(fmt.Sprintf("buckets-%d", n), func(b *testing.B) {
			c := lock.New(rdb, &lock.Options{Prefix: randomPrefix()})
			lock.SetBuckets(c, n)
			benchObtainMany(b, c)
		})
	}
}

func benchObtainMany(b *testing.B, c *lock.Client) {
	ctx := context.Background()
	keys := make([][]string, 40)
	for j := range keys {
		keys[j] = make([]string, chunk)
		for i := range keys[j] {
			keys[j][i] = fmt.Sprintf("erp:%d", j*chunk+i)
		}
	}
	for i := 0; b.Loop(); i++ {
		locks, err := c.ObtainMany(ctx, keys[i%len(keys)], time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if n, err := c.ReleaseMany(ctx, locks); err != nil || n != 0 {
			b.Fatal(n, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*chunk), "ns/key")
}

// BenchmarkRoundTrip is the floor the lock calls are measured against: one
// GET.
func BenchmarkRoundTrip(b *testing.B) {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer func() { _ = rdb.Close() }()
	ctx := context.Background()
	for b.Loop() {
		if err := rdb.Get(ctx, "erpsync:bench:none").Err(); err != redis.Nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRedlockObtainRelease obtains and releases distinct keys over
// five local redis-servers; bench/lockbench compares it with redsync.
func BenchmarkRedlockObtainRelease(b *testing.B) {
	bb := setupRedlock(b, 5, nil)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		l, err := bb.rl.Obtain(ctx, "erp:"+strconv.Itoa(i%1000), time.Minute, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
