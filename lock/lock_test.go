package lock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/internal/redistest"
	"github.com/erpsync/erpsync/lock"
)

func TestObtainRelease(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()

	l, err := b.client.Obtain(ctx, "erp:4711.a-b_c", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l.Key() != "erp:4711.a-b_c" {
		t.Errorf("Key() = %q", l.Key())
	}
	if len(l.Token()) < 27 { // 20 bytes in base64
		t.Errorf("Token() = %q, too short", l.Token())
	}
	if l.Fence() <= 0 {
		t.Errorf("Fence() = %d", l.Fence())
	}
	lockKey := b.prefix + "{erp:4711.a-b_c}"
	if got := b.rdb.Get(ctx, lockKey).Val(); got != l.Token() {
		t.Errorf("Redis key %s = %q, want the token", lockKey, got)
	}
	// One server has one fence counter, kept without expiry.
	checkBound(t, b.rdb, b.prefix+"server:fence", l.Fence())

	if _, err := b.client.Obtain(ctx, "erp:4711.a-b_c", time.Minute, nil); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("second obtain: err = %v, want ErrNotObtained", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("second release: err = %v, want ErrNotHeld", err)
	}
	l2 := mustObtain(t, b.client, "erp:4711.a-b_c", time.Minute)
	if l2.Token() == l.Token() {
		t.Error("two grants share a token")
	}
	if l2.Fence() <= l.Fence() {
		t.Errorf("fence %d after %d", l2.Fence(), l.Fence())
	}
}

func TestDefaultPrefix(t *testing.T) {
	rdb := newRedis(t, redisAddr)
	ctx := context.Background()
	key := "erpsync-test-" + randomHex(6) + "-default"
	// The default prefix's counter (erpsync:lock:server:fence) stays: other
	// tests and programs may count on it, and it is one key.
	l := mustObtain(t, lock.New(rdb, nil), key, time.Minute)
	if n := rdb.Exists(ctx, "erpsync:lock:{"+key+"}").Val(); n != 1 {
		t.Errorf("key under the default prefix missing")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidArguments(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	for _, key := range []string{"", "a{b", "a}b", "{a}"} {
		if _, err := b.client.Obtain(ctx, key, time.Second, nil); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("Obtain(%q): err = %v, want ErrInvalid", key, err)
		}
	}
	if _, err := b.client.Obtain(ctx, "k", 500*time.Microsecond, nil); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("ttl below 1ms: err = %v, want ErrInvalid", err)
	}
	if _, err := b.client.ObtainMany(ctx, []string{"ok", "b{ad"}, time.Second); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("ObtainMany with a brace: err = %v, want ErrInvalid", err)
	}
	l := mustObtain(t, b.client, "k", time.Second)
	if err := l.Refresh(ctx, 0); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("Refresh(0): err = %v, want ErrInvalid", err)
	}
}

func TestExpiry(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	// A lease long enough that a loaded machine still asks again within it.
	first := mustObtain(t, b.client, "job", 400*time.Millisecond)
	if _, err := b.client.Obtain(ctx, "job", time.Second, nil); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("obtain while held: err = %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	if ttl, err := first.TTL(ctx); err != nil || ttl != 0 {
		t.Errorf("TTL after expiry = %v, %v; want 0, nil", ttl, err)
	}
	second := mustObtain(t, b.client, "job", time.Second)
	if second.Fence() <= first.Fence() {
		t.Errorf("fence %d after %d", second.Fence(), first.Fence())
	}
}

