// Command lockbench compares erpsync's lock (internal/lock) with two
// widely used Go Redis locks, github.com/bsm/redislock and
// github.com/go-redsync/redsync/v4, in one process on the same Redis: how
// many lock+unlock pairs each completes per second, one goroutine and many
// on distinct keys, and Redlock over several local redis-server processes
// that it starts and stops itself.
//
// It is a module of its own so that the peers stay out of the product's
// go.mod. Its module path lies under github.com/erpsync/erpsync, which lets
// it import internal/lock (the go command checks internal imports by
// import path).
//
// Usage:
//
//	go run . [-redis ADDR] [-d 500ms] [-rounds 21] [-nodes 5] [-run REGEXP] [-cpuprofile FILE]
//
// The implementations of one row take turns in slices of -d (after a
// warm-up of d/4 each), in an order that alternates from round to round,
// so that load from other processes on the machine falls on all of them
// alike; the table shows the median of the rounds, with the CPU time per
// pair of this process and of the Redis servers of the row (INFO cpu, user
// and system, summed over the Redlock nodes; with -redis, whatever else
// that server serves counts too). Without -redis the
// single-server rows use a redis-server of their own, started like the
// Redlock nodes (no persistence, loopback, a free port).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
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

	"github.com/erpsync/erpsync/internal/lock"
)

// ttl is the lease of every lock taken.
const ttl = 10 * time.Second

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
}

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

type result struct {
	row, impl string
	ops       []float64 // per round
	cpu       []float64 // client CPU µs per pair, per round
	srvCPU    []float64 // Redis CPU µs per pair (all the row's servers), per round
	allocs    []float64 // heap allocations per pair, per round
}

