// Command lockbench compares erpsync's lock package with two
// widely used Go Redis locks, github.com/bsm/redislock and
// github.com/go-redsync/redsync/v4, in one process on the same Redis: how
// many lock+unlock pairs each completes per second, one goroutine and many
// on distinct keys, and Redlock over several local redis-server processes
// that it starts and stops itself.
//
// It is a module of its own so that the peers stay out of the product's
// go.mod. Its module path lies under github.com/erpsync/erpsync, which lets
// it import the project's internal packages (internal/redisproc) as well as
// the lock package.
//
// Usage:
//
//	go run . [-redis ADDR] [-d 2ms] [-rounds 1000] [-nodes 5] [-run REGEXP] [-cpuprofile FILE]
//
// The implementations of one row take turns in short phases (-d with one
// goroutine, 100 times that with 64), all goroutines on the same one, in
// an order that rotates from round to round (see runRow): on a machine
// whose speed wanders over seconds, as these shared ones do, a run of
// half a second each let the ratio of one row swing by a third between
// runs. The table gives each implementation's rate over all its phases,
// its ratio to the faster peer's, the least and the largest of that ratio
// over 10 blocks of rounds, and the CPU time per pair of this process and
// of the Redis servers of the row (INFO cpu, user and system, summed over
// the Redlock nodes; with -redis, whatever else that server serves counts
// too). Without -redis the single-server rows use a redis-server of their
// own, started like the Redlock nodes (no persistence, loopback, a free
// port).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/internal/redisproc"
	"github.com/erpsync/erpsync/lock"
)

// ttl is the lease of every lock taken.
const ttl = 10 * time.Second

// redlockBatch is the keys per call of the Redlock batch rows: the sync's
// default chunk size.
const redlockBatch = 500

// keySpace is how many distinct keys the goroutines cycle through.
const keySpace = 100_000

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		os.Exit(1)
	}
}

// pairFunc obtains and releases the lock of key once.
type pairFunc func(ctx context.Context, key string) error

// impl is one implementation in one row, ready to run.
type impl struct {
	name string
	pair pairFunc
	// batch is how many pairs one call of pair makes (0: one): a batch
	// implementation locks and unlocks that many keys per call.
	batch int
}

// pairs returns how many pairs one call of im's pair makes.
func (im impl) pairs() int64 { return int64(max(im.batch, 1)) }

// row is one line group of the table: the implementations compared on it
// and how many goroutines drive them.
type row struct {
	name    string
	workers int
	impls   []impl
	// servers are the Redis servers the row runs on, whose CPU time
	// (INFO cpu) is read around each measurement.
	servers []*redis.Client
}

// result is what one implementation of one row did, summed over the
// phases it ran, and per block of rounds (see blocks).
type result struct {
	row, impl string
	ops       int64
	wall      time.Duration // of its phases
	cpu       time.Duration // of this process during its phases
	srvCPU    time.Duration // of the row's Redis servers during its phases
	allocs    uint64
	// blockOps and blockWall are ops and wall per block of rounds.
	blockOps  []int64
	blockWall []time.Duration
}

// rate returns pairs per second.
func (r *result) rate() float64 { return rate(r.ops, r.wall) }

func rate(ops int64, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return float64(ops) / wall.Seconds()
}

