package lock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/lock"
)

// keysOf returns n keys "<name>:0000", ...
func keysOf(name string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:%04d", name, i)
	}
	return keys
}

// settleAll waits until every node answered the calls of locks.
func settleAll(locks []*lock.Lock) {
	for _, l := range locks {
		if l != nil {
			lock.Settle(l)
		}
	}
}

// atLeast returns on how many nodes the counter ck is at or above fence.
func (b *redlockBundle) atLeast(ck string, fence int64) int {
	n := 0
	for _, v := range b.values(ck) {
		if c, err := strconv.ParseInt(v, 10, 64); err == nil && c >= fence {
			n++
		}
	}
	return n
}

func TestRedlockObtainMany(t *testing.T) {
	var hooks struct {
		sync.Mutex
		obtained, notObtained int
	}
	b := setupRedlock(t, 5, &lock.Options{Hooks: &lock.Hooks{
		Obtained:    func(string, time.Duration) { hooks.Lock(); hooks.obtained++; hooks.Unlock() },
		NotObtained: func(string) { hooks.Lock(); hooks.notObtained++; hooks.Unlock() },
	}})
	ctx := context.Background()
	theirs := b.redlock(t, nil)
	keys := keysOf("erp", 40)
	keys = append(keys, keys[5]) // a key twice: granted once
	held := map[int]*lock.Lock{}
	for _, i := range []int{0, 7, 39} {
		held[i] = mustObtainRedlock(t, theirs, keys[i], time.Minute)
	}
	// Another holder's token on a minority (2 of 5) does not stop a
	// grant; on a majority (3 of 5) it does, and our grants on the two
	// other nodes are undone.
	for _, i := range []int{0, 1} {
		b.nodes[i].Set(ctx, b.key(keys[10]), "other", time.Minute)
	}
	for _, i := range []int{2, 3, 4} {
		b.nodes[i].Set(ctx, b.key(keys[11]), "other", time.Minute)
	}

	locks, err := b.rl.ObtainMany(ctx, keys, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	settleAll(locks)
	if len(locks) != len(keys) {
		t.Fatalf("%d results for %d keys", len(locks), len(keys))
	}
	for i, l := range locks {
		_, byThem := held[i]
		want := !byThem && i != 11 && i != len(keys)-1
		if (l != nil) != want {
			t.Fatalf("keys[%d] %s: lock %v, want granted %v", i, keys[i], l, want)
		}
		lk := b.key(keys[i])
		if l == nil {
			if byThem && b.count(lk, held[i].Token()) != 5 {
				t.Errorf("keys[%d]: the other holder's lock was touched: %q", i, b.values(lk))
			}
			continue
		}
		wantNodes := 5
		if i == 10 {
			wantNodes = 3
		}
		if n := b.count(lk, l.Token()); n != wantNodes || l.Key() != keys[i] {
			t.Errorf("keys[%d]: %s on %d nodes, want %d", i, l, n, wantNodes)
		}
		if n := b.atLeast(lock.RedlockCounter(b.rl, keys[i]), l.Fence()); n < wantNodes {
			t.Errorf("keys[%d]: fence %d on %d counters, want %d", i, l.Fence(), n, wantNodes)
		}
	}
	if got := b.values(b.key(keys[11])); !slices.Equal(got, []string{"", "", "other", "other", "other"}) {
		t.Errorf("key held on a majority: values %q, want the other holder's on 2-4 and our grants undone", got)
	}
	hooks.Lock()
	if hooks.obtained != len(keys)-5 || hooks.notObtained != 5 {
		t.Errorf("hooks: %d obtained, %d not obtained; want %d and 5", hooks.obtained, hooks.notObtained, len(keys)-5)
	}
	hooks.Unlock()

	// One of ours expired on every node and was taken by another:
	// ReleaseMany counts it and leaves the new holder alone.
	for _, rdb := range b.nodes {
		rdb.Del(ctx, b.key(keys[3]))
	}
	taker := mustObtainRedlock(t, theirs, keys[3], time.Minute)
	if taker.Fence() <= locks[3].Fence() {
		t.Errorf("fence %d after %d", taker.Fence(), locks[3].Fence())
	}
	notHeld, err := b.rl.ReleaseMany(ctx, locks)
	if err != nil || notHeld != 1 {
		t.Fatalf("ReleaseMany = %d, %v; want 1 not held", notHeld, err)
	}
	settleAll(locks)
	for i, l := range locks {
		if l == nil {
			continue
		}
		lk := b.key(keys[i])
		if n := b.count(lk, l.Token()); n != 0 {
			t.Errorf("keys[%d] still ours on %d nodes", i, n)
		}
	}
	if n := b.count(b.key(keys[3]), taker.Token()); n != 5 {
		t.Errorf("the taker's lock on %d nodes, want 5", n)
	}
	if err := locks[1].Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release after ReleaseMany: err = %v, want ErrNotHeld", err)
	}
	if _, err := b.rl.ReleaseMany(ctx, []*lock.Lock{taker}); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("ReleaseMany of another Redlock's lock: err = %v, want ErrInvalid", err)
	}

	// Fences of each key rise from batch to batch.
	again, err := b.rl.ObtainMany(ctx, keys[:20], time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range again {
		if l == nil {
			if _, byThem := held[i]; !byThem && i != 3 && i != 11 {
				t.Errorf("keys[%d] not granted again", i)
			}
			continue
		}
		if locks[i] != nil && l.Fence() <= locks[i].Fence() {
			t.Errorf("keys[%d]: fence %d after %d", i, l.Fence(), locks[i].Fence())
		}
	}
	_, _ = b.rl.ReleaseMany(ctx, again)
	settleAll(again)
}

