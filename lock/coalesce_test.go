package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/redistest"
	"github.com/erpsync/erpsync/lock"
)

// waitFor polls cond until it holds, or fails t after a generous while.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// obtained is the outcome of one Obtain.
type obtained struct {
	key string
	ttl time.Duration
	l   *lock.Lock
	err error
}

// obtainQueued occupies c's grants, starts one Obtain per key (with
// ttls[i % len(ttls)]), waits until all of them queued, and lets them go
// out together. It returns their outcomes in the order of keys.
func obtainQueued(t *testing.T, c *lock.Client, keys []string, ttls ...time.Duration) []obtained {
	t.Helper()
	resume := lock.Occupy(c, false)
	out := make([]obtained, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		out[i] = obtained{key: k, ttl: ttls[i%len(ttls)]}
		wg.Go(func() {
			out[i].l, out[i].err = c.Obtain(context.Background(), k, out[i].ttl, nil)
		})
	}
	waitFor(t, "the grants to queue", func() bool { g, _ := lock.Queued(c); return g == len(keys) })
	resume()
	wg.Wait()
	return out
}

// A lone call goes out at once and alone: nothing is batched.
func TestLoneCallsNotBatched(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	for i := range 3 {
		l := mustObtain(t, b.client, fmt.Sprint("k", i), time.Minute)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s := lock.Batches(b.client); s != (lock.BatchStats{}) {
		t.Errorf("batches = %+v, want none", s)
	}
}

// Grants queued behind one in flight go out as one batch; each caller gets
// its own token, fence and TTL, or ErrNotObtained for a key held by
// another or granted to another caller of the same batch.
func TestCoalescedObtain(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	other := mustObtain(t, b.client, "held", time.Minute)
	before := other.Fence()

	keys := []string{"held", "dup", "dup"}
	for i := range 20 {
		keys = append(keys, fmt.Sprint("k", i))
	}
	out := obtainQueued(t, b.client, keys, time.Minute, 3*time.Minute)
	if s := lock.Batches(b.client); s.GrantBatches != 1 || s.Grants != int64(len(keys)) {
		t.Errorf("batches = %+v, want one of %d grants", s, len(keys))
	}

	var dups int
	tokens := map[string]bool{}
	fences := map[int64]bool{}
	var maxFence int64
	for _, o := range out {
		switch {
		case o.key == "held":
			if !errors.Is(o.err, lock.ErrNotObtained) {
				t.Errorf("held: %v, %v; want ErrNotObtained", o.l, o.err)
			}
			continue
		case o.key == "dup" && errors.Is(o.err, lock.ErrNotObtained):
			dups++
			continue
		case o.err != nil:
			t.Fatalf("%s: %v", o.key, o.err)
		}
		if o.key == "dup" {
			dups++
		}
		if tokens[o.l.Token()] || fences[o.l.Fence()] {
			t.Errorf("%s: token or fence handed out twice: %s", o.key, o.l)
		}
		tokens[o.l.Token()], fences[o.l.Fence()] = true, true
		if o.l.Fence() <= before {
			t.Errorf("%s: fence %d not above the earlier %d", o.key, o.l.Fence(), before)
		}
		maxFence = max(maxFence, o.l.Fence())
		if v := b.rdb.Get(ctx, b.prefix+"{"+o.key+"}").Val(); v != o.l.Token() {
			t.Errorf("%s holds %q, want the caller's token", o.key, v)
		}
		// A lease of 3 minutes has more than one left, one of 1 minute not.
		pttl := b.rdb.PTTL(ctx, b.prefix+"{"+o.key+"}").Val()
		if (o.ttl > time.Minute) != (pttl > time.Minute) {
			t.Errorf("%s: TTL %v for a lease of %v", o.key, pttl, o.ttl)
		}
	}
	if dups != 2 || !fences[maxFence] {
		t.Errorf("dup: %d outcomes, want one grant and one ErrNotObtained", dups)
	}
	checkBound(t, b.rdb, b.prefix+"server:fence", maxFence)
	if l := mustObtain(t, b.client, "after", time.Minute); l.Fence() <= maxFence {
		t.Errorf("fence %d after the batch's %d", l.Fence(), maxFence)
	}
}

// Releases queued behind one in flight go out as one batch, and each
// caller learns what became of its own lock.
func TestCoalescedRelease(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	held := mustObtain(t, b.client, "held", time.Minute)
	expired := mustObtain(t, b.client, "expired", time.Minute)
	taken := mustObtain(t, b.client, "taken", time.Minute)
	held2 := mustObtain(t, b.client, "held2", time.Minute)
	b.rdb.Del(ctx, b.prefix+"{expired}")
	b.rdb.Set(ctx, b.prefix+"{taken}", "another", time.Minute)

	resume := lock.Occupy(b.client, true)
	locks := []*lock.Lock{held, expired, taken, held2}
	errs := make([]error, len(locks))
	var wg sync.WaitGroup
	for i, l := range locks {
		wg.Go(func() { errs[i] = l.Release(ctx) })
	}
	waitFor(t, "the releases to queue", func() bool { _, r := lock.Queued(b.client); return r == len(locks) })
	resume()
	wg.Wait()

	if s := lock.Batches(b.client); s.ReleaseBatches != 1 || s.Releases != int64(len(locks)) {
		t.Errorf("batches = %+v, want one of %d releases", s, len(locks))
	}
	for i, want := range []error{nil, lock.ErrExpired, lock.ErrTaken, nil} {
		if !errors.Is(errs[i], want) || (want == nil) != (errs[i] == nil) {
			t.Errorf("release %s = %v, want %v", locks[i].Key(), errs[i], want)
		}
	}
	if n := b.rdb.Exists(ctx, b.prefix+"{held}", b.prefix+"{held2}").Val(); n != 0 {
		t.Errorf("%d released keys still there", n)
	}
	if v := b.rdb.Get(ctx, b.prefix+"{taken}").Val(); v != "another" {
		t.Errorf("taken key holds %q, want the other holder's token", v)
	}
	if err := held.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("second release = %v, want ErrNotHeld", err)
	}
}