// perPair returns d per pair in µs.
func (r *result) perPair(d time.Duration) float64 {
	if r.ops == 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(r.ops)
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("lockbench", flag.ContinueOnError)
	addr := fs.String("redis", "", "Redis of the single-server rows (default: a redis-server of its own)")
	dur := fs.Duration("d", 2*time.Millisecond, "phase of one implementation in a round of the one-goroutine rows (100 times that with 64)")
	rounds := fs.Int("rounds", 1000, "rounds of the one-goroutine rows (a twentieth of that with 64)")
	nodes := fs.Int("nodes", 5, "redis-server processes of the Redlock rows")
	filter := fs.String("run", "", "only rows/implementations matching this regexp (row/impl)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if _, r := manyPhase(*dur, *rounds); r < blocks || *dur <= 0 {
		return fmt.Errorf("-rounds must be at least %d and -d positive", *rounds*blocks/max(r, 1))
	}
	re, err := regexp.Compile(*filter)
	if err != nil {
		return err
	}

	ctx := context.Background()
	all, err := redisproc.StartN(*nodes + 1)
	if err != nil {
		return fmt.Errorf("start redis-servers (needed for the Redlock rows): %w", err)
	}
	stopAll := sync.OnceFunc(func() { redisproc.StopAll(all) })
	defer stopAll()
	// An interrupt stops the servers too, rather than leaving them behind.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		if _, ok := <-sig; ok {
			stopAll()
			os.Exit(130)
		}
	}()
	if *addr == "" {
		*addr = all[*nodes].Addr
	}
	servers := all[:*nodes] // the Redlock nodes
	single := func(poolSize int) *redis.Client {
		return redis.NewClient(&redis.Options{Addr: *addr, PoolSize: poolSize})
	}
	probe := single(1)
	if err := probe.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis at %s: %w", *addr, err)
	}
	_ = probe.Close()
	nodeClients := func(poolSize int) []*redis.Client {
		out := make([]*redis.Client, len(servers))
		for i, s := range servers {
			out[i] = redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: poolSize})
		}
		return out
	}

	// Every key of the run starts with prefix, so that the keys left in the
	// shared Redis (fence counters live an hour) can be deleted at the end.
	prefix := fmt.Sprintf("lockbench:%d:", time.Now().UnixNano())
	defer func() {
		rdb := single(1)
		defer func() { _ = rdb.Close() }()
		if err := deletePrefix(rdb, prefix); err != nil {
			fmt.Fprintln(os.Stderr, "lockbench: delete keys:", err)
		}
	}()

	var closers []func() error
	defer func() {
		for _, c := range closers {
			_ = c()
		}
	}()
	// Each implementation of each row gets clients of its own, with the
	// same options: one pool connection per goroutine.
	singleImpls := func(workers int) []impl {
		e, o, b, r := single(workers), single(workers), single(workers), single(workers)
		closers = append(closers, e.Close, o.Close, b.Close, r.Close)
		return []impl{
			{"erpsync", erpsyncPair(e, prefix, nil), 0},
			{onDemandImpl, erpsyncPair(o, prefix, &lock.ObtainOptions{FenceOnDemand: true}), 0},
			{"bsm/redislock", redislockPair(b, prefix), 0},
			{"redsync", redsyncPair([]*redis.Client{r}, prefix), 0},
		}
	}
	redlockImpls := func(workers int) []impl {
		e, r := nodeClients(workers), nodeClients(workers)
		for _, c := range slices.Concat(e, r) {
			closers = append(closers, c.Close)
		}
		return []impl{
			{"erpsync", erpsyncRedlockPair(e, prefix), 0},
			{"redsync", redsyncPair(r, prefix), 0},
		}
	}
	// The sync's chunks: a batch per call, beside one key per call.
	redlockBatchImpls := func(workers int) []impl {
		m, e, r := nodeClients(workers), nodeClients(workers), nodeClients(workers)
		for _, c := range slices.Concat(m, e, r) {
			closers = append(closers, c.Close)
		}
		return []impl{
			{fmt.Sprintf("erpsync, ObtainMany of %d", redlockBatch), erpsyncRedlockBatch(m, prefix, redlockBatch), redlockBatch},
			{"erpsync", erpsyncRedlockPair(e, prefix), 0},
			{"redsync", redsyncPair(r, prefix), 0},
		}
	}
	singleStats := []*redis.Client{single(1)}
	nodeStats := nodeClients(1)
	for _, c := range slices.Concat(singleStats, nodeStats) {
		closers = append(closers, c.Close)
	}
	rows := []row{
		{"1 goroutine, distinct keys", 1, singleImpls(1), singleStats},
		{"64 goroutines, distinct keys", 64, singleImpls(64), singleStats},
		{fmt.Sprintf("Redlock %d nodes, 1 goroutine", len(servers)), 1, redlockImpls(1), nodeStats},
		{fmt.Sprintf("Redlock %d nodes, 64 goroutines", len(servers)), 64, redlockImpls(64), nodeStats},
		{fmt.Sprintf("Redlock %d nodes, 16 goroutines, batches", len(servers)), 16, redlockBatchImpls(16), nodeStats},
	}

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	var results []*result
	for _, rw := range rows {
		for _, im := range rw.impls {
			if !re.MatchString(rw.name + "/" + im.name) {
				continue
			}
			results = append(results, &result{row: rw.name, impl: im.name})
		}
	}
	if len(results) == 0 {
		return errors.New("no row matches -run")
	}
	for _, rw := range rows {
		var impls []impl
		var res []*result
		for _, im := range rw.impls {
			if r := find(results, rw.name, im.name); r != nil {
				impls = append(impls, im)
				res = append(res, r)
			}
		}
		if len(impls) == 0 {
			continue
		}
		if err := runRow(ctx, rw, impls, res, *dur, *rounds); err != nil {
			return fmt.Errorf("%s: %w", rw.name, err)
		}
	}
	printTable(out, results, *dur, *rounds)
	return nil
}