func TestRedlockObtainManyInvalid(t *testing.T) {
	ctx := context.Background()
	if _, err := lock.NewRedlock(nil, nil).ObtainMany(ctx, []string{"k"}, time.Second); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("no nodes: err = %v, want ErrInvalid", err)
	}
	b := setupRedlock(t, 3, nil)
	if _, err := b.rl.ObtainMany(ctx, []string{"k", "a{b}"}, time.Second); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("key with braces: err = %v, want ErrInvalid", err)
	}
	if _, err := b.rl.ObtainMany(ctx, []string{"k"}, 0); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("ttl 0: err = %v, want ErrInvalid", err)
	}
	if ls, err := b.rl.ObtainMany(ctx, nil, time.Second); err != nil || len(ls) != 0 {
		t.Errorf("no keys: %v, %v", ls, err)
	}
	if n, err := b.rl.ReleaseMany(ctx, []*lock.Lock{nil}); n != 0 || err != nil {
		t.Errorf("ReleaseMany of nothing: %d, %v", n, err)
	}
}

// Batches run while a minority of the nodes is killed, or paused, in the
// middle of them: every key is still granted (no one else holds it) and
// its fence rises from batch to batch; with a majority down a batch fails
// closed and leaves nothing behind.
func TestRedlockObtainManyMinorityFails(t *testing.T) {
	b := setupRedlock(t, 5, &lock.Options{NodeTimeout: 2 * time.Second})
	ctx := context.Background()
	keys := keysOf("rec", 200)
	last := make([]int64, len(keys))
	batch := func(what string) error {
		locks, err := b.rl.ObtainMany(ctx, keys, time.Minute)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		for i, l := range locks {
			if l == nil {
				return fmt.Errorf("%s: %s not granted", what, keys[i])
			}
			if l.Fence() <= last[i] {
				return fmt.Errorf("%s: %s fence %d after %d", what, keys[i], l.Fence(), last[i])
			}
			last[i] = l.Fence()
		}
		if n, err := b.rl.ReleaseMany(ctx, locks); err != nil || n != 0 {
			return fmt.Errorf("%s: ReleaseMany = %d, %v", what, n, err)
		}
		settleAll(locks)
		return nil
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(batch("all up"))

	// Two nodes are killed while batches run.
	stop := during(batch, "killing")
	time.Sleep(50 * time.Millisecond)
	b.servers[1].Kill()
	time.Sleep(50 * time.Millisecond)
	b.servers[3].Kill()
	must(stop())
	must(batch("two down"))

	// The two come back empty and one of the others is paused, then
	// resumed, while batches run: the nodes that kept their counters keep
	// the fences rising, and a batch waits for the paused node no longer
	// than NodeTimeout.
	b.servers[1].Start()
	b.servers[3].Start()
	stop = during(batch, "pausing")
	time.Sleep(50 * time.Millisecond)
	b.servers[0].Pause()
	time.Sleep(500 * time.Millisecond)
	b.servers[0].Resume()
	must(stop())
	must(batch("resumed"))

	for _, i := range []int{0, 2, 4} {
		b.servers[i].Kill()
	}
	// ObtainMany gives up as soon as the quorum is lost: how many of the
	// two live nodes answered before that depends on which answer came
	// first, so only what the guarantee needs is asserted: no lock, an
	// error that matches ErrUnavailable and says fewer than the quorum
	// answered, and nothing left on the nodes (it releases the batch
	// once every node answered, before it returns).
	locks, err := b.rl.ObtainMany(ctx, keys, time.Minute)
	if locks != nil || !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("majority down: %d locks, err = %v, want none and ErrUnavailable", len(locks), err)
	}
	var answered int
	if _, serr := fmt.Sscanf(err.Error()[strings.Index(err.Error(), "obtain many: "):], "obtain many: %d of 5 nodes answered, 3 needed", &answered); serr != nil || answered > 2 {
		t.Fatalf("majority down: err = %v, want at most 2 of 5 nodes answered, 3 needed", err)
	}
	for _, k := range keys {
		if n := b.count(b.key(k), ""); n != 5 {
			t.Fatalf("failed batch left %s on %d live nodes", k, 5-n)
		}
	}
}

