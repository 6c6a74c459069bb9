package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/internal/redistest"
	"github.com/erpsync/erpsync/lock"
)

// newNode returns a client of one Redlock node, set up as NewRedlock
// advises: deadlines from ctx, and no retries of its own, so that a node
// that is down fails its call at once.
func newNode(t testing.TB, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
		MaxRetries:            -1,
		DialerRetries:         1,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// redlockBundle is a Redlock over servers of the test's own, with a
// direct client of each node to look at its keys.
type redlockBundle struct {
	servers []*redistest.Server
	nodes   []*redis.Client
	rl      *lock.Redlock
	prefix  string
}

// testNodeTimeout is the NodeTimeout of the tests' Redlocks unless they
// set one: the default (50 ms at most) is too short for a first dial on a
// loaded machine under -race, and a failed attempt is not retried.
const testNodeTimeout = 500 * time.Millisecond

// setupRedlock starts n redis-servers without persistence and returns a
// Redlock over them. opt may be nil.
func setupRedlock(t testing.TB, n int, opt *lock.Options) *redlockBundle {
	t.Helper()
	b := &redlockBundle{prefix: randomPrefix()}
	var nodes []redis.UniversalClient
	for range n {
		s := redistest.Start(t)
		rdb := newNode(t, s.Addr)
		b.servers = append(b.servers, s)
		b.nodes = append(b.nodes, rdb)
		nodes = append(nodes, rdb)
	}
	b.rl = lock.NewRedlock(nodes, b.options(opt))
	return b
}

// redlock returns another Redlock over the same nodes, with connection
// pools of its own: another process, as far as the nodes can tell.
func (b *redlockBundle) redlock(t testing.TB, opt *lock.Options) *lock.Redlock {
	t.Helper()
	return lock.NewRedlock(b.clients(t), b.options(opt))
}

// clients returns a new client of every node (see newNode).
func (b *redlockBundle) clients(t testing.TB) []redis.UniversalClient {
	t.Helper()
	var nodes []redis.UniversalClient
	for _, s := range b.servers {
		nodes = append(nodes, newNode(t, s.Addr))
	}
	return nodes
}

// options are opt (may be nil) with the bundle's prefix and, unless set,
// the tests' node timeout.
func (b *redlockBundle) options(opt *lock.Options) *lock.Options {
	var o lock.Options
	if opt != nil {
		o = *opt
	}
	o.Prefix = b.prefix
	if o.NodeTimeout == 0 {
		o.NodeTimeout = testNodeTimeout
	}
	return &o
}

// key returns the Redis key of key's lock on the nodes.
func (b *redlockBundle) key(k string) string { return lock.RedlockKey(b.rl, k) }

// values returns the value of key on every node, "" where absent or down.
func (b *redlockBundle) values(key string) []string {
	out := make([]string, len(b.nodes))
	for i, rdb := range b.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		out[i] = rdb.Get(ctx, key).Val()
		cancel()
	}
	return out
}

// count returns on how many nodes key has the value want.
func (b *redlockBundle) count(key, want string) int {
	n := 0
	for _, v := range b.values(key) {
		if v == want {
			n++
		}
	}
	return n
}

// mustObtainRedlock obtains key and waits until every node answered the
// grant (Obtain returns at the quorum), so that the test sees all nodes.
func mustObtainRedlock(t testing.TB, rl *lock.Redlock, key string, ttl time.Duration) *lock.Lock {
	t.Helper()
	l, err := rl.Obtain(context.Background(), key, ttl, nil)
	if err != nil {
		t.Fatalf("redlock obtain %s: %v", key, err)
	}
	lock.Settle(l)
	return l
}