func find(rs []*result, row, impl string) *result {
	for _, r := range rs {
		if r.row == row && r.impl == impl {
			return r
		}
	}
	return nil
}

// blocks is how many blocks the rounds of a row are cut into for the
// spread of its ratios.
const blocks = 10

// manyPhase returns the phase and the rounds of a row of many goroutines
// from those of one goroutine: a phase must be long against one pair,
// which there takes as long as 64 goroutines' turns at the server (see
// runRow), and the row about as long as a row of one goroutine.
func manyPhase(d time.Duration, rounds int) (time.Duration, int) {
	return 100 * d, rounds / 20
}

// runRow measures the implementations of rw, which res holds the results
// of, in phases: all rw.workers goroutines run one implementation's pair
// for one phase, then the next implementation's, and so on; a round is one
// phase of each, in an order that rotates from round to round. Phases are
// short (d with one goroutine, see manyPhase with more), so that whatever
// else the machine does over milliseconds falls on every implementation
// alike; the sums over all rounds give the rates. A phase ends when every
// goroutine finished the pair it was in at its end, and counts those
// pairs: with one goroutine its time is exactly that of its pairs; with
// many, the last pairs run with fewer goroutines, which costs each
// implementation about half of one of its pairs' time per phase. Each
// implementation first runs one phase of 10 times the row's as a warm-up.
func runRow(ctx context.Context, rw row, impls []impl, res []*result, d time.Duration, rounds int) error {
	phase := d
	if rw.workers > 1 {
		phase, rounds = manyPhase(d, rounds)
	}
	for _, r := range res {
		r.blockOps = make([]int64, blocks)
		r.blockWall = make([]time.Duration, blocks)
	}
	pool := newWorkers(ctx, rw.workers)
	defer pool.stop()
	for i, im := range impls {
		if _, err := pool.run(im, fmt.Sprintf("w%d:", i), 10*phase); err != nil {
			return fmt.Errorf("%s: warm-up: %w", im.name, err)
		}
	}
	for round := range rounds {
		block := round * blocks / rounds
		for j := range impls {
			i := (round + j) % len(impls)
			r := res[i]
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			srv0 := serverCPU(ctx, rw.servers)
			cpu0 := cpuTime()
			start := time.Now()
			n, err := pool.run(impls[i], fmt.Sprintf("%d:", round), phase)
			wall := time.Since(start)
			cpu1 := cpuTime()
			srv1 := serverCPU(ctx, rw.servers)
			runtime.ReadMemStats(&ms1)
			if err != nil {
				return fmt.Errorf("%s: %w", r.impl, err)
			}
			r.ops += n
			r.wall += wall
			r.cpu += cpu1 - cpu0
			r.srvCPU += srv1 - srv0
			r.allocs += ms1.Mallocs - ms0.Mallocs
			r.blockOps[block] += n
			r.blockWall[block] += wall
		}
		if (round+1)%(rounds/blocks) == 0 {
			fmt.Fprintf(os.Stderr, "%-32s round %4d/%d", rw.name, round+1, rounds)
			for _, r := range res {
				fmt.Fprintf(os.Stderr, "  %s %.0f/s", r.impl, rate(r.blockOps[block], r.blockWall[block]))
			}
			fmt.Fprintln(os.Stderr)
		}
	}
	return nil
}

