package lock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/internal/lock"
)

func testObtainMany(t *testing.T, rdb redis.UniversalClient, prefix string) {
	ctx := context.Background()
	ours := lock.New(rdb, &lock.Options{Prefix: prefix})
	theirs := lock.New(rdb, &lock.Options{Prefix: prefix})

	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprintf("erp:%04d", i)
	}
	preHeld := map[int]*lock.Lock{}
	for _, i := range []int{0, 7, 8, 39} {
		preHeld[i] = mustObtain(t, theirs, keys[i], time.Minute)
	}

	locks, err := ours.ObtainMany(ctx, keys, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(locks) != len(keys) {
		t.Fatalf("%d results for %d keys", len(locks), len(keys))
	}
	fences := map[int64]bool{}
	for i, l := range locks {
		if _, held := preHeld[i]; held != (l == nil) {
			t.Fatalf("keys[%d]: lock %v, pre-held %v", i, l, held)
		}
		if l == nil {
			continue
		}
		if l.Key() != keys[i] || l.Fence() <= 0 || len(l.Token()) < 27 {
			t.Errorf("keys[%d]: key %q fence %d token %q", i, l.Key(), l.Fence(), l.Token())
		}
		// One server hands out distinct fences within a batch. A fence is
		// per key: on a cluster, keys on different masters may share a
		// value read from two clocks.
		if _, cluster := rdb.(*redis.ClusterClient); fences[l.Fence()] && !cluster {
			t.Errorf("fence %d granted twice", l.Fence())
		}
		fences[l.Fence()] = true
		if got := rdb.Get(ctx, prefix+"{"+keys[i]+"}").Val(); got != l.Token() {
			t.Errorf("keys[%d] in Redis = %q, want its token", i, got)
		}
	}

	// One of ours expired and was taken by another: ReleaseMany counts it
	// and leaves the new holder alone.
	rdb.PExpire(ctx, prefix+"{"+keys[3]+"}", time.Millisecond)
	time.Sleep(5 * time.Millisecond)
	taker := mustObtain(t, theirs, keys[3], time.Minute)
	if taker.Fence() <= locks[3].Fence() {
		t.Errorf("fence %d after %d", taker.Fence(), locks[3].Fence())
	}

	notHeld, err := ours.ReleaseMany(ctx, locks)
	if err != nil {
		t.Fatal(err)
	}
	if notHeld != 1 {
		t.Errorf("notHeld = %d, want 1", notHeld)
	}
	for i := range keys {
		want := ""
		if l := preHeld[i]; l != nil {
			want = l.Token()
		}
		if i == 3 {
			want = taker.Token()
		}
		if got := rdb.Get(ctx, prefix+"{"+keys[i]+"}").Val(); got != want {
			t.Errorf("keys[%d] after ReleaseMany = %q, want %q", i, got, want)
		}
	}

	// The next batch gets larger fences for every key.
	again, err := ours.ObtainMany(ctx, keys[1:7], time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for j, l := range again {
		i := j + 1
		switch {
		case i == 3 && l != nil:
			t.Errorf("keys[3] is the taker's")
		case i != 3 && l == nil:
			t.Errorf("keys[%d] not granted", i)
		case l != nil && l.Fence() <= locks[i].Fence():
			t.Errorf("keys[%d]: fence %d after %d", i, l.Fence(), locks[i].Fence())
		}
	}
	if n, err := ours.ReleaseMany(ctx, again); err != nil || n != 0 {
		t.Errorf("ReleaseMany = %d, %v", n, err)
	}
	if n, err := ours.ReleaseMany(ctx, []*lock.Lock{nil, nil}); err != nil || n != 0 {
		t.Errorf("ReleaseMany of nils = %d, %v", n, err)
	}
	if got, err := ours.ObtainMany(ctx, nil, time.Minute); err != nil || len(got) != 0 {
		t.Errorf("ObtainMany(nil) = %v, %v", got, err)
	}
}

func TestObtainMany(t *testing.T) {
	b := setup(t, nil)
	testObtainMany(t, b.rdb, b.prefix)
}

func TestObtainManyCluster(t *testing.T) {
	_, rdb := startCluster(t)
	testObtainMany(t, rdb, randomPrefix())
}

func TestObtainManyRepeatedKey(t *testing.T) {
	b := setup(t, nil)
	locks, err := b.client.ObtainMany(context.Background(), []string{"a", "b", "a"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if locks[0] == nil || locks[1] == nil || locks[2] != nil {
		t.Fatalf("locks = %v, want the repeated key granted once", locks)
	}
}

// The slot function agrees with the server, and keys that share a slot go
// in one script call that the cluster accepts.
func TestClusterSlots(t *testing.T) {
	s, rdb := startCluster(t)
	node := newRedis(t, s.addr())
	ctx := context.Background()
	prefix := randomPrefix()
	c := lock.New(rdb, &lock.Options{Prefix: prefix})

	bySlot := map[int64][]string{}
	for i := range 3000 {
		key := fmt.Sprintf("erp:%d", i)
		want, err := node.ClusterKeySlot(ctx, prefix+"{"+key+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := lock.Slot(prefix + "{" + key + "}:fence"); int64(got) != want {
			t.Fatalf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", key, got, want)
		}
		bySlot[want] = append(bySlot[want], key)
	}
	for _, k := range []string{"", "{}", "a{}b", "}{x", "{a", "plain"} {
		want := node.ClusterKeySlot(ctx, k).Val()
		if got := lock.Slot(k); int64(got) != want {
			t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", k, got, want)
		}
	}

	var keys []string
	for _, ks := range bySlot {
		if len(ks) > 1 {
			keys = append(keys, ks...)
		}
		if len(keys) > 20 {
			break
		}
	}
	if len(keys) < 4 {
		t.Fatalf("found only %d keys sharing slots", len(keys))
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	locks, err := c.ObtainMany(ctx, keys, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range locks {
		if l == nil {
			t.Errorf("%s not granted", keys[i])
		}
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.ReleaseMany(ctx, locks); err != nil || n != 0 {
		t.Fatalf("ReleaseMany = %d, %v", n, err)
	}
	if n := node.Exists(ctx, prefix+"{"+keys[0]+"}").Val(); n != 0 {
		t.Errorf("released key still exists")
	}
}

func TestReleaseManyStopsWatchdogs(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	locks, err := b.client.ObtainMany(ctx, []string{"a", "b"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	h := locks[0].Hold(ctx)
	if _, err := b.client.ReleaseMany(ctx, locks); err != nil {
		t.Fatal(err)
	}
	waitDone(t, h, 0)
	if errors.Is(context.Cause(h), lock.ErrLost) {
		t.Errorf("cause %v, want no loss", context.Cause(h))
	}
}