func TestRedlockObtainRelease(t *testing.T) {
	b := setupRedlock(t, 5, nil)
	ctx := context.Background()
	if q := b.rl.Quorum(); q != 3 {
		t.Fatalf("Quorum() = %d, want 3", q)
	}
	clock := b.nodes[0].Time(ctx).Val()
	l := mustObtainRedlock(t, b.rl, "erp:7", time.Minute)
	if l.Key() != "erp:7" || l.Fence() <= 0 || len(l.Token()) < 27 {
		t.Fatalf("lock %q fence %d token %q", l.Key(), l.Fence(), l.Token())
	}
	// A first grant takes the floor the attempt proposed, its clock rounded
	// up to a millisecond plus one, or a node's own rounded clock: never
	// below the clock, at most 2 ms ahead, and the same on every node.
	if f := l.Fence(); f%1000 != 0 || f < clock.UnixMicro() || f > time.Now().UnixMicro()+2000 {
		t.Errorf("first fence %d, want the clock (%d µs) rounded up to ms, plus at most 1 ms", f, clock.UnixMicro())
	}
	lk := b.key("erp:7")
	if n := b.count(lk, l.Token()); n != 5 {
		t.Errorf("token on %d nodes, want 5: %q", n, b.values(lk))
	}
	// Every node that granted the key now has the quorum's fence or, for
	// a node slower than the quorum that handed out more, its own.
	ck := lock.RedlockCounter(b.rl, "erp:7")
	atLeast := 0
	for _, v := range b.values(ck) {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= l.Fence() {
			atLeast++
		}
	}
	if n := b.count(ck, fmt.Sprint(l.Fence())); n < 3 || atLeast != 5 {
		t.Errorf("fence %d on %d counters (want 3 or more), %d at or above it (want 5): %q", l.Fence(), n, atLeast, b.values(ck))
	}
	if ttl := b.nodes[0].PTTL(ctx, ck).Val(); ttl != -1 {
		t.Errorf("fence counter %s TTL = %v, want none", ck, ttl)
	}

	_, err := b.redlock(t, nil).Obtain(ctx, "erp:7", time.Minute, nil)
	if !errors.Is(err, lock.ErrNotObtained) || errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("contender: err = %v, want ErrNotObtained only", err)
	}
	if n := b.count(lk, l.Token()); n != 5 {
		t.Errorf("after the contender, token on %d nodes, want 5", n)
	}

	if ttl, err := l.TTL(ctx); err != nil || ttl <= 50*time.Second || ttl > time.Minute {
		t.Errorf("TTL = %v, %v", ttl, err)
	}
	if err := l.Refresh(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if ttl, err := l.TTL(ctx); err != nil || ttl <= time.Minute {
		t.Errorf("TTL after Refresh = %v, %v", ttl, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lock.Settle(l)
	if n := b.count(lk, ""); n != 5 {
		t.Errorf("released key left on %d nodes", 5-n)
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("second release: err = %v, want ErrNotHeld", err)
	}
	if ttl, err := l.TTL(ctx); err != nil || ttl != 0 {
		t.Errorf("TTL after Release = %v, %v; want 0", ttl, err)
	}

	l2 := mustObtainRedlock(t, b.rl, "erp:7", time.Minute)
	if l2.Fence() <= l.Fence() {
		t.Errorf("fence %d after %d", l2.Fence(), l.Fence())
	}
	_ = l2.Release(ctx)
}

func TestRedlockInvalid(t *testing.T) {
	ctx := context.Background()
	if _, err := lock.NewRedlock(nil, nil).Obtain(ctx, "k", time.Second, nil); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("no nodes: err = %v, want ErrInvalid", err)
	}
	b := setupRedlock(t, 3, nil)
	if _, err := b.rl.Obtain(ctx, "a{b}", time.Second, nil); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("key with braces: err = %v, want ErrInvalid", err)
	}
	if _, err := b.rl.Obtain(ctx, "k", 0, nil); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("ttl 0: err = %v, want ErrInvalid", err)
	}
	// A Client cannot release a Redlock lock in its batch call.
	l := mustObtainRedlock(t, b.rl, "k", time.Minute)
	c := lock.New(b.nodes[0], &lock.Options{Prefix: b.prefix})
	if _, err := c.ReleaseMany(ctx, []*lock.Lock{l}); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("ReleaseMany of a Redlock lock: err = %v, want ErrInvalid", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release after the refused ReleaseMany: %v", err)
	}
}