func (r *result) median() float64 { return median(r.ops) }

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("lockbench", flag.ContinueOnError)
	addr := fs.String("redis", "", "Redis of the single-server rows (default: a redis-server of its own)")
	dur := fs.Duration("d", 500*time.Millisecond, "measuring time of one implementation in one round")
	rounds := fs.Int("rounds", 21, "rounds; the table shows the median")
	nodes := fs.Int("nodes", 5, "redis-server processes of the Redlock rows")
	filter := fs.String("run", "", "only rows/implementations matching this regexp (row/impl)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	re, err := regexp.Compile(*filter)
	if err != nil {
		return err
	}

	ctx := context.Background()
	all, err := startServers(*nodes + 1)
	stopAll := sync.OnceFunc(func() {
		for _, s := range all {
			s.stop()
		}
	})
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
	if err != nil {
		return err
	}
	if *addr == "" {
		*addr = all[*nodes].addr
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
			out[i] = redis.NewClient(&redis.Options{Addr: s.addr, PoolSize: poolSize})
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
		e, b, r := single(workers), single(workers), single(workers)
		closers = append(closers, e.Close, b.Close, r.Close)
		return []impl{
			{"erpsync", erpsyncPair(e, prefix)},
			{"bsm/redislock", redislockPair(b, prefix)},
			{"redsync", redsyncPair([]*redis.Client{r}, prefix)},
		}
	}
	redlockImpls := func(workers int) []impl {
		e, r := nodeClients(workers), nodeClients(workers)
		for _, c := range slices.Concat(e, r) {
			closers = append(closers, c.Close)
		}
		return []impl{
			{"erpsync", erpsyncRedlockPair(e, prefix)},
			{"redsync", redsyncPair(r, prefix)},
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
		for round := range *rounds {
			// Alternate the order of the implementations from round to
			// round, so that none always runs first on a cold server.
			impls := slices.Clone(rw.impls)
			if round%2 == 1 {
				slices.Reverse(impls)
			}
			for _, im := range impls {
				res := find(results, rw.name, im.name)
				if res == nil {
					continue
				}
				keyPrefix := fmt.Sprintf("%d:", round)
				m, err := measure(ctx, im.pair, rw.workers, keyPrefix, *dur, rw.servers)
				if err != nil {
					return fmt.Errorf("%s / %s: %w", rw.name, im.name, err)
				}
				res.ops = append(res.ops, m.ops)
				res.cpu = append(res.cpu, m.cpu)
				res.srvCPU = append(res.srvCPU, m.srvCPU)
				res.allocs = append(res.allocs, m.allocs)
				fmt.Fprintf(os.Stderr, "round %d  %-32s %-14s %9.0f ops/s %6.1f µs CPU/pair %6.1f µs Redis CPU/pair %5.0f allocs/pair\n",
					round+1, rw.name, im.name, m.ops, m.cpu, m.srvCPU, m.allocs)
			}
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

// measurement is what measure found.
type measurement struct {
	ops    float64 // lock+unlock pairs per second
	cpu    float64 // CPU time of this process per pair, in µs
	srvCPU float64 // CPU time of the Redis servers per pair, in µs
	allocs float64 // heap allocations per pair
}

// measure runs pair from workers goroutines on distinct keys for d after a
// warm-up of d/4, and reads the CPU time of servers around the measured
// part.
func measure(ctx context.Context, pair pairFunc, workers int, keyPrefix string, d time.Duration, servers []*redis.Client) (measurement, error) {
	var (
		next     atomic.Int64
		counting atomic.Bool
		done     atomic.Bool
		count    atomic.Int64
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			n := int64(0)
			for !done.Load() {
				key := keyPrefix + strconv.FormatInt(next.Add(1)%keySpace, 10)
				if err := pair(ctx, key); err != nil {
					errOnce.Do(func() { firstErr = err })
					done.Store(true)
					return
				}
				if counting.Load() {
					n++
				}
			}
			count.Add(n)
		})
	}
	time.Sleep(d / 4)
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	srv0 := serverCPU(ctx, servers)
	cpu0 := cpuTime()
	counting.Store(true)
	start := time.Now()
	time.Sleep(d)
	done.Store(true)
	elapsed := time.Since(start)
	cpu1 := cpuTime()
	srv1 := serverCPU(ctx, servers)
	runtime.ReadMemStats(&ms1)
	wg.Wait()
	if firstErr != nil {
		return measurement{}, firstErr
	}
	n := float64(count.Load())
	return measurement{
		ops:    n / elapsed.Seconds(),
		cpu:    float64((cpu1 - cpu0).Microseconds()) / n,
		allocs: float64(ms1.Mallocs-ms0.Mallocs) / n,
		srvCPU: float64((srv1 - srv0).Microseconds()) / n,
	}, nil
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

func erpsyncPair(rdb *redis.Client, prefix string) pairFunc {
	c := lock.New(rdb, &lock.Options{Prefix: prefix + "erpsync:"})
	return func(ctx context.Context, key string) error {
		l, err := c.Obtain(ctx, key, ttl, nil)
		if err != nil {
			return err
		}
		return l.Release(ctx)
	}
}

func erpsyncRedlockPair(nodes []*redis.Client, prefix string) pairFunc {
	u := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		u[i] = n
	}
	// redsync bounds an attempt by 5% of the TTL; erpsync bounds each node
	// call by NodeTimeout, by default min(50 ms, ttl/10), which 64
	// goroutines over 5 servers on 2 cores overrun. Same bound for both.
	rl := lock.NewRedlock(u, &lock.Options{Prefix: prefix + "erpsync:", NodeTimeout: ttl / 20})
	return func(ctx context.Context, key string) error {
		l, err := rl.Obtain(ctx, key, ttl, nil)
		if err != nil {
			return err
		}
		return l.Release(ctx)
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
	fmt.Fprintf(w, "lock+unlock pairs per second, median of %d rounds of %v; GOMAXPROCS=%d, %s\n\n",
		rounds, d, runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Fprintln(w, "| row | implementation | ops/s | ratio vs the faster peer | client CPU µs/pair | Redis CPU µs/pair | allocs/pair |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range results {
		best := 0.0
		for _, p := range results {
			if p.row == r.row && p.impl != "erpsync" {
				best = max(best, p.median())
			}
		}
		ratio := "n/a"
		if best > 0 {
			ratio = fmt.Sprintf("%.2f", r.median()/best)
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %s | %.1f | %.1f | %.0f |\n", r.row, r.impl, r.median(), ratio, median(r.cpu), median(r.srvCPU), median(r.allocs))
	}
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

// server is a redis-server process of the Redlock rows.
type server struct {
	addr string
	cmd  *exec.Cmd
	dir  string
}

// startServers starts n redis-servers without persistence on free loopback
// ports and waits until they answer.
func startServers(n int) ([]*server, error) {
	var out []*server
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return out, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		dir, err := os.MkdirTemp("", "lockbench")
		if err != nil {
			return out, err
		}
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir)
		if err := cmd.Start(); err != nil {
			_ = os.RemoveAll(dir)
			return out, fmt.Errorf("start redis-server (needed for the Redlock rows): %w", err)
		}
		s := &server{addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd, dir: dir}
		out = append(out, s)
		if err := s.wait(); err != nil {
			return out, err
		}
	}
	return out, nil
}

func (s *server) wait() error {
	rdb := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer func() { _ = rdb.Close() }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer: %w", s.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	_ = os.RemoveAll(s.dir)
}