// during runs batch again and again, from a goroutine, until it fails or
// until stop is called after it ran twice; stop returns its error.
func during(batch func(what string) error, what string) (stop func() error) {
	stopping := make(chan struct{})
	ran := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			err := batch(fmt.Sprint(what, ", batch ", i))
			select {
			case <-stopping:
				if i > 0 {
					ran <- err
					return
				}
			default:
			}
			if err != nil {
				ran <- err
				return
			}
		}
	}()
	return func() error {
		close(stopping)
		return <-ran
	}
}

// A node answering late: its grants arrive after ObtainMany returned at
// the quorum, with a smaller token than the quorum's, and still get the
// quorum's token written back; a ReleaseMany right after waits for them.
func TestRedlockObtainManySlowNode(t *testing.T) {
	b := setupRedlock(t, 3, &lock.Options{NodeTimeout: 5 * time.Second})
	ctx := context.Background()
	keys := keysOf("k", 30)
	slow := lock.Nodes(b.rl)[0]
	// The slow node's counters lag: the quorum hands out more than it.
	for _, k := range keys[:10] {
		b.nodes[1].Set(ctx, lock.RedlockCounter(b.rl, k), time.Now().Add(time.Hour).UnixMicro(), 0)
	}
	resume := lock.Occupy(slow, false)
	locks, err := b.rl.ObtainMany(ctx, keys, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := lock.Queued(slow); g != len(keys) {
		t.Fatalf("grants queued on the slow node: %d, want %d (ObtainMany returned at the quorum)", g, len(keys))
	}
	resume()
	settleAll(locks)
	for i, l := range locks {
		if l == nil {
			t.Fatalf("%s not granted", keys[i])
		}
		if n := b.atLeast(lock.RedlockCounter(b.rl, keys[i]), l.Fence()); n != 3 {
			t.Errorf("%s: fence %d on %d counters, want 3", l, l.Fence(), n)
		}
	}
	if _, err := b.rl.ReleaseMany(ctx, locks); err != nil {
		t.Fatal(err)
	}
	settleAll(locks)

	resume = lock.Occupy(slow, false)
	locks, err = b.rl.ObtainMany(ctx, keys, time.Minute)
	if err == nil {
		_, err = b.rl.ReleaseMany(ctx, locks)
	}
	if err != nil {
		t.Fatal(err)
	}
	resume()
	settleAll(locks)
	waitFor(t, "the slow node's release", func() bool { return lock.Idle(slow) })
	for _, k := range keys {
		if n := b.count(b.key(k), ""); n != 3 {
			t.Errorf("%s left on %d nodes after ReleaseMany", k, 3-n)
		}
	}
}

// Concurrent batches to one node coalesce: while one is in flight, the
// others queue and go out together.
func TestRedlockObtainManyCoalesced(t *testing.T) {
	b := setupRedlock(t, 3, nil)
	ctx := context.Background()
	nodes := lock.Nodes(b.rl)
	resume := occupyAll(nodes, false)
	const callers, per = 4, 25
	results := make([][]*lock.Lock, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			ls, err := b.rl.ObtainMany(ctx, keysOf(fmt.Sprint("c", i), per), time.Minute)
			if err != nil {
				t.Error(err)
			}
			results[i] = ls
		})
	}
	for _, c := range nodes {
		waitFor(t, "the batches to queue", func() bool { g, _ := lock.Queued(c); return g == callers*per })
	}
	resume()
	wg.Wait()
	for i, c := range nodes {
		if s := lock.Batches(c); s.GrantBatches != 1 || s.Grants != callers*per {
			t.Errorf("node %d: batches = %+v, want one of %d grants", i, s, callers*per)
		}
	}
	for _, ls := range results {
		if slices.Contains(ls, nil) {
			t.Fatalf("not every key granted: %v", ls)
		}
		if _, err := b.rl.ReleaseMany(ctx, ls); err != nil {
			t.Fatal(err)
		}
		settleAll(ls)
	}
}

// manyLocker is what checkManyExclusion needs of a Redlock (or a Client).
type manyLocker interface {
	ObtainMany(ctx context.Context, keys []string, ttl time.Duration) ([]*lock.Lock, error)
	ReleaseMany(ctx context.Context, locks []*lock.Lock) (int, error)
}