// Goroutines with connection pools of their own contend for one key over
// five nodes: holders never overlap and fences rise.
func TestRedlockMutualExclusion(t *testing.T) {
	b := setupRedlock(t, 5, nil)
	lockers := make([]obtainer, 6)
	for i := range lockers {
		lockers[i] = b.redlock(t, nil)
	}
	checkMutualExclusion(t, lockers, 15, 30*time.Second, 100*time.Microsecond, func() lock.RetryStrategy {
		return lock.ExponentialBackoff(500*time.Microsecond, 10*time.Millisecond)
	})
}

// With two of five nodes down, a quorum of three still grants, renews and
// releases.
func TestRedlockMinorityDown(t *testing.T) {
	b := setupRedlock(t, 5, nil)
	ctx := context.Background()
	before := mustObtainRedlock(t, b.rl, "job", time.Minute)
	_ = before.Release(ctx)
	b.servers[1].Kill()
	b.servers[3].Kill()

	l := mustObtainRedlock(t, b.rl, "job", time.Minute)
	if l.Fence() <= before.Fence() {
		t.Errorf("fence %d after %d", l.Fence(), before.Fence())
	}
	if _, err := b.redlock(t, nil).Obtain(ctx, "job", time.Minute, nil); !errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("contender: err = %v, want ErrNotObtained", err)
	}
	if err := l.Refresh(ctx, time.Minute); err != nil {
		t.Errorf("Refresh: %v", err)
	}
	if ttl, err := l.TTL(ctx); err != nil || ttl <= 0 {
		t.Errorf("TTL = %v, %v", ttl, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// With three of five nodes down no quorum can answer: Obtain fails closed
// at once with an error that says so, and leaves nothing behind.
func TestRedlockMajorityDown(t *testing.T) {
	b := setupRedlock(t, 5, nil)
	ctx := context.Background()
	held := mustObtainRedlock(t, b.rl, "held", time.Minute)
	for _, i := range []int{0, 2, 4} {
		b.servers[i].Kill()
	}

	start := time.Now()
	_, err := b.rl.Obtain(ctx, "job", time.Minute, &lock.ObtainOptions{Retry: lock.LinearBackoff(time.Millisecond)})
	if !errors.Is(err, lock.ErrUnavailable) || errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("err = %v, want ErrUnavailable only", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "2 of 5 nodes answered") || !strings.Contains(msg, "3 needed") {
		t.Errorf("error %q does not say how many nodes answered", msg)
	}
	if d := time.Since(start); d > 2*testNodeTimeout {
		t.Errorf("failed after %v, want at once (no retry)", d)
	}
	if n := b.count(b.key("job"), ""); n != 5 {
		t.Errorf("failed attempt left the key on %d live nodes", 5-n)
	}

	if err := held.Refresh(ctx, time.Minute); !errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("Refresh: err = %v, want ErrUnavailable", err)
	}
	if ttl, err := held.TTL(ctx); !errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("TTL = %v, %v; want ErrUnavailable", ttl, err)
	}
	if err := held.Release(ctx); !errors.Is(err, lock.ErrUnavailable) || errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release: err = %v, want ErrUnavailable", err)
	}
}