// workers are the goroutines of a row, kept across its phases.
type workers struct {
	ctx   context.Context
	start []chan phaseSpec
	done  chan phaseDone
}

// phaseSpec is one phase of one implementation.
type phaseSpec struct {
	pair      pairFunc
	pairs     int64 // per call of pair
	keyPrefix string
	until     time.Time
	next      *atomic.Int64
}

// phaseDone is what one goroutine did in a phase.
type phaseDone struct {
	n   int64
	err error
}

func newWorkers(ctx context.Context, n int) *workers {
	w := &workers{ctx: ctx, start: make([]chan phaseSpec, n), done: make(chan phaseDone, n)}
	for i := range w.start {
		w.start[i] = make(chan phaseSpec)
		go w.loop(w.start[i])
	}
	return w
}

// loop runs one goroutine's phases: pairs on distinct keys until the
// phase's end.
func (w *workers) loop(start chan phaseSpec) {
	for p := range start {
		var n int64
		var err error
		for time.Now().Before(p.until) {
			key := p.keyPrefix + strconv.FormatInt(p.next.Add(1)%keySpace, 10)
			if err = p.pair(w.ctx, key); err != nil {
				break
			}
			n += p.pairs
		}
		w.done <- phaseDone{n, err}
	}
}

// run runs im's pair on every goroutine for d and returns the pairs done.
func (w *workers) run(im impl, keyPrefix string, d time.Duration) (int64, error) {
	p := phaseSpec{pair: im.pair, pairs: im.pairs(), keyPrefix: keyPrefix, until: time.Now().Add(d), next: new(atomic.Int64)}
	for _, c := range w.start {
		c <- p
	}
	var n int64
	var err error
	for range w.start {
		r := <-w.done
		n += r.n
		if err == nil {
			err = r.err
		}
	}
	return n, err
}

func (w *workers) stop() {
	for _, c := range w.start {
		close(c)
	}
}

// serverCPU returns the CPU time (user and system, from INFO cpu) that the
// servers used so far, summed; 0 for a server that does not answer.
func serverCPU(ctx context.Context, servers []*redis.Client) time.Duration {
	var sum float64
	for _, s := range servers {
		info, err := s.Info(ctx, "cpu").Result()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(info, "\r\n") {
			name, value, _ := strings.Cut(line, ":")
			if name == "used_cpu_sys" || name == "used_cpu_user" {
				v, _ := strconv.ParseFloat(value, 64)
				sum += v
			}
		}
	}
	return time.Duration(sum * float64(time.Second))
}

// cpuTime returns the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// onDemandImpl is erpsync's lock obtained with FenceOnDemand, whose
// fencing token the loop never fetches, as the peers' grants have none.
const onDemandImpl = "erpsync, fence on demand"

// isPeer reports whether impl is one of the peers rather than erpsync.
func isPeer(impl string) bool { return !strings.HasPrefix(impl, "erpsync") }

func erpsyncPair(rdb *redis.Client, prefix string, opt *lock.ObtainOptions) pairFunc {
	c := lock.New(rdb, &lock.Options{Prefix: prefix + "erpsync:"})
	return func(ctx context.Context, key string) error {
		l, err := c.Obtain(ctx, key, ttl, opt)
		if err != nil {
			return err
		}
		return l.Release(ctx)
	}
}

func erpsyncRedlockPair(nodes []*redis.Client, prefix string) pairFunc {
	// redsync bounds an attempt by 5% of the TTL; erpsync bounds each node
	// call by NodeTimeout, by default min(50 ms, ttl/10), which 64
	// goroutines over 5 servers on 2 cores overrun. Same bound for both.
	rl := newRedlock(nodes, prefix, ttl/20)
	return func(ctx context.Context, key string) error {
		l, err := rl.Obtain(ctx, key, ttl, nil)
		if err != nil {
			return err
		}
		return l.Release(ctx)
	}
}

// newRedlock returns erpsync's Redlock over nodes with nodeTimeout (0:
// the default).
func newRedlock(nodes []*redis.Client, prefix string, nodeTimeout time.Duration) *lock.Redlock {
	u := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		u[i] = n
	}
	return lock.NewRedlock(u, &lock.Options{Prefix: prefix + "erpsync:", NodeTimeout: nodeTimeout})
}