// checkManyExclusion runs one goroutine per locker; each takes rounds
// batches of a random half of keys, holds what it got for hold and
// releases it in one call. No key has two holders at once, and each key's
// fences rise in the order of its holds.
func checkManyExclusion(t *testing.T, lockers []manyLocker, keys []string, rounds int, hold time.Duration) {
	t.Helper()
	inside := make([]atomic.Int32, len(keys))
	last := make([]int64, len(keys))
	var mu sync.Mutex
	var grants atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for n, c := range lockers {
		wg.Go(func() {
			for r := range rounds {
				var idx []int
				var want []string
				for i, k := range keys {
					if (i+r+n)%2 == 0 || (i*7+r*3+n)%5 == 0 {
						idx = append(idx, i)
						want = append(want, k)
					}
				}
				locks, err := c.ObtainMany(ctx, want, 5*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				for j, l := range locks {
					if l == nil {
						continue
					}
					i := idx[j]
					if v := inside[i].Add(1); v != 1 {
						t.Errorf("%s: %d holders at once", keys[i], v)
					}
					mu.Lock()
					if l.Fence() <= last[i] {
						t.Errorf("%s: fence %d after %d", keys[i], l.Fence(), last[i])
					}
					last[i] = l.Fence()
					mu.Unlock()
					grants.Add(1)
				}
				time.Sleep(hold)
				for j, l := range locks {
					if l != nil {
						inside[idx[j]].Add(-1)
					}
				}
				if _, err := c.ReleaseMany(ctx, locks); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if g := grants.Load(); g < int64(rounds) {
		t.Errorf("%d grants in %d rounds of %d lockers, want at least %d", g, rounds, len(lockers), rounds)
	}
}

// Goroutines with Redlocks of their own batch overlapping sets of keys
// over five nodes: no key ever has two holders, fences rise per key.
func TestRedlockObtainManyMutualExclusion(t *testing.T) {
	b := setupRedlock(t, 5, nil)
	var lockers []manyLocker
	for range 6 {
		rl := b.redlock(t, nil)
		lockers = append(lockers, rl, rl) // two goroutines share one Redlock: their batches coalesce
	}
	checkManyExclusion(t, lockers, keysOf("shared", 12), 25, 200*time.Microsecond)
}

// manyHelperEnv starts the test binary as a process that batches keys over
// a Redlock; see TestRedlockObtainManyProcesses.
const manyHelperEnv = "LOCK_TEST_MANY_ADDRS"

// manyHelperProcess takes a batch of the keys LOCK_TEST_KEYS over the
// Redlock nodes at LOCK_TEST_MANY_ADDRS, LOCK_TEST_N times, and writes an
// enter and an exit line for each key granted around each hold.
func manyHelperProcess() int {
	var nodes []redis.UniversalClient
	for _, a := range strings.Split(os.Getenv(manyHelperEnv), ",") {
		rdb := redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true, MaxRetries: -1})
		defer func() { _ = rdb.Close() }()
		nodes = append(nodes, rdb)
	}
	rl := lock.NewRedlock(nodes, &lock.Options{Prefix: os.Getenv("LOCK_TEST_PREFIX"), NodeTimeout: 2 * time.Second})
	keys := strings.Split(os.Getenv("LOCK_TEST_KEYS"), ",")
	n, _ := strconv.Atoi(os.Getenv("LOCK_TEST_N"))
	f, err := os.OpenFile(filepath.Clean(os.Getenv("LOCK_TEST_LOG")), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer func() { _ = f.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pid := os.Getpid()
	for range n {
		locks, err := rl.ObtainMany(ctx, keys, 5*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, "obtain many:", err)
			return 1
		}
		for _, l := range locks {
			if l != nil {
				fmt.Fprintf(f, "enter %s %d %d\n", l.Key(), pid, l.Fence())
			}
		}
		time.Sleep(200 * time.Microsecond)
		for _, l := range locks {
			if l != nil {
				fmt.Fprintf(f, "exit %s %d %d\n", l.Key(), pid, l.Fence())
			}
		}
		if _, err := rl.ReleaseMany(ctx, locks); err != nil {
			fmt.Fprintln(os.Stderr, "release many:", err)
			return 1
		}
	}
	return 0
}

// Processes batch the same keys over five nodes: in the log they write,
// no key has two holders at once and each key's fences rise.
func TestRedlockObtainManyProcesses(t *testing.T) {
	b := setupRedlock(t, 5, nil)
	var addrs []string
	for _, s := range b.servers {
		addrs = append(addrs, s.Addr)
	}
	keys := keysOf("p", 8)
	logPath := runHolders(t, 4, func(int) []string {
		return []string{manyHelperEnv + "=" + strings.Join(addrs, ","), "LOCK_TEST_PREFIX=" + b.prefix,
			"LOCK_TEST_KEYS=" + strings.Join(keys, ","), "LOCK_TEST_N=30"}
	})
	if lines := checkHolderLog(t, logPath); lines < 2*len(keys) {
		t.Errorf("%d log lines, want at least %d", lines, 2*len(keys))
	}
}