// A node that hangs costs an attempt no more than NodeTimeout: with one of
// five paused Obtain still succeeds, with three it fails closed.
func TestRedlockNodeTimeout(t *testing.T) {
	b := setupRedlock(t, 5, &lock.Options{NodeTimeout: 200 * time.Millisecond})
	ctx := context.Background()
	warm := mustObtainRedlock(t, b.rl, "warm", time.Minute) // dial every node
	_ = warm.Release(ctx)

	b.servers[0].Pause()
	defer b.servers[0].Resume()
	start := time.Now()
	l := mustObtainRedlock(t, b.rl, "a", 10*time.Second)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Obtain with a hung node took %v, want about NodeTimeout", d)
	}
	_ = l.Release(ctx)

	b.servers[1].Pause()
	defer b.servers[1].Resume()
	b.servers[2].Pause()
	defer b.servers[2].Resume()
	start = time.Now()
	_, err := b.rl.Obtain(ctx, "b", 10*time.Second, nil)
	if !errors.Is(err, lock.ErrUnavailable) || !strings.Contains(err.Error(), "2 of 5 nodes answered") {
		t.Errorf("err = %v, want ErrUnavailable with 2 of 5", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Obtain with three hung nodes took %v, want about 2×NodeTimeout", d)
	}
}

// Two of five nodes restart empty while a holder has the key on all five:
// the three that remember it still refuse a contender.
func TestRedlockRestartedMinorityKeepsExclusion(t *testing.T) {
	b := setupRedlock(t, 5, nil)
	ctx := context.Background()
	l := mustObtainRedlock(t, b.rl, "rec", time.Minute)
	for _, i := range []int{0, 3} {
		b.servers[i].Kill()
		b.servers[i].Start()
	}
	lk := b.key("rec")
	if n := b.count(lk, l.Token()); n != 3 {
		t.Fatalf("token on %d nodes after the restarts, want 3", n)
	}

	rival := b.redlock(t, nil)
	_, err := rival.Obtain(ctx, "rec", time.Minute, &lock.ObtainOptions{
		Retry: lock.LimitRetry(lock.LinearBackoff(5*time.Millisecond), 3),
	})
	if !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("contender: err = %v, want ErrNotObtained", err)
	}
	// The contender's grants on the restarted nodes were undone.
	for i, v := range b.values(lk) {
		if v != "" && v != l.Token() {
			t.Errorf("node %d keeps the contender's grant", i)
		}
	}
	if err := l.Refresh(ctx, time.Minute); err != nil {
		t.Errorf("holder's Refresh on 3 of 5: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("holder's Release on 3 of 5: %v", err)
	}
	next := mustObtainRedlock(t, rival, "rec", time.Minute)
	if next.Fence() <= l.Fence() {
		t.Errorf("fence %d after %d", next.Fence(), l.Fence())
	}
}

// The limit the package doc states: a node that restarts empty at once,
// instead of staying down for the longest TTL, can hand a second holder the
// quorum it no longer remembers. Here the holder has exactly a quorum
// (nodes 0-2, while 3 and 4 are down); 3 and 4 come back and node 2
// restarts empty: a contender gets 2, 3 and 4. The fences still order the
// two holders (one machine, one clock), which is why storage checks them.
func TestRedlockEarlyRestartBreaksExclusion(t *testing.T) {
	b := setupRedlock(t, 5, nil)
	b.servers[3].Kill()
	b.servers[4].Kill()
	first := mustObtainRedlock(t, b.rl, "rec", time.Minute)
	b.servers[3].Start()
	b.servers[4].Start()
	b.servers[2].Kill()
	b.servers[2].Start()

	second, err := b.redlock(t, nil).Obtain(context.Background(), "rec", time.Minute, nil)
	if err != nil {
		t.Fatalf("contender: %v; the documented limit no longer shows", err)
	}
	if second.Fence() <= first.Fence() {
		t.Errorf("fence %d after %d", second.Fence(), first.Fence())
	}
}