// A caller whose ctx ends while its grant waits in the queue gets its
// error at once, and the grant is not sent.
func TestCoalescedContextEndsQueued(t *testing.T) {
	var notObtained atomic.Int32
	b := setup(t, &lock.Options{Hooks: &lock.Hooks{NotObtained: func(string) { notObtained.Add(1) }}})
	ctx := context.Background()
	resume := lock.Occupy(b.client, false)
	cctx, cancel := context.WithCancel(ctx)
	gone := make(chan error, 1)
	go func() {
		_, err := b.client.Obtain(cctx, "gone", time.Minute, nil)
		gone <- err
	}()
	stay := make(chan error, 1)
	go func() {
		l, err := b.client.Obtain(ctx, "stay", time.Minute, nil)
		if err == nil {
			err = l.Release(ctx)
		}
		stay <- err
	}()
	waitFor(t, "the grants to queue", func() bool { g, _ := lock.Queued(b.client); return g == 2 })
	cancel()
	if err := <-gone; !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
		t.Errorf("Obtain = %v; want ErrNotObtained and context.Canceled", err)
	}
	if n := notObtained.Load(); n != 1 {
		t.Errorf("NotObtained called %d times, want 1", n)
	}
	resume()
	if err := <-stay; err != nil {
		t.Fatal(err)
	}
	if s := lock.Batches(b.client); s.Grants != 1 {
		t.Errorf("batches = %+v, want one grant sent", s)
	}
	if n := b.rdb.Exists(ctx, b.prefix+"{gone}").Val(); n != 0 {
		t.Errorf("the abandoned grant was made")
	}
}

// A caller whose ctx ends while its grant is in flight gets its error, and
// the grant, which comes back all the same, is released.
func TestCoalescedContextEndsInFlight(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	before := mustObtain(t, b.client, "before", time.Minute)
	cctx, cancel := context.WithCancel(ctx)
	returned := make(chan struct{})
	// The batch is taken from the queue with the caller still waiting;
	// the caller leaves before it is sent.
	lock.BeforeGrantBatch(b.client, func([]string) {
		cancel()
		<-returned
	})
	resume := lock.Occupy(b.client, false)
	go func() {
		defer close(returned)
		_, err := b.client.Obtain(cctx, "orphan", time.Minute, nil)
		if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.Canceled) {
			t.Errorf("Obtain = %v; want ErrNotObtained and context.Canceled", err)
		}
	}()
	waitFor(t, "the grant to queue", func() bool { g, _ := lock.Queued(b.client); return g == 1 })
	resume()
	<-returned
	waitFor(t, "the batch to end", func() bool { return lock.Idle(b.client) })
	if s := lock.Batches(b.client); s.Grants != 1 {
		t.Errorf("batches = %+v, want the grant sent", s)
	}
	if n := b.rdb.Exists(ctx, b.prefix+"{orphan}").Val(); n != 0 {
		t.Errorf("the grant of a caller that left is still there")
	}
	// Its grant took a token: the next grant's fence lies at least two
	// above the last one before it.
	if l := mustObtain(t, b.client, "orphan", time.Minute); l.Fence() <= before.Fence()+1 {
		t.Errorf("fence %d not above the orphan's, after %d", l.Fence(), before.Fence())
	}
}