// erpsyncRedlockBatch locks and unlocks n keys per call with ObtainMany
// and ReleaseMany, as the sync does a chunk: key + ":0", key + ":1", ...
// Its node calls have the sync's bound, a batch's default (ttl/10, at
// most 1 s).
func erpsyncRedlockBatch(nodes []*redis.Client, prefix string, n int) pairFunc {
	rl := newRedlock(nodes, prefix, 0)
	return func(ctx context.Context, key string) error {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = key + ":" + strconv.Itoa(i)
		}
		locks, err := rl.ObtainMany(ctx, keys, ttl)
		if err != nil {
			return err
		}
		if i := slices.Index(locks, nil); i >= 0 {
			return fmt.Errorf("obtain many: %s not granted", keys[i])
		}
		notHeld, err := rl.ReleaseMany(ctx, locks)
		if err == nil && notHeld > 0 {
			err = fmt.Errorf("release many: %d not held", notHeld)
		}
		return err
	}
}

func redislockPair(rdb *redis.Client, prefix string) pairFunc {
	c := redislock.New(rdb)
	prefix += "redislock:{"
	return func(ctx context.Context, key string) error {
		l, err := c.Obtain(ctx, prefix+key+"}", ttl, nil)
		if err != nil {
			return err
		}
		return l.Release(ctx)
	}
}

func redsyncPair(nodes []*redis.Client, prefix string) pairFunc {
	pools := make([]redsyncredis.Pool, len(nodes))
	for i, n := range nodes {
		pools[i] = goredis.NewPool(n)
	}
	rs := redsync.New(pools...)
	prefix += "redsync:{"
	return func(ctx context.Context, key string) error {
		m := rs.NewMutex(prefix+key+"}", redsync.WithExpiry(ttl), redsync.WithTries(1))
		if err := m.LockContext(ctx); err != nil {
			return err
		}
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: unlock: not released")
		}
		return err
	}
}

func printTable(w io.Writer, results []*result, d time.Duration, rounds int) {
	mp, mr := manyPhase(d, rounds)
	fmt.Fprintf(w, "lock+unlock pairs per second; one goroutine: %d rounds of phases of %v, 64 goroutines: %d rounds of %v; GOMAXPROCS=%d, %s\n\n",
		rounds, d, mr, mp, runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Fprintf(w, "| row | implementation | ops/s | ratio vs the faster peer | ratio in %d blocks of rounds (min-max) | client CPU µs/pair | Redis CPU µs/pair | allocs/pair |\n", blocks)
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range results {
		ratio, spread := "n/a", "n/a"
		if p := fasterPeer(r, results); p != nil {
			lo, hi := blockRange(r, p)
			ratio = fmt.Sprintf("%.2f", r.rate()/p.rate())
			spread = fmt.Sprintf("%.2f-%.2f", lo, hi)
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %s | %s | %.1f | %.1f | %.0f |\n", r.row, r.impl, r.rate(), ratio, spread,
			r.perPair(r.cpu), r.perPair(r.srvCPU), float64(r.allocs)/float64(max(r.ops, 1)))
	}
}

// fasterPeer returns the peer of r's row with the higher rate, nil when
// the row has none.
func fasterPeer(r *result, results []*result) *result {
	var best *result
	for _, p := range results {
		if p.row == r.row && isPeer(p.impl) && (best == nil || p.rate() > best.rate()) {
			best = p
		}
	}
	return best
}

// blockRange returns the smallest and the largest ratio of a's rate to
// b's over the blocks of rounds.
func blockRange(a, b *result) (lo, hi float64) {
	for i := range a.blockOps {
		q := rate(a.blockOps[i], a.blockWall[i]) / rate(b.blockOps[i], b.blockWall[i])
		if i == 0 || q < lo {
			lo = q
		}
		if i == 0 || q > hi {
			hi = q
		}
	}
	return lo, hi
}

// deletePrefix deletes the keys under prefix.
func deletePrefix(rdb *redis.Client, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 1000 {
			if err := rdb.Unlink(ctx, keys...).Err(); err != nil {
				return err
			}
			keys = keys[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(keys) > 0 {
		return rdb.Unlink(ctx, keys...).Err()
	}
	return nil
}