func TestRedlockFence(t *testing.T) {
	b := setupRedlock(t, 5, nil)
	ctx := context.Background()
	var last int64
	grant := func(what string) *lock.Lock {
		t.Helper()
		l := mustObtainRedlock(t, b.rl, "k", time.Minute)
		if l.Fence() <= last {
			t.Fatalf("%s: fence %d after %d", what, l.Fence(), last)
		}
		last = l.Fence()
		if err := l.Release(ctx); err != nil {
			t.Fatalf("%s: release: %v", what, err)
		}
		return l
	}
	for i := range 50 {
		grant(fmt.Sprint("grant ", i))
	}

	// One node's counter far ahead, as after its clock ran fast, and two
	// other nodes down, so that it is in the quorum: the quorum takes the
	// largest token and writes it back to the other nodes, so it survives
	// the loss of that node.
	ahead := last + 10_000_000_000
	ck := lock.RedlockCounter(b.rl, "k")
	b.nodes[2].Set(ctx, ck, ahead, time.Hour)
	b.servers[3].Kill()
	b.servers[4].Kill()
	l := grant("counter ahead on node 2")
	if l.Fence() != ahead+1 {
		t.Fatalf("fence = %d, want the largest counter + 1 = %d", l.Fence(), ahead+1)
	}
	if n := b.count(ck, fmt.Sprint(ahead+1)); n != 3 {
		t.Errorf("fence written back to %d counters, want the 3 nodes up: %q", n, b.values(ck))
	}
	b.servers[3].Start()
	b.servers[4].Start()
	b.servers[2].Kill()
	grant("node 2 down, two nodes back empty")
	b.servers[2].Start()
	grant("node 2 back empty")

	// A minority restarted empty: the others still carry the counter.
	b.servers[0].Kill()
	b.servers[4].Kill()
	b.servers[0].Start()
	b.servers[4].Start()
	grant("two nodes restarted empty")
	for i := range 20 {
		grant(fmt.Sprint("after the restarts ", i))
	}
}

func TestRedlockNotHeld(t *testing.T) {
	b := setupRedlock(t, 5, nil)
	ctx := context.Background()

	const ttl = 300 * time.Millisecond
	l := mustObtainRedlock(t, b.rl, "a", ttl)
	time.Sleep(ttl + 50*time.Millisecond)
	if err := l.Refresh(ctx, time.Second); !errors.Is(err, lock.ErrExpired) || !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Refresh after expiry: err = %v, want ErrExpired", err)
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrExpired) || errors.Is(err, lock.ErrTaken) {
		t.Errorf("Release after expiry: err = %v, want ErrExpired", err)
	}

	l = mustObtainRedlock(t, b.rl, "b", ttl)
	time.Sleep(ttl + 50*time.Millisecond)
	next := mustObtainRedlock(t, b.redlock(t, nil), "b", time.Minute)
	if err := l.Release(ctx); !errors.Is(err, lock.ErrTaken) || !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release after another took it: err = %v, want ErrTaken", err)
	}
	if n := b.count(b.key("b"), next.Token()); n != 5 {
		t.Errorf("the stale Release touched the next holder: token on %d nodes", n)
	}
}

// Hold renews on a quorum while a minority is down, and the context ends
// with ErrLost once the quorum is gone for good.
func TestRedlockHold(t *testing.T) {
	var hl hookLog
	b := setupRedlock(t, 5, &lock.Options{Hooks: hl.hooks()})
	const ttl = 600 * time.Millisecond
	b.servers[4].Kill()
	l := mustObtainRedlock(t, b.rl, "job", ttl)
	hctx := l.Hold(context.Background())
	time.Sleep(2 * ttl)
	if hctx.Err() != nil {
		t.Fatalf("hold context ended with 4 of 5 nodes up: %v", context.Cause(hctx))
	}
	b.servers[3].Kill()
	b.servers[2].Kill()
	killed := time.Now()
	waitDone(t, hctx, 3*ttl)
	if d := time.Since(killed); d > ttl+200*time.Millisecond {
		t.Errorf("lost %v after the quorum went, want by the end of the lease (%v)", d, ttl)
	}
	if cause := context.Cause(hctx); !errors.Is(cause, lock.ErrLost) || !errors.Is(cause, lock.ErrUnavailable) {
		t.Errorf("cause = %v, want ErrLost with the last ErrUnavailable", cause)
	}
	if lost, failed := hl.counts(); lost != 1 || failed == 0 {
		t.Errorf("hooks: %d lost, %d renew failed; want 1 and some", lost, failed)
	}
}