// A Redis failure reaches every caller of the batch, as an error matching
// ErrUnavailable.
func TestCoalescedUnavailable(t *testing.T) {
	s := redistest.Start(t)
	c := lock.New(newRedis(t, s.Addr), &lock.Options{Prefix: randomPrefix(), Timeout: time.Second})
	resume := lock.Occupy(c, false)
	errs := make(chan error, 3)
	for i := range 3 {
		go func() {
			_, err := c.Obtain(context.Background(), fmt.Sprint("k", i), time.Minute, nil)
			errs <- err
		}()
	}
	waitFor(t, "the grants to queue", func() bool { g, _ := lock.Queued(c); return g == 3 })
	s.Kill()
	resume()
	for range 3 {
		if err := <-errs; !errors.Is(err, lock.ErrUnavailable) {
			t.Errorf("Obtain = %v; want ErrUnavailable", err)
		}
	}
}

// On a Redis Cluster a batch goes out as one script call per hash slot,
// each with its slot's fence counter, and releases likewise.
func TestCoalescedCluster(t *testing.T) {
	_, rdb := startCluster(t)
	prefix := randomPrefix()
	c := lock.New(rdb, &lock.Options{Prefix: prefix})
	ctx := context.Background()
	var keys []string
	for i := range 40 {
		keys = append(keys, fmt.Sprint("k", i))
	}
	out := obtainQueued(t, c, keys, time.Minute, 2*time.Minute)
	bySlot := map[string]int64{}
	for _, o := range out {
		if o.err != nil {
			t.Fatalf("%s: %v", o.key, o.err)
		}
		counter, _ := lock.Counter(c, o.key)
		bySlot[counter] = max(bySlot[counter], o.l.Fence())
	}
	if len(bySlot) < 10 {
		t.Fatalf("%d slots for %d keys", len(bySlot), len(keys))
	}
	for counter, fence := range bySlot {
		checkBound(t, rdb, counter, fence)
	}

	resume := lock.Occupy(c, true)
	var wg sync.WaitGroup
	for _, o := range out {
		wg.Go(func() {
			if err := o.l.Release(ctx); err != nil {
				t.Errorf("release %s: %v", o.key, err)
			}
		})
	}
	waitFor(t, "the releases to queue", func() bool { _, r := lock.Queued(c); return r == len(out) })
	resume()
	wg.Wait()
	if s := lock.Batches(c); s.GrantBatches != 1 || s.ReleaseBatches != 1 {
		t.Errorf("batches = %+v, want one of each", s)
	}
}

// occupyAll marks a grant (or a release) of every node in flight (see
// lock.Occupy) until the returned func is called.
func occupyAll(nodes []*lock.Client, releases bool) (resume func()) {
	var resumes []func()
	for _, c := range nodes {
		resumes = append(resumes, lock.Occupy(c, releases))
	}
	return func() {
		for _, r := range resumes {
			r()
		}
	}
}

