package lock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/lock"
)

// A Redlock grants a key where a quorum of independent masters (here 2 of
// 3) granted it, with a fencing token larger than any earlier grant's on
// that quorum: the lock survives the loss of a minority of masters. This
// example uses three databases of one local Redis as its three masters; a
// deployment points at three or five separate servers.
func ExampleRedlock() {
	prefix := randomPrefix()
	var nodes []redis.UniversalClient
	for db := 1; db <= 3; db++ {
		rdb := redis.NewClient(&redis.Options{Addr: redisAddr, DB: db, ContextTimeoutEnabled: true})
		defer dropPrefix(rdb, prefix)
		nodes = append(nodes, rdb)
	}
	// A generous node timeout: the first call to each node also dials it.
	rl := lock.NewRedlock(nodes, &lock.Options{Prefix: prefix, NodeTimeout: 500 * time.Millisecond})
	ctx := context.Background()

	l, err := rl.Obtain(ctx, "erp:4711", 10*time.Second, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("obtained on a quorum of", rl.Quorum(), "with a token:", l.Fence() > 0)
	_, err = rl.Obtain(ctx, "erp:4711", 10*time.Second, nil)
	fmt.Println(err)

	// A chunk of keys in one batch call per master.
	locks, err := rl.ObtainMany(ctx, []string{"erp:1", "erp:4711"}, 10*time.Second)
	fmt.Println(locks[0] != nil, locks[1] == nil, err)
	notHeld, err := rl.ReleaseMany(ctx, locks)
	fmt.Println(notHeld, err, l.Release(ctx))
	// Output:
	// obtained on a quorum of 2 with a token: true
	// lock: not obtained
	// true true <nil>
	// 0 <nil> <nil>
}

// On a Redis Cluster, New takes the cluster client: a lock key carries its
// key as hash tag (<prefix>{<key>}), and its fencing tokens come from one
// counter per hash slot, so ObtainMany sends one script call per slot.
func ExampleNew_cluster() {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"redis-0.redis:6379", "redis-1.redis:6379", "redis-2.redis:6379"},
		ContextTimeoutEnabled: true,
	})
	defer rdb.Close()
	client := lock.New(rdb, &lock.Options{Prefix: "myapp:lock:"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if l, err := client.Obtain(ctx, "invoice:42", 30*time.Second, nil); err == nil {
		defer l.Release(ctx)
		fmt.Println("write invoice 42 with fencing token", l.Fence())
	}
}

// dropPrefix deletes the keys an example left under prefix.
func dropPrefix(rdb *redis.Client, prefix string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
	_ = rdb.Close()
}