func TestRedlockDefaultNodeTimeout(t *testing.T) {
	rl := lock.NewRedlock(nil, nil)
	for _, c := range []struct{ ttl, want time.Duration }{
		{time.Minute, time.Second},
		{5 * time.Second, 500 * time.Millisecond},
		{time.Second, 100 * time.Millisecond},
		{200 * time.Millisecond, 20 * time.Millisecond},
		{5 * time.Millisecond, time.Millisecond},
	} {
		if got := lock.NodeTimeout(rl, c.ttl); got != c.want {
			t.Errorf("NodeTimeout(%v) = %v, want %v", c.ttl, got, c.want)
		}
	}
	rl = lock.NewRedlock(nil, &lock.Options{NodeTimeout: time.Second})
	if got := lock.NodeTimeout(rl, time.Minute); got != time.Second {
		t.Errorf("NodeTimeout set to 1s = %v", got)
	}
}

// A node takes the floor a Redlock attempt proposes when it lies above its
// own clock rounded up to a millisecond, by at most two: the nodes of one
// attempt then agree across a millisecond boundary. A floor further ahead,
// or behind the clock, is ignored.
func TestProposedFloor(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	grant := func(key string, proposed int64) int64 {
		t.Helper()
		rk := b.prefix + "{" + key + "}"
		f, err := lock.RunObtain(ctx, b.rdb, []string{rk, rk + ":fence"}, "tok", 60000, 60000, 1000, proposed).Int64()
		if err != nil || f <= 0 {
			t.Fatalf("grant %s: %d, %v", key, f, err)
		}
		return f
	}
	ceilMS := func(us int64) int64 { return (us + 999) / 1000 * 1000 }

	// 1.9 ms above the rounded clock: taken, unless the call took so long
	// that the node's own rounded clock passed it.
	p := ceilMS(time.Now().UnixMicro()) + 1900
	if f := grant("near", p); f != p && (f%1000 != 0 || f < p) {
		t.Errorf("fence %d, want the proposed %d", f, p)
	}
	// An hour ahead: the node's own rounded clock.
	now := time.Now().UnixMicro()
	if f := grant("ahead", now+3_600_000_000); f%1000 != 0 || f < now || f > time.Now().UnixMicro()+1000 {
		t.Errorf("fence %d, want the clock %d rounded up", f, now)
	}
	// Behind the clock: the clock.
	now = time.Now().UnixMicro()
	if f := grant("behind", now-3_600_000_000); f%1000 != 0 || f < now {
		t.Errorf("fence %d, want the clock %d rounded up", f, now)
	}
}