// A Redlock's calls to each node coalesce too: attempts queued behind one
// in flight on every node all get their quorum, with tokens of their own.
func TestCoalescedRedlock(t *testing.T) {
	b := setupRedlock(t, 3, nil)
	ctx := context.Background()
	nodes := lock.Nodes(b.rl)
	resume := occupyAll(nodes, false)
	const n = 12
	locks := make([]*lock.Lock, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ttl := time.Minute * time.Duration(1+i%2)
			l, err := b.rl.Obtain(ctx, fmt.Sprint("k", i), ttl, nil)
			if err != nil {
				t.Errorf("obtain k%d: %v", i, err)
			}
			locks[i] = l
		})
	}
	for _, c := range nodes {
		waitFor(t, "the grants to queue", func() bool { g, _ := lock.Queued(c); return g == n })
	}
	resume()
	wg.Wait()
	if t.Failed() {
		return
	}
	fences := map[int64]bool{}
	for _, l := range locks {
		lock.Settle(l) // Obtain returned at its quorum; the third node's call may run on
		if got := b.count(b.key(l.Key()), l.Token()); got != len(nodes) {
			t.Errorf("%s held on %d nodes, want all", l, got)
		}
		fences[l.Fence()] = true
		counter := lock.RedlockCounter(b.rl, l.Key())
		for i, rdb := range b.nodes {
			if v, _ := rdb.Get(ctx, counter).Int64(); v < l.Fence() {
				t.Errorf("node %d: counter %d below the token %d of %s", i, v, l.Fence(), l)
			}
		}
	}
	for i, c := range nodes {
		if s := lock.Batches(c); s.GrantBatches != 1 || s.Grants != n {
			t.Errorf("node %d: batches = %+v, want one of %d grants", i, s, n)
		}
	}

	resume = occupyAll(nodes, true)
	for _, l := range locks {
		wg.Go(func() {
			if err := l.Release(ctx); err != nil {
				t.Errorf("release %s: %v", l, err)
			}
		})
	}
	for _, c := range nodes {
		waitFor(t, "the releases to queue", func() bool { _, r := lock.Queued(c); return r == n })
	}
	resume()
	wg.Wait()
	for _, l := range locks {
		lock.Settle(l)
		if got := b.count(b.key(l.Key()), l.Token()); got != 0 {
			t.Errorf("%s still held on %d nodes", l, got)
		}
	}
}

// A Redlock call that waits in a node's queue past NodeTimeout counts as
// that node not answering, and its grant is never sent there: a quorum of
// the other nodes still grants the lock.
func TestCoalescedRedlockNodeTimeout(t *testing.T) {
	b := setupRedlock(t, 3, &lock.Options{NodeTimeout: 50 * time.Millisecond})
	ctx := context.Background()
	stuck := lock.Nodes(b.rl)[0]
	resume := lock.Occupy(stuck, false)
	l, err := b.rl.Obtain(ctx, "k", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	lock.Settle(l) // the stuck node's call ends at NodeTimeout
	resume()
	waitFor(t, "the node to idle", func() bool { return lock.Idle(stuck) })
	if got := b.values(b.key("k")); got[0] != "" || b.count(b.key("k"), l.Token()) != 2 {
		t.Errorf("values %q; want the lock on the two other nodes only", got)
	}
	if s := lock.Batches(stuck); s.Grants != 0 {
		t.Errorf("stuck node: batches = %+v, want nothing sent", s)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Many goroutines on a few keys, with retries: every call goes through the
// batches, and holders still never overlap.
func TestCoalescedMutualExclusion(t *testing.T) {
	b := setup(t, nil)
	var lockers []obtainer
	for range 16 {
		lockers = append(lockers, b.client)
	}
	checkMutualExclusion(t, lockers, 20, 30*time.Second, 0, func() lock.RetryStrategy {
		return lock.LinearBackoff(time.Millisecond)
	})
	if s := lock.Batches(b.client); s.GrantBatches == 0 {
		t.Logf("no batch formed: %+v", s)
	}
}

// Obtain returns once a quorum granted, while the grant to a slow node is
// still queued; a Release right after waits for that grant before it
// releases on that node, so no grant lands after its release and outlives
// the lock.
func TestRedlockReleaseFollowsASlowGrant(t *testing.T) {
	b := setupRedlock(t, 3, &lock.Options{NodeTimeout: 5 * time.Second})
	ctx := context.Background()
	slow := lock.Nodes(b.rl)[0]
	resume := lock.Occupy(slow, false)
	l, err := b.rl.Obtain(ctx, "k", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := lock.Queued(slow); g != 1 {
		t.Fatalf("grants queued on the slow node: %d, want 1 (Obtain returned at the quorum)", g)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	resume()
	lock.Settle(l)
	waitFor(t, "the slow node's release", func() bool { return lock.Idle(slow) && b.count(b.key("k"), l.Token()) == 0 })
	if got := b.values(b.key("k")); got[0] != "" {
		t.Errorf("values %q after the release, want none", got)
	}
}
