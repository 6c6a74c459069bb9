package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/lock"
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
		// One server hands out distinct fences within a batch, from its
		// one counter. A cluster counts per slot: keys of different slots
		// may share a value read from two counters or two clocks.
		if _, cluster := rdb.(*redis.ClusterClient); fences[l.Fence()] && !cluster {
			t.Errorf("fence %d granted twice", l.Fence())
		}
		fences[l.Fence()] = true
		if got := rdb.Get(ctx, lock.LockKey(ours, keys[i])).Val(); got != l.Token() {
			t.Errorf("keys[%d] in Redis = %q, want its token", i, got)
		}
	}

	// One of ours expired and was taken by another: ReleaseMany counts it
	// and leaves the new holder alone.
	rdb.PExpire(ctx, lock.LockKey(ours, keys[3]), time.Millisecond)
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
		if got := rdb.Get(ctx, lock.LockKey(ours, keys[i])).Val(); got != want {
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

// ReleaseMany of locks from several grants, their tokens interleaved
// (the call codes runs of one token, see tokens.lua), deletes each key
// that carries its lock's token once: a lock named twice is released by
// its first entry and not held at its second.
func TestReleaseManyMixedTokens(t *testing.T) {
	ctx := context.Background()
	b := setup(t, nil)
	first, err := b.client.ObtainMany(ctx, []string{"a", "b", "c"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.client.ObtainMany(ctx, []string{"d", "e"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if first[0].Token() != first[2].Token() || first[0].Token() == second[0].Token() {
		t.Fatalf("tokens %q %q %q: want one per ObtainMany", first[0].Token(), first[2].Token(), second[0].Token())
	}
	single := mustObtain(t, b.client, "f", time.Minute)
	locks := []*lock.Lock{first[0], second[0], first[1], single, second[1], first[2], first[0]}
	notHeld, err := b.client.ReleaseMany(ctx, locks)
	if err != nil {
		t.Fatal(err)
	}
	if notHeld != 1 {
		t.Errorf("notHeld = %d, want 1 (the second entry of a)", notHeld)
	}
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		if n := b.rdb.Exists(ctx, lock.LockKey(b.client, k)).Val(); n != 0 {
			t.Errorf("key %s still held after ReleaseMany", k)
		}
	}
}

// The slot function agrees with the server, and keys that share a slot go
// in one script call that the cluster accepts.
func TestClusterSlots(t *testing.T) {
	s, rdb := startCluster(t)
	node := newRedis(t, s.Addr)
	ctx := context.Background()
	prefix := randomPrefix()
	c := lock.New(rdb, &lock.Options{Prefix: prefix})

	bySlot := map[int64][]string{}
	for i := range 3000 {
		key := fmt.Sprintf("erp:%d", i)
		if got, want := lock.Slot(prefix+"{"+key+"}:fence"), node.ClusterKeySlot(ctx, prefix+"{"+key+"}").Val(); int64(got) != want {
			t.Fatalf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", key, got, want)
		}
		want, err := node.ClusterKeySlot(ctx, lock.LockKey(c, key)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ck, _ := lock.Counter(c, key); lock.Slot(ck) != uint16(want) {
			t.Fatalf("counter %s of %s in slot %d, want %d", ck, key, lock.Slot(ck), want)
		}
		bySlot[want] = append(bySlot[want], key)
	}
	// Every slot's counter tag hashes to that slot, as the server says.
	pipe := node.Pipeline()
	tagSlots := make([]*redis.IntCmd, 16384)
	for s := range tagSlots {
		tagSlots[s] = pipe.ClusterKeySlot(ctx, prefix+"slot{"+lock.SlotTag(uint16(s))+"}:fence")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for s, cmd := range tagSlots {
		if cmd.Val() != int64(s) {
			t.Fatalf("tag %q of slot %d: CLUSTER KEYSLOT says %d", lock.SlotTag(uint16(s)), s, cmd.Val())
		}
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
	if n := node.Exists(ctx, lock.LockKey(c, keys[0])).Val(); n != 0 {
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

// Each slot has a short tag of its own that hashes to it.
func TestSlotTags(t *testing.T) {
	seen := map[string]bool{}
	for s := range uint16(16384) {
		tag := lock.SlotTag(s)
		if tag == "" || len(tag) > 4 || strings.ContainsAny(tag, "{}") || seen[tag] {
			t.Fatalf("slot %d: tag %q", s, tag)
		}
		seen[tag] = true
		if got := lock.Slot("x{" + tag + "}y"); got != s {
			t.Fatalf("tag %q of slot %d hashes to %d", tag, s, got)
		}
	}
}

// Obtain and ObtainMany of one key go through the same counter, so its
// fences strictly increase however it is granted; the keys of one server
// share that counter, which ends at the last fence it handed out.
func TestFenceSharedByObtainAndObtainMany(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	keys := []string{"a", "b", "c", "d", "e"}
	last := map[string]int64{}
	var top int64
	check := func(l *lock.Lock) {
		t.Helper()
		if l.Fence() <= last[l.Key()] {
			t.Fatalf("%s: fence %d after %d", l.Key(), l.Fence(), last[l.Key()])
		}
		last[l.Key()] = l.Fence()
		top = max(top, l.Fence())
	}
	for round := range 50 {
		if round%2 == 0 {
			locks, err := b.client.ObtainMany(ctx, keys, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			for i, l := range locks {
				if l == nil {
					t.Fatalf("round %d: %s not granted", round, keys[i])
				}
				if i > 0 && l.Fence() <= locks[i-1].Fence() {
					t.Fatalf("round %d: fences %d, %d not increasing in key order", round, locks[i-1].Fence(), l.Fence())
				}
				check(l)
			}
			if _, err := b.client.ReleaseMany(ctx, locks); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for _, k := range keys[round%3:] {
			l := mustObtain(t, b.client, k, time.Minute)
			check(l)
			before := l.Fence()
			if err := l.Refresh(ctx, 2*time.Minute); err != nil || l.Fence() != before {
				t.Fatalf("Refresh: %v, fence %d -> %d", err, before, l.Fence())
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkBound(t, b.rdb, b.prefix+"server:fence", top)
	if n := b.rdb.Exists(ctx, b.prefix+"{a}:fence").Val(); n != 0 {
		t.Errorf("a per-key counter exists on a single server")
	}
}

// A fence counter that is not an integer fails the grant, and leaves no
// lock behind.
func TestFenceCounterNotAnInteger(t *testing.T) {
	for _, bad := range []func(context.Context, *redis.Client, string) error{
		func(ctx context.Context, rdb *redis.Client, k string) error { return rdb.LPush(ctx, k, "x").Err() },
		func(ctx context.Context, rdb *redis.Client, k string) error {
			return rdb.Set(ctx, k, "1.5e+15", 0).Err()
		},
	} {
		b := setup(t, nil)
		ctx := context.Background()
		if err := bad(ctx, b.rdb, b.prefix+"server:fence"); err != nil {
			t.Fatal(err)
		}
		if l, err := b.client.Obtain(ctx, "k", time.Minute, nil); err == nil || errors.Is(err, lock.ErrNotObtained) {
			t.Errorf("Obtain = %v, %v; want an error", l, err)
		}
		if n := b.rdb.Exists(ctx, b.prefix+"{k}").Val(); n != 0 {
			t.Errorf("Obtain left its lock key behind")
		}
		locks, err := b.client.ObtainMany(ctx, []string{"k", "l"}, time.Minute)
		if b.rdb.Type(ctx, b.prefix+"server:fence").Val() == "list" && (err == nil || locks != nil) {
			t.Errorf("ObtainMany = %v, %v; want an error", locks, err)
		}
		if err != nil {
			if n := b.rdb.Exists(ctx, b.prefix+"{k}", b.prefix+"{l}").Val(); n != 0 {
				t.Errorf("ObtainMany failed and left %d lock keys behind", n)
			}
		} else if _, err := b.client.ReleaseMany(ctx, locks); err != nil {
			t.Fatal(err)
		}
	}
}