// A holder that exits right after it released leaves nothing behind, even
// on a node that answers late: Release waits for every node (within
// NodeTimeout), and Wait sends what ReleaseMany's calls to slower nodes
// still owe, even when ReleaseMany's ctx was cancelled once it returned. The late node is paused during the grant, so its grant call
// is in flight when the release comes, and the release to it must wait for
// that call; the test then closes the Redlock's connections, as an exit
// does, and resumes the node.
func TestRedlockReleaseReachesTheLateNode(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "Release", true: "ReleaseMany+Wait"}[batch], func(t *testing.T) {
			b := setupRedlock(t, 5, nil)
			ctx := context.Background()
			nodes := b.clients(t)
			rl := lock.NewRedlock(nodes, b.options(&lock.Options{NodeTimeout: 3 * time.Second}))
			warm := mustObtainRedlock(t, rl, "warm", time.Minute) // dial every node
			if err := warm.Release(ctx); err != nil {
				t.Fatal(err)
			}

			late := b.servers[4]
			late.Pause()
			resumed := make(chan struct{})
			time.AfterFunc(300*time.Millisecond, func() { late.Resume(); close(resumed) })
			keys := []string{"k1", "k2", "k3"}
			var locks []*lock.Lock
			if batch {
				// A chunk's worth, as a sync's: big enough for each node's
				// call to go out at once, not through the coalescing queue.
				for i := range 200 {
					keys = append(keys, fmt.Sprintf("r%d", i))
				}
				ls, err := rl.ObtainMany(ctx, keys, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				locks = ls
				// The caller cancels its ctx once ReleaseMany returned, as
				// a deferred cancel does: the call to the late node must
				// not be taken back.
				rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				_, err = rl.ReleaseMany(rctx, ls)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				if err := rl.Wait(wctx); err != nil {
					t.Fatalf("Wait: %v", err)
				}
			} else {
				keys = keys[:1]
				l, err := rl.Obtain(ctx, keys[0], time.Minute, nil)
				if err != nil {
					t.Fatal(err)
				}
				locks = []*lock.Lock{l}
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range nodes { // the process exits
				_ = c.Close()
			}
			<-resumed
			for i, k := range keys {
				if locks[i] == nil {
					t.Fatalf("%s not granted", k)
				}
				if n := b.count(b.key(k), locks[i].Token()); n != 0 {
					t.Errorf("%s: still held on %d of 5 nodes after its holder released and exited: %q", k, n, b.values(b.key(k)))
				}
			}
		})
	}
}

// Wait returns ctx's error while a node's call is still in flight.
func TestRedlockWaitEndsWithCtx(t *testing.T) {
	b := setupRedlock(t, 3, &lock.Options{NodeTimeout: 3 * time.Second})
	ctx := context.Background()
	warm := mustObtainRedlock(t, b.rl, "warm", time.Minute)
	_ = warm.Release(ctx)
	b.servers[2].Pause()
	defer b.servers[2].Resume()
	if _, err := b.rl.Obtain(ctx, "k", time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := b.rl.Wait(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait with a paused node = %v, want the deadline", err)
	}
	b.servers[2].Resume()
	if err := b.rl.Wait(ctx); err != nil {
		t.Errorf("Wait after the resume = %v", err)
	}
}

// With the default NodeTimeout (ttl/10, at most a second), a quorum that
// answers late but within it still grants, a single key or a batch: a
// loaded machine is not an outage. Three of five nodes stall for 200 ms
// (the old default bound every call at 50 ms and failed both).
func TestRedlockDefaultNodeTimeoutWaitsForASlowQuorum(t *testing.T) {
	b := setupRedlock(t, 5, nil)
	ctx := context.Background()
	// Not b.redlock: its options set the tests' NodeTimeout.
	rl := lock.NewRedlock(b.clients(t), &lock.Options{Prefix: b.prefix})
	warm := mustObtainRedlock(t, rl, "warm", time.Minute) // dial every node
	_ = warm.Release(ctx)
	stall := func() {
		for _, s := range b.servers[:3] {
			s.Pause()
		}
		time.AfterFunc(200*time.Millisecond, func() {
			for _, s := range b.servers[:3] {
				s.Resume()
			}
		})
	}
	stall()
	l, err := rl.Obtain(ctx, "one", 10*time.Second, nil)
	if err != nil {
		t.Fatalf("Obtain with a quorum 200 ms late: %v", err)
	}
	_ = l.Release(ctx)
	stall()
	ls, err := rl.ObtainMany(ctx, []string{"a", "b", "c"}, 10*time.Second)
	if err != nil || ls[0] == nil || ls[1] == nil || ls[2] == nil {
		t.Fatalf("ObtainMany with a quorum 200 ms late: %v %v", ls, err)
	}
	_, _ = rl.ReleaseMany(ctx, ls)
	_ = rl.Wait(ctx)
}
