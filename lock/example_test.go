package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/lock"
)

// exampleClient returns a lock client of the local Redis with a key
// prefix of its own, so that examples never meet each other's keys, and a
// function that closes the connection. TestMain deletes the keys.
func exampleClient() (*lock.Client, func()) {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	return lock.New(rdb, &lock.Options{Prefix: randomPrefix()}), func() { _ = rdb.Close() }
}

func Example() {
	client, closeRedis := exampleClient()
	defer closeRedis()
	ctx := context.Background()

	l, err := client.Obtain(ctx, "erp:4711", 10*time.Second, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("obtained", l.Key())

	// A second holder is refused while the lock is held.
	_, err = client.Obtain(ctx, "erp:4711", 10*time.Second, nil)
	fmt.Println(err)

	if err := l.Release(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// obtained erp:4711
	// lock: not obtained
}

// store is a storage that refuses writes from an older lock holder: it
// keeps, per record, the largest fencing token it has accepted.
type store struct {
	mu    sync.Mutex
	fence map[string]int64
	value map[string]string
}

var errStaleFence = errors.New("store: stale fencing token")

func (s *store) Write(id string, fence int64, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fence < s.fence[id] {
		return errStaleFence
	}
	s.fence[id], s.value[id] = fence, value
	return nil
}

// A holder pauses (a GC stop, a stopped VM) past its lease, and another
// obtains the record and writes. When the first one wakes up and writes,
// the lock can no longer stop it: the storage refuses its older token.
func Example_fencing() {
	client, closeRedis := exampleClient()
	defer closeRedis()
	ctx := context.Background()
	db := &store{fence: map[string]int64{}, value: map[string]string{}}

	slow, _ := client.Obtain(ctx, "erp:1", 50*time.Millisecond, nil)
	time.Sleep(100 * time.Millisecond) // paused past the lease

	fast, _ := client.Obtain(ctx, "erp:1", time.Second, nil)
	fmt.Println("fast writes:", db.Write("erp:1", fast.Fence(), "v2"))

	fmt.Println("slow writes:", db.Write("erp:1", slow.Fence(), "v1"))
	fmt.Println("slow releases:", slow.Release(ctx))
	fmt.Println("stored:", db.value["erp:1"])
	_ = fast.Release(ctx)
	// Output:
	// fast writes: <nil>
	// slow writes: store: stale fencing token
	// slow releases: lock: not held: taken by another holder
	// stored: v2
}

// A job holds its lock for as long as it runs; the watchdog renews the
// lease and cancels the job's context if the lock is lost.
func ExampleLock_Hold() {
	client, closeRedis := exampleClient()
	defer closeRedis()
	ctx := context.Background()

	l, err := client.Obtain(ctx, "job", 200*time.Millisecond, &lock.ObtainOptions{
		Retry: lock.LimitRetry(lock.ExponentialBackoff(10*time.Millisecond, time.Second), 5),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	jobCtx := l.Hold(ctx)

	select {
	case <-time.After(700 * time.Millisecond): // the job, longer than the TTL
		fmt.Println("job done, lock still held:", jobCtx.Err() == nil)
	case <-jobCtx.Done():
		fmt.Println("lock lost:", context.Cause(jobCtx))
	}
	fmt.Println(l.Release(ctx))
	// Output:
	// job done, lock still held: true
	// <nil>
}

func ExampleClient_ObtainMany() {
	client, closeRedis := exampleClient()
	defer closeRedis()
	ctx := context.Background()

	other, _ := client.Obtain(ctx, "erp:2", time.Minute, nil)
	defer func() { _ = other.Release(ctx) }()

	locks, err := client.ObtainMany(ctx, []string{"erp:1", "erp:2", "erp:3"}, time.Minute)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range locks {
		if l == nil {
			fmt.Println("held by another, skip for now")
			continue
		}
		fmt.Println("write", l.Key())
	}
	notHeld, err := client.ReleaseMany(ctx, locks)
	fmt.Println(notHeld, err)
	// Output:
	// write erp:1
	// held by another, skip for now
	// write erp:3
	// 0 <nil>
}

// A lock obtained with FenceOnDemand costs a plain SET; the holder fetches
// its fencing token only on the path that writes. A holder paused past
// its lease gets no token at all, so it never writes.
func ExampleLock_FetchFence() {
	client, closeRedis := exampleClient()
	defer closeRedis()
	ctx := context.Background()
	db := &store{fence: map[string]int64{}, value: map[string]string{}}
	onDemand := &lock.ObtainOptions{FenceOnDemand: true}

	slow, _ := client.Obtain(ctx, "erp:1", 50*time.Millisecond, onDemand)
	fmt.Println("token at the grant:", slow.Fence())
	time.Sleep(100 * time.Millisecond) // paused past the lease

	fast, _ := client.Obtain(ctx, "erp:1", time.Second, onDemand)
	if fence, err := fast.FetchFence(ctx); err == nil {
		fmt.Println("fast writes:", db.Write("erp:1", fence, "v2"))
	}
	if _, err := slow.FetchFence(ctx); err != nil {
		fmt.Println("slow:", err)
	}
	fmt.Println("stored:", db.value["erp:1"])
	_ = fast.Release(ctx)
	// Output:
	// token at the grant: 0
	// fast writes: <nil>
	// slow: lock: not held: taken by another holder
	// stored: v2
}