// A holder whose lease ran out and passed on cannot delete or extend the
// new holder's lock.
func TestReleaseAfterExpiryLeavesNextHolder(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	old := mustObtain(t, b.client, "rec-1", 30*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	next := mustObtain(t, b.client, "rec-1", time.Minute)

	if err := old.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("stale release: err = %v, want ErrNotHeld", err)
	}
	if err := old.Refresh(ctx, time.Hour); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("stale refresh: err = %v, want ErrNotHeld", err)
	}
	if got := b.rdb.Get(ctx, b.prefix+"{rec-1}").Val(); got != next.Token() {
		t.Fatalf("lock key = %q, want the next holder's token", got)
	}
	if ttl, _ := next.TTL(ctx); ttl <= 50*time.Second || ttl > time.Minute {
		t.Errorf("next holder's TTL = %v, want its own minute", ttl)
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRefresh(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	l := mustObtain(t, b.client, "rec-2", time.Second)
	if ttl, err := l.TTL(ctx); err != nil || ttl <= 0 || ttl > time.Second {
		t.Fatalf("TTL = %v, %v", ttl, err)
	}
	if err := l.Refresh(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if ttl, err := l.TTL(ctx); err != nil || ttl <= 9*time.Second {
		t.Fatalf("TTL after refresh = %v, %v", ttl, err)
	}
	if err := l.Refresh(ctx, 40*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(70 * time.Millisecond)
	if err := l.Refresh(ctx, time.Second); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("refresh after expiry: err = %v, want ErrNotHeld", err)
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("release after expiry: err = %v, want ErrNotHeld", err)
	}
}

func TestFenceIncreasesSequentially(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	var last int64
	for i := range 300 {
		l := mustObtain(t, b.client, "seq", time.Second)
		if l.Fence() <= last {
			t.Fatalf("grant %d: fence %d after %d", i, l.Fence(), last)
		}
		last = l.Fence()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// checkBound checks a shared fence counter (the bound of its epochs, see
// obtain.lua) after grants whose largest token is top: kept without
// expiry, a multiple of 500, at or above top and less than 500 above it.
func checkBound(t *testing.T, rdb redis.UniversalClient, counter string, top int64) {
	t.Helper()
	ctx := context.Background()
	bound, err := rdb.Get(ctx, counter).Int64()
	if err != nil || bound%500 != 0 || bound < top || bound >= top+500 {
		t.Errorf("fence counter %s = %d, %v; want the multiple of 500 at or just above the largest token %d", counter, bound, err, top)
	}
	if ttl := rdb.PTTL(ctx, counter).Val(); ttl != -1 {
		t.Errorf("fence counter TTL = %v, want none", ttl)
	}
}

// A shared counter hands out tokens from its epoch counter, one INCR each,
// until the epoch counter is gone or would pass the bound; a new epoch
// starts above the bound and the clock. The test drives each case by
// writing the two counters itself.
func TestEpochFence(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	bound, epoch := b.prefix+"server:fence", b.prefix+"server:fence:epoch"
	if got := lock.EpochCounter(b.client, "k"); got != epoch {
		t.Fatalf("epoch counter = %q, want %q", got, epoch)
	}
	grant := func() int64 {
		t.Helper()
		l := mustObtain(t, b.client, "k", time.Minute)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return l.Fence()
	}
	grantMany := func(n int) []int64 {
		t.Helper()
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprint("m", i)
		}
		locks, err := b.client.ObtainMany(ctx, keys, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		fences := make([]int64, n)
		for i, l := range locks {
			fences[i] = l.Fence()
		}
		if _, err := b.client.ReleaseMany(ctx, locks); err != nil {
			t.Fatal(err)
		}
		return fences
	}
	// setEpoch writes the epoch counter with a lease long enough for the
	// next grants to find it.
	setEpoch := func(v int64) { b.rdb.Set(ctx, epoch, v, time.Minute) }

	// The first token comes from the clock (TIME in microseconds).
	now, err := b.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	first := grant()
	if d := first - now.UnixMicro(); d < 0 || d > 10e6 {
		t.Errorf("first fence %d is %d µs from the server clock", first, d)
	}
	checkBound(t, b.rdb, bound, first)
	// Its epoch lasts 10 ms.
	if ttl := b.rdb.PTTL(ctx, epoch).Val(); ttl > 10*time.Millisecond || ttl == -1 {
		t.Errorf("epoch counter TTL = %v, want at most 10ms", ttl)
	}

	// Within an epoch, a grant is the epoch counter's INCR: the bound is
	// not read, nor the clock.
	// far, a multiple of 500 about three hours ahead of the clock, would
	// win over it.
	far := (first + 10_000_000_000) / 500 * 500
	e, _ := b.rdb.Get(ctx, bound).Int64()
	b.rdb.Set(ctx, bound, far, 0)
	setEpoch(e - 100)
	if got := grant(); got != e-99 {
		t.Errorf("fence within an epoch = %d, want %d", got, e-99)
	}
	if fs := grantMany(5); fs[0] != e-98 || fs[4] != e-94 {
		t.Errorf("ObtainMany within an epoch: %v, want %d..%d", fs, e-98, e-94)
	}

	// A bound far ahead of the clock (as after the clock stepped back)
	// wins once the epoch ends: by its counter reaching the bound, ...
	setEpoch(far - 1)
	if got := grant(); got != far {
		t.Errorf("fence at the bound = %d, want %d", got, far)
	}
	if got := grant(); got != far+1 {
		t.Errorf("fence past the bound = %d, want %d (a new epoch above it)", got, far+1)
	}
	checkBound(t, b.rdb, bound, far+1)
	// ... by its counter expiring or being lost, ...
	b.rdb.Del(ctx, epoch)
	if got := grant(); got != far+501 {
		t.Errorf("fence after the epoch counter went = %d, want %d", got, far+501)
	}
	// ... or, for a batch, by any of its tokens passing the bound.
	setEpoch(far + 998)
	if fs := grantMany(5); fs[0] != far+1001 || fs[4] != far+1005 {
		t.Errorf("ObtainMany across the bound: %v, want %d..%d", fs, far+1001, far+1005)
	}
	checkBound(t, b.rdb, bound, far+1005)

	// An epoch counter that is not an integer is replaced by a new epoch.
	for _, junk := range []func(){
		func() { b.rdb.Set(ctx, epoch, "x", time.Minute) },
		func() { b.rdb.Del(ctx, epoch); b.rdb.RPush(ctx, epoch, "x") },
	} {
		junk()
		before := b.rdb.Get(ctx, bound).Val()
		got := grant()
		if want, _ := strconv.ParseInt(before, 10, 64); got != want+1 {
			t.Errorf("fence after a bad epoch counter = %d, want %d", got, want+1)
		}
		if v, err := b.rdb.Get(ctx, epoch).Int64(); err != nil && err != redis.Nil || err == nil && v != got {
			t.Errorf("epoch counter = %d, %v after the grant %d", v, err, got)
		}
	}

	// Both counters lost (an empty restart): the clock again.
	b.rdb.Del(ctx, epoch, bound)
	if got := grant(); got <= first || got >= far {
		t.Errorf("fence after both counters went = %d, want from the clock, above %d", got, first)
	}
}

// A per-key counter (over a Ring) ahead of the clock keeps counting; once
// gone, the clock floor is still above every earlier token. It expires
// FenceTTL after its last grant.
func TestFenceCounterAheadOfClockAndExpired(t *testing.T) {
	ring := redis.NewRing(&redis.RingOptions{
		Addrs:                 map[string]string{"one": redisAddr},
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { _ = ring.Close() })
	prefix := randomPrefix()
	c := lock.New(ring, &lock.Options{Prefix: prefix, FenceTTL: 30 * time.Millisecond})
	testFenceCounter(t, newRedis(t, redisAddr), c, prefix+"{k}:fence", 30*time.Millisecond)
}

// testFenceCounter runs grants of key "k" from c against its counter, which
// rdb reads; fenceTTL is the counter's TTL after a short lease.
func testFenceCounter(t *testing.T, rdb *redis.Client, c *lock.Client, counter string, fenceTTL time.Duration) {
	ctx := context.Background()
	if got, _ := lock.Counter(c, "k"); got != counter {
		t.Fatalf("counter of k = %q, want %q", got, counter)
	}
	if e := lock.EpochCounter(c, "k"); e != "" {
		t.Fatalf("a per-key counter with an epoch counter %q", e)
	}

	first := mustObtain(t, c, "k", time.Millisecond*5)
	if ttl := rdb.PTTL(ctx, counter).Val(); ttl <= 0 || ttl > fenceTTL {
		t.Errorf("fence counter TTL = %v, want FenceTTL", ttl)
	}
	// The 5 ms lease may run out before Release on a loaded machine.
	if err := first.Release(ctx); err != nil && !errors.Is(err, lock.ErrExpired) {
		t.Fatal(err)
	}

	// A counter far ahead (as after a clock step back) wins over the clock.
	ahead := first.Fence() + 10_000_000_000
	rdb.Set(ctx, counter, ahead, time.Minute)
	l := mustObtain(t, c, "k", time.Second)
	if l.Fence() != ahead+1 {
		t.Errorf("fence = %d, want counter+1 = %d", l.Fence(), ahead+1)
	}
	_ = l.Release(ctx)

	// A lease longer than FenceTTL keeps its counter as long.
	l = mustObtain(t, c, "k", 2*time.Second)
	if ttl := rdb.PTTL(ctx, counter).Val(); ttl < time.Second {
		t.Errorf("fence counter TTL = %v, want at least the lease", ttl)
	}
	_ = l.Release(ctx)

	rdb.Del(ctx, counter) // as if expired, or lost
	l = mustObtain(t, c, "k", time.Second)
	if l.Fence() <= first.Fence() {
		t.Errorf("fence after the counter expired = %d, not above %d", l.Fence(), first.Fence())
	}
	if got := rdb.Get(ctx, counter).Val(); got != strconv.FormatInt(l.Fence(), 10) {
		t.Errorf("counter stored as %q, want %d in plain digits", got, l.Fence())
	}
	_ = l.Release(ctx)
}

func TestFenceIncreasesAcrossEmptyRestart(t *testing.T) {
	s := redistest.Start(t)
	rdb := newRedis(t, s.Addr)
	c := lock.New(rdb, nil)
	ctx := context.Background()

	var before int64
	for range 3 {
		l := mustObtain(t, c, "erp-42", time.Minute)
		before = l.Fence()
		_ = l.Release(ctx)
	}
	held := mustObtain(t, c, "erp-42", time.Minute) // lost in the restart
	before = held.Fence()

	s.Kill()
	s.Start()
	if n := rdb.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("restarted server has %d keys, want none", n)
	}
	after := mustObtain(t, c, "erp-42", time.Minute)
	if after.Fence() <= before {
		t.Fatalf("fence after an empty restart = %d, not above %d", after.Fence(), before)
	}
	if err := held.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("release of the forgotten grant: err = %v, want ErrNotHeld", err)
	}
}

// Many goroutines, each with a connection pool of its own, contend for one
// key: holders never overlap and see the fences in increasing order.
func TestMutualExclusionGoroutines(t *testing.T) {
	b := setup(t, nil)
	lockers := make([]obtainer, 8)
	for i := range lockers {
		lockers[i] = lock.New(newRedis(t, redisAddr), &lock.Options{Prefix: b.prefix})
	}
	checkMutualExclusion(t, lockers, 40, 20*time.Second, 50*time.Microsecond, func() lock.RetryStrategy {
		return lock.ExponentialBackoff(100*time.Microsecond, 4*time.Millisecond)
	})
}

// Several OS processes contend for one key and log their critical
// sections to one file: the sections never interleave, and fences rise.
// Every other process obtains with FenceOnDemand and fetches its token
// while it holds the lock.
func TestMutualExclusionProcesses(t *testing.T) {
	b := setup(t, nil)
	const procs, rounds = 4, 30
	logPath := runHolders(t, procs, func(i int) []string {
		return []string{helperEnv + "=1", "LOCK_TEST_PREFIX=" + b.prefix, "LOCK_TEST_KEY=proc",
			fmt.Sprintf("LOCK_TEST_N=%d", rounds), fmt.Sprintf("LOCK_TEST_ON_DEMAND=%t", i%2 == 1)}
	})
	if lines := checkHolderLog(t, logPath); lines != 2*procs*rounds {
		t.Errorf("%d log lines, want %d", lines, 2*procs*rounds)
	}
}

// runHolders runs procs holder processes of this test binary, process i
// with env(i) added to its environment and LOCK_TEST_LOG naming the log
// they share, and returns the log's path once all exited.
func runHolders(t *testing.T, procs int, env func(i int) []string) string {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(logPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmds := make([]*exec.Cmd, procs)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(append(os.Environ(), env(i)...), "LOCK_TEST_LOG="+logPath)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("holder process: %v", err)
		}
	}
	return logPath
}

// checkHolderLog reads the log that holder processes wrote, lines of
// "enter KEY PID FENCE" and "exit KEY PID FENCE", and checks that no key
// had two holders at once and that each key's fences rose. It returns the
// number of lines.
func checkHolderLog(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	inside := map[string]string{}
	last := map[string]int64{}
	lines := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines++
		var op, key string
		var pid, fence int64
		if _, err := fmt.Sscanf(sc.Text(), "%s %s %d %d", &op, &key, &pid, &fence); err != nil {
			t.Fatalf("line %d %q: %v", lines, sc.Text(), err)
		}
		id := fmt.Sprint(pid, fence)
		switch {
		case op == "enter" && inside[key] == "":
			if fence <= last[key] {
				t.Fatalf("line %d: %s fence %d after %d", lines, key, fence, last[key])
			}
			inside[key], last[key] = id, fence
		case op == "exit" && inside[key] == id:
			inside[key] = ""
		default:
			t.Fatalf("line %d: %q while %q holds %s", lines, sc.Text(), inside[key], key)
		}
	}
	return lines
}

func TestUnavailable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	c := lock.New(rdb, nil)
	ctx := context.Background()

	_, err = c.Obtain(ctx, "k", time.Second, &lock.ObtainOptions{Retry: lock.LinearBackoff(time.Millisecond)})
	if !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	var opErr *net.OpError
	if !errors.As(err, &opErr) {
		t.Errorf("err = %v, the network error is not reachable", err)
	}
	if errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("err = %v also matches ErrNotObtained", err)
	}
	if _, err := c.ObtainMany(ctx, []string{"a", "b"}, time.Second); !errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("ObtainMany: err = %v, want ErrUnavailable", err)
	}
}

// A server that stops answering (SIGSTOP) is bounded by Options.Timeout
// when ctx has no deadline, and by ctx's deadline otherwise.
func TestCallDeadline(t *testing.T) {
	s := redistest.Start(t)
	rdb := newRedis(t, s.Addr)
	c := lock.New(rdb, &lock.Options{Timeout: 150 * time.Millisecond})
	l := mustObtain(t, c, "k", time.Minute)

	s.Pause()
	defer s.Resume()
	start := time.Now()
	_, err := c.Obtain(context.Background(), "other", time.Second, nil)
	// The Timeout is the call's own: an unavailable server, not the
	// caller's ctx ending.
	if !errors.Is(err, lock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Obtain against a paused server: err = %v, want ErrUnavailable from the Timeout", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Obtain took %v, want about the 150ms Timeout", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	err = l.Release(ctx)
	if errors.Is(err, lock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Release with the caller's deadline: err = %v, want the ctx error", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("Release took %v, want about the 50ms of ctx", d)
	}

	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	_, err = c.Obtain(ctx2, "other", time.Second, nil)
	if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Obtain with the caller's deadline: err = %v, want ErrNotObtained and DeadlineExceeded", err)
	}
}

func TestObtainWaitsForRelease(t *testing.T) {
	var contended, obtained, gaveUp atomic.Int32
	var waited atomic.Int64
	b := setup(t, &lock.Options{Hooks: &lock.Hooks{
		Contended:   func(string) { contended.Add(1) },
		Obtained:    func(_ string, wait time.Duration) { obtained.Add(1); waited.Store(int64(wait)) },
		NotObtained: func(string) { gaveUp.Add(1) },
	}})
	ctx := context.Background()
	first := mustObtain(t, b.client, "job", time.Minute)
	go func() {
		time.Sleep(60 * time.Millisecond)
		_ = first.Release(ctx)
	}()
	l, err := b.client.Obtain(ctx, "job", time.Second, &lock.ObtainOptions{Retry: lock.LinearBackoff(5 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if l.Fence() <= first.Fence() {
		t.Errorf("fence %d after %d", l.Fence(), first.Fence())
	}
	if contended.Load() < 2 || obtained.Load() != 2 || gaveUp.Load() != 0 {
		t.Errorf("hooks: contended %d, obtained %d, not obtained %d", contended.Load(), obtained.Load(), gaveUp.Load())
	}
	if w := time.Duration(waited.Load()); w < 50*time.Millisecond {
		t.Errorf("Obtained hook wait = %v, want about 60ms", w)
	}

	// An exhausted strategy gives up with ErrNotObtained.
	start := time.Now()
	_, err = b.client.Obtain(ctx, "job", time.Second, &lock.ObtainOptions{
		Retry: lock.LimitRetry(lock.LinearBackoff(10*time.Millisecond), 3),
	})
	if !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("err = %v, want ErrNotObtained", err)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("gave up after %v, want three waits of 10ms", d)
	}
	if gaveUp.Load() != 1 {
		t.Errorf("NotObtained called %d times, want 1", gaveUp.Load())
	}
}

func TestObtainContextEndsWhileWaiting(t *testing.T) {
	b := setup(t, nil)
	mustObtain(t, b.client, "job", time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.client.Obtain(ctx, "job", time.Second, &lock.ObtainOptions{Retry: lock.LinearBackoff(time.Hour)})
	if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrNotObtained and DeadlineExceeded", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("returned after %v, want when ctx ended", d)
	}

	cause := errors.New("shutting down")
	ctx2, cancel2 := context.WithCancelCause(context.Background())
	cancel2(cause)
	_, err = b.client.Obtain(ctx2, "job", time.Second, nil)
	if !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
		t.Fatalf("err = %v, want ErrNotObtained, Canceled and the cause", err)
	}
}

// go-redis's Run sends EVALSHA and falls back to EVAL on NOSCRIPT: every
// operation keeps working after the script cache is flushed.
func TestScriptFlush(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	flush := func() {
		t.Helper()
		if err := b.rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	flush()
	l := mustObtain(t, b.client, "k", time.Minute)
	flush()
	if err := l.Refresh(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	flush()
	if ttl, err := l.TTL(ctx); err != nil || ttl <= 0 {
		t.Fatalf("TTL = %v, %v", ttl, err)
	}
	flush()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	flush()
	locks, err := b.client.ObtainMany(ctx, []string{"a", "b"}, time.Minute)
	if err != nil || locks[0] == nil || locks[1] == nil {
		t.Fatalf("ObtainMany = %v, %v", locks, err)
	}
	flush()
	if n, err := b.client.ReleaseMany(ctx, locks); err != nil || n != 0 {
		t.Fatalf("ReleaseMany = %d, %v", n, err)
	}
}

// Release and Refresh say why a lock is no longer held: its key is gone
// (ErrExpired) or carries another token (ErrTaken); both match ErrNotHeld.
func TestNotHeldReasons(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	if !errors.Is(lock.ErrExpired, lock.ErrNotHeld) || !errors.Is(lock.ErrTaken, lock.ErrNotHeld) {
		t.Fatal("ErrExpired and ErrTaken must match ErrNotHeld")
	}
	if errors.Is(lock.ErrExpired, lock.ErrTaken) || errors.Is(lock.ErrTaken, lock.ErrExpired) || errors.Is(lock.ErrNotHeld, lock.ErrExpired) {
		t.Fatal("ErrExpired, ErrTaken and ErrNotHeld must stay apart the other way")
	}

	expired := mustObtain(t, b.client, "free", 30*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	if err := expired.Refresh(ctx, time.Second); err != lock.ErrExpired {
		t.Errorf("Refresh of an expired, free lock: err = %v, want ErrExpired", err)
	}
	if err := expired.Release(ctx); err != lock.ErrExpired {
		t.Errorf("Release of an expired, free lock: err = %v, want ErrExpired", err)
	}

	taken := mustObtain(t, b.client, "taken", 30*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	next := mustObtain(t, b.client, "taken", time.Minute)
	if err := taken.Refresh(ctx, time.Second); err != lock.ErrTaken {
		t.Errorf("Refresh of a lock taken by another: err = %v, want ErrTaken", err)
	}
	if err := taken.Release(ctx); err != lock.ErrTaken {
		t.Errorf("Release of a lock taken by another: err = %v, want ErrTaken", err)
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A second Release says it already happened, rather than "expired".
	err := next.Release(ctx)
	if !errors.Is(err, lock.ErrNotHeld) || errors.Is(err, lock.ErrExpired) || errors.Is(err, lock.ErrTaken) {
		t.Errorf("second Release: err = %v, want ErrNotHeld only", err)
	}

	// A watchdog that finds the key gone says so in its cause.
	l := mustObtain(t, b.client, "held", 150*time.Millisecond)
	hctx := l.Hold(ctx)
	b.rdb.Del(ctx, b.prefix+"{held}")
	waitDone(t, hctx, time.Second)
	if cause := context.Cause(hctx); !errors.Is(cause, lock.ErrLost) || !errors.Is(cause, lock.ErrExpired) {
		t.Errorf("Hold cause = %v, want ErrLost and ErrExpired", cause)
	}
}

// A Release that failed on the network can be tried again.
func TestReleaseRetryAfterFailure(t *testing.T) {
	s := redistest.Start(t)
	c := lock.New(newRedis(t, s.Addr), nil)
	l := mustObtain(t, c, "k", time.Minute)
	s.Pause()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := l.Release(ctx)
	s.Resume()
	if err == nil || errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release against a paused server: err = %v, want a failure", err)
	}
	// The first DEL may have run after all, its reply lost: then the key
	// is gone, and Release says so rather than "already released".
	if err := l.Release(context.Background()); err != nil && err != lock.ErrExpired {
		t.Fatalf("second Release: %v", err)
	}
}

// A nil *Lock, as a failed Obtain returns, answers every method without a
// panic: ErrNotHeld where there is an error to give.
func TestNilLock(t *testing.T) {
	var l *lock.Lock
	ctx := context.Background()
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Release: %v, want ErrNotHeld", err)
	}
	if err := l.Refresh(ctx, time.Second); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Refresh: %v, want ErrNotHeld", err)
	}
	if _, err := l.TTL(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("TTL: %v, want ErrNotHeld", err)
	}
	if _, err := l.FetchFence(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("FetchFence: %v, want ErrNotHeld", err)
	}
	if hctx := l.Hold(ctx); !errors.Is(context.Cause(hctx), lock.ErrNotHeld) {
		t.Errorf("Hold: cause %v, want ErrNotHeld", context.Cause(hctx))
	}
	if l.Fence() != 0 || l.Key() != "" || l.Token() != "" || l.String() != "<nil>" {
		t.Errorf("Fence %d, Key %q, Token %q, String %q", l.Fence(), l.Key(), l.Token(), l.String())
	}
}
