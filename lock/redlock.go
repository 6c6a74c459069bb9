package lock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redlock obtains locks on a quorum of independent Redis masters, as the
// Redlock algorithm does, with fencing tokens that increase across quorums.
// Its locks are the same Lock type as a Client's. It is safe for concurrent
// use. See the package doc for what it guarantees and what it does not.
type Redlock struct {
	nodes  []*Client
	quorum int
	opt    Options
	hook   Hooks
	calls  inflight // the fanouts whose calls or follow-ups still run
}

// Wait waits until every call this Redlock made to its nodes has
// returned, follow-ups included, or ctx ends first (its error then). Each
// call is bounded by its NodeTimeout. Obtain, ObtainMany, ReleaseMany and
// the watchdog's renewals return at their quorum while the calls to
// slower nodes run on; a process that calls Wait before it exits sends
// those too, so that no release it made is left undelivered on a slow
// node until the lease ends. Release itself waits for every node.
func (r *Redlock) Wait(ctx context.Context) error { return r.calls.wait(ctx) }

// inflight counts work in progress, and tells a waiter when there is none.
type inflight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil while nobody waits
}

func (w *inflight) add() {
	w.mu.Lock()
	w.n++
	w.mu.Unlock()
}

func (w *inflight) done() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n--; w.n == 0 && w.idle != nil {
		close(w.idle)
		w.idle = nil
	}
}

func (w *inflight) wait(ctx context.Context) error {
	w.mu.Lock()
	if w.n == 0 {
		w.mu.Unlock()
		return nil
	}
	if w.idle == nil {
		w.idle = make(chan struct{})
	}
	idle := w.idle
	w.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// clockStep is what a Redlock's grants round the server clock up to, in
// microseconds, before they take it as a floor for the fencing token: a
// millisecond, so that nodes whose clocks agree within it hand out equal
// tokens, and Obtain need not write the largest back. Each attempt also
// proposes a floor of its own (proposedFloor), which the nodes take when it
// is at most two steps above their rounded clock: the calls of one attempt
// reach the nodes at slightly different times, and without it a step
// boundary between them (measured: one grant in five on a loaded machine)
// costs the write-back round trip. A token then runs up to two steps ahead
// of a node's clock, never behind it.
const clockStep = 1000

// errContended is the outcome of a Redlock attempt that enough nodes
// refused, because another holder has the key there, that no quorum could
// have granted it.
var errContended = errors.New("lock: redlock: held by another")

// NewRedlock returns a Redlock over nodes: independent Redis masters, none
// a replica of another, with or without persistence (see the package doc
// on restarts). A node may be any UniversalClient, a Redis Cluster
// included. Set up node clients to fail fast, for the quorum is the retry:
// ContextTimeoutEnabled, or a hung node holds every call up to its
// ReadTimeout instead of Options.NodeTimeout; and MaxRetries -1 and
// DialerRetries 1, or a node that is down costs each call the whole
// NodeTimeout in go-redis's own retries. opt may be nil; it is copied, and
// its zero fields get their defaults as in New. Every node uses the same
// Prefix. Every call to a node is bounded by NodeTimeout (and ctx), and
// Options.Timeout bounds the watchdog's renewals as for a Client.
//
// A lock needs a quorum of len(nodes)/2+1 nodes. With no nodes, Obtain
// returns ErrInvalid. Hooks are called by the Redlock, once per lock, not
// per node.
func NewRedlock(nodes []redis.UniversalClient, opt *Options) *Redlock {
	o, hook := opt.withDefaults()
	r := &Redlock{opt: o, hook: hook, quorum: len(nodes)/2 + 1}
	if o.Hooks != nil {
		r.opt.Hooks = &r.hook
	}
	node := o
	node.Hooks = nil // the Redlock reports, not its nodes
	r.nodes = make([]*Client, len(nodes))
	for i, rdb := range nodes {
		r.nodes[i] = New(rdb, &node)
	}
	return r
}

// Quorum returns how many nodes must agree on a grant, a renewal or a
// release: more than half of them.
func (r *Redlock) Quorum() int { return r.quorum }

// Obtain tries to grant key to the caller for ttl on a quorum of nodes.
//
// Each attempt runs the grant script on every node at once, each call
// bounded by Options.NodeTimeout. The attempt succeeds as soon as a quorum
// granted the key, when, counting from the moment the attempt began, the
// lease still has time left after the drift margin (1% of ttl and 2 ms);
// the calls to slower nodes run on. The lock's fencing token is then the
// largest of the tokens the quorum handed out, and Obtain writes it back
// to the fence counters of the quorum's nodes that handed out less, before
// it returns: a quorum of nodes must then hold a counter at or above it
// (slower nodes get it when they answer). A failed attempt releases the
// key on every node that granted it or did not answer, once all answered.
//
// When the nodes that refused the key because another holds it leave no
// quorum possible, Obtain retries as opt.Retry says and then returns
// ErrNotObtained; when ctx ends first, the error matches both
// ErrNotObtained and ctx.Err(). When too few nodes answered to decide, or
// the fencing token could not be written to a quorum, or the quorum
// answered too late for the lease, it fails closed at once with an error
// matching ErrUnavailable that says how many nodes answered.
func (r *Redlock) Obtain(ctx context.Context, key string, ttl time.Duration, opt *ObtainOptions) (*Lock, error) {
	if len(r.nodes) == 0 {
		return nil, fmt.Errorf("%w: redlock without nodes", ErrInvalid)
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	// A Redlock's nodes keep a counter per bucket of keys (the slot of
	// the lock key's tag, see lockKey), whatever kind of client they are:
	// one counter for all keys would count the grants of concurrent
	// attempts in a different order on each node, so that their tokens
	// would rarely agree (see clockStep). It needs no TTL, unlike a key's
	// own.
	rkey := r.lockKey(key)
	g, err := newGrant(rkey, slotCounter(r.opt.Prefix, rkey), "", ttl, 0)
	if err != nil {
		return nil, err
	}
	var grants *fanout
	return obtain(ctx, &r.hook, key, opt, func() (fence int64, sent time.Time, err error) {
		fence, sent, grants, err = r.attempt(ctx, g, ttl)
		return fence, sent, err
	}, func(fence int64, sent time.Time) *Lock {
		l := g.lock(r, key, fence, ttl, sent)
		l.calls = grants
		return l
	})
}

// attempt makes one attempt to run g on a quorum, and returns the fencing
// token, the time the lease counts from, and the grant's calls, those to
// the nodes slower than the quorum perhaps still in flight. It fails with
// errContended, or with an error that says why no lock was granted.
func (r *Redlock) attempt(ctx context.Context, g *grant, ttl time.Duration) (int64, time.Time, *fanout, error) {
	start := time.Now()
	nt := r.nodeTimeout(ttl)
	ga := g.withFloor(clockStep, proposedFloor(start))
	calls := r.fan(ctx, start.Add(nt), nil, nil, func(ctx context.Context, c *Client) (int64, error) {
		return c.obtainOne(ctx, ga)
	})
	// Decide as soon as a quorum granted; else on every answer.
	replies := calls.until(r.quorumDid)
	var granted, held int
	var fence int64
	var failure error
	for _, rep := range replies {
		switch {
		case rep.err != nil:
			failure = cmp.Or(failure, rep.err)
		case rep.n > 0:
			granted++
			fence = max(fence, rep.n)
		default:
			held++
		}
	}

	var err error
	switch {
	case granted >= r.quorum:
		counters, fences := g.keys[1:2], []int64{fence}
		err = r.raise(ctx, counters, fences, g.counterTTL, replies, func(i, _ int) int64 { return replies[i].n }, nt)
		if err == nil {
			took := time.Since(start)
			if took < validity(ttl) {
				if calls.read == calls.asked {
					return fence, start, calls, nil // raise saw every node
				}
				calls.followUp(func(all []reply) {
					// The slower nodes that granted a smaller token get
					// the fence too, as the quorum did, so that it
					// survives the loss of more nodes than a minority.
					_ = r.raise(context.WithoutCancel(ctx), counters, fences, g.counterTTL, all, func(i, _ int) int64 { return all[i].n }, nt)
				})
				return fence, start, calls, nil
			}
			err = fmt.Errorf("%w: redlock: the quorum took %v, past the validity of a %v lease", ErrUnavailable, took, ttl)
		}
	case held > len(r.nodes)-r.quorum:
		err = errContended
	default:
		err = fmt.Errorf("%w: redlock: %d of %d nodes answered (%d granted, %d held by another), %d needed: %w",
			ErrUnavailable, granted+held, len(r.nodes), granted, held, r.quorum, failure)
	}

	// Undo: release wherever the key may be ours, once every node answered.
	// It outlives ctx, for a grant that ctx's end interrupted is a grant
	// all the same.
	replies = calls.until(nil)
	r.each(context.WithoutCancel(ctx), time.Now().Add(nt), func(i int) bool {
		return replies[i].err != nil || replies[i].n > 0
	}, func(ctx context.Context, c *Client) (int64, error) {
		return c.releaseOne(ctx, g.keys[:1], g.args[:1])
	})
	return 0, start, nil, err
}

// raise writes each granted key's fencing token back to the key's fence
// counter on the nodes that answered and handed out less, in one call per
// node, and checks that a quorum of nodes then holds a counter at or above
// each token. Key k's counter is counters[k] and its token fences[k] (0:
// not granted, left alone); got(i, k) is the token node i handed out for
// it, read only where replies[i] answered. A counter that several keys
// share goes once in a node's call, with the largest of their tokens.
func (r *Redlock) raise(ctx context.Context, counters []string, fences []int64, fenceTTLms int64, replies []reply, got func(i, k int) int64, nt time.Duration) error {
	have := make([]int, len(fences))
	type raising struct {
		counters []string
		tokens   []any
		at       map[string]int // index of a counter in counters
		keys     []int          // the keys raised
		of       []int          // the index in counters of each key's counter
	}
	ups := make([]raising, len(r.nodes))
	for i, rep := range replies {
		if !rep.asked || rep.err != nil {
			continue
		}
		for k, f := range fences {
			switch n := got(i, k); {
			case f == 0 || n <= 0:
			case n >= f:
				have[k]++
			default:
				u := &ups[i]
				if u.at == nil {
					u.at = make(map[string]int)
				}
				j, ok := u.at[counters[k]]
				if !ok {
					j = len(u.counters)
					u.at[counters[k]] = j
					u.counters = append(u.counters, counters[k])
					u.tokens = append(u.tokens, f)
				} else if f > u.tokens[j].(int64) {
					u.tokens[j] = f
				}
				u.keys = append(u.keys, k)
				u.of = append(u.of, j)
			}
		}
	}
	raised := make([][]int64, len(r.nodes))
	rs := r.each(ctx, time.Now().Add(nt), func(i int) bool { return len(ups[i].keys) > 0 }, func(ctx context.Context, c *Client) (int64, error) {
		i := r.indexOf(c)
		ns, err := c.raiseFences(ctx, ups[i].counters, ups[i].tokens, fenceTTLms)
		raised[i] = ns
		return 0, err
	})
	var failure error
	for i, rep := range rs {
		switch {
		case !rep.asked:
		case rep.err != nil:
			failure = cmp.Or(failure, rep.err)
		default:
			for j, k := range ups[i].keys {
				if raised[i][ups[i].of[j]] >= fences[k] {
					have[k]++
				}
			}
		}
	}
	for k, f := range fences {
		if f > 0 && have[k] < r.quorum {
			err := fmt.Errorf("%w: redlock: fencing token written to %d of %d nodes, %d needed", ErrUnavailable, have[k], len(r.nodes), r.quorum)
			if failure != nil {
				err = fmt.Errorf("%w: %w", err, failure)
			}
			return err
		}
	}
	return nil
}

// indexOf returns the index of the node c.
func (r *Redlock) indexOf(c *Client) int {
	for i, n := range r.nodes {
		if n == c {
			return i
		}
	}
	panic("lock: not a node of this Redlock")
}

// proposedFloor returns the fencing floor an attempt begun at start
// proposes to the nodes: its clock rounded up to a clockStep, plus one, so
// that nodes whose calls come up to a step later still take it. A node
// whose rounded clock is more than two steps below it, or above it, uses
// its own clock (see obtain.lua).
func proposedFloor(start time.Time) int64 {
	us := start.UnixMicro()
	return (us+clockStep-1)/clockStep*clockStep + clockStep
}

// nodeTimeout returns the bound of one call to one node for a lease of ttl:
// Options.NodeTimeout when set, else ttl/10, at most a second and at least
// a millisecond. A call decides at its quorum, so a node that hangs costs
// it nothing while the others agree: the bound is what a call that needs
// the slow node waits for. The 5-50 ms that the Redlock article advises
// are for a client that asks the nodes one after the other; asked at
// once, a short bound only turns a loaded machine, where a batch of
// hundreds of keys takes longer than 50 ms, into ErrUnavailable.
func (r *Redlock) nodeTimeout(ttl time.Duration) time.Duration {
	if r.opt.NodeTimeout > 0 {
		return r.opt.NodeTimeout
	}
	return max(min(ttl/10, time.Second), time.Millisecond)
}

// reply is one node's answer to a script call: its integer reply or an
// error. asked is false for a node that was not called.
type reply struct {
	n     int64
	err   error
	asked bool
}

// each calls every node i for which want(i) (every node when want is nil)
// at once, under deadline and ctx, and returns one reply per node once all
// answered.
func (r *Redlock) each(ctx context.Context, deadline time.Time, want func(i int) bool, call func(context.Context, *Client) (int64, error)) []reply {
	return r.fan(ctx, deadline, want, nil, call).until(nil)
}

// fanout is one call to each of several nodes, made at once, whose
// replies can be read as they arrive: a Redlock decides as soon as a
// quorum answered alike, and the calls to slower nodes run on.
type fanout struct {
	mu      sync.Mutex
	replies []reply
	done    []chan struct{} // done[i] is closed once node i's call returned; nil if not called
	arrived chan int        // the nodes, as their calls return
	asked   int             // calls made
	read    int             // arrivals taken by until
	settled chan struct{}   // closed once every call returned and followUp's work is done
	work    *inflight       // the Redlock's count of fanouts at work
}

// fan calls every node i for which want(i) (every node when want is nil),
// each from a goroutine of its own, under deadline and ctx. With after,
// the call to a node waits until after's call to that node returned (or
// the deadline passed): a release or renewal never overtakes, on a slow
// node, the grant or renewal it follows.
func (r *Redlock) fan(ctx context.Context, deadline time.Time, want func(i int) bool, after *fanout, call func(context.Context, *Client) (int64, error)) *fanout {
	f := &fanout{replies: make([]reply, len(r.nodes)), done: make([]chan struct{}, len(r.nodes)), work: &r.calls}
	for i := range r.nodes {
		if want == nil || want(i) {
			f.done[i] = make(chan struct{})
			f.asked++
		}
	}
	if f.asked == 0 {
		return f
	}
	f.arrived = make(chan int, f.asked)
	f.work.add()
	cctx, cancel := context.WithDeadline(ctx, deadline)
	var wg sync.WaitGroup
	for i := range r.nodes {
		if f.done[i] == nil {
			continue
		}
		wg.Go(func() {
			growStack()
			if after != nil {
				after.wait(cctx, i)
			}
			n, err := call(cctx, r.nodes[i])
			f.mu.Lock()
			f.replies[i] = reply{n: n, err: err, asked: true}
			f.mu.Unlock()
			close(f.done[i])
			f.arrived <- i
		})
	}
	go func() {
		wg.Wait()
		cancel()
		f.work.done()
	}()
	return f
}

// until waits for replies until enough says the ones in suffice (never,
// when enough is nil) or every call returned, and returns a copy of them;
// a node that has not answered yet has a zero reply. Calls to until take
// turns: each goes on from the arrivals the one before took.
func (f *fanout) until(enough func([]reply) bool) []reply {
	return f.within(context.Background(), enough)
}

// within is until(enough) that also stops waiting when ctx ends: then the
// nodes called that have not answered yet have ctx's error in the copy.
// The calls themselves run on, under their own context.
func (f *fanout) within(ctx context.Context, enough func([]reply) bool) []reply {
	for f.read < f.asked {
		if enough != nil && f.suffice(enough) {
			break
		}
		select {
		case <-f.arrived:
			f.read++
		case <-ctx.Done():
			rs := f.snapshot()
			for i, rep := range rs {
				if f.done[i] != nil && !rep.asked {
					rs[i] = reply{err: ctx.Err(), asked: true}
				}
			}
			return rs
		}
	}
	return f.snapshot()
}

func (f *fanout) suffice(enough func([]reply) bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return enough(f.replies)
}

func (f *fanout) snapshot() []reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.replies)
}

// followUp runs then, from a goroutine of its own, with every reply once
// all calls returned. The caller must not call until after it.
func (f *fanout) followUp(then func(all []reply)) {
	f.settled = make(chan struct{})
	f.work.add()
	go func() {
		defer f.work.done()
		defer close(f.settled)
		then(f.until(nil))
	}()
}

// settle waits until every call returned and followUp's work is done.
func (f *fanout) settle() {
	if f.settled != nil {
		<-f.settled
		return
	}
	for _, d := range f.done {
		if d != nil {
			<-d
		}
	}
}

// wait waits until the call to node i returned, or ctx ended.
func (f *fanout) wait(ctx context.Context, i int) {
	if f.done[i] == nil {
		return
	}
	select {
	case <-f.done[i]:
	case <-ctx.Done():
	}
}

// count returns how many of rs are is.
func count(rs []reply, is func(reply) bool) int {
	n := 0
	for _, r := range rs {
		if is(r) {
			n++
		}
	}
	return n
}

// acted reports whether a node granted, released or extended the lock.
func acted(r reply) bool { return r.err == nil && r.n > 0 }

func (r *Redlock) hooks() *Hooks          { return &r.hook }
func (r *Redlock) timeout() time.Duration { return r.opt.Timeout }

// leaseTTL returns l's last lease length.
func leaseTTL(l *Lock) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

func (r *Redlock) refresh(ctx context.Context, limit time.Time, l *Lock, ttl time.Duration) (time.Time, error) {
	sent := time.Now()
	deadline := sent.Add(r.nodeTimeout(ttl))
	if !limit.IsZero() {
		deadline = minTime(deadline, limit)
	}
	replies := r.next(ctx, deadline, l, func(ctx context.Context, c *Client) (int64, error) {
		return refreshScript.Run(ctx, c.rdb, l.keys[:], l.token, ttl.Milliseconds()).Int64()
	}).until(r.quorumDid)
	if err := r.tally(ctx, "refresh", "extended", replies); err != nil {
		return sent, err
	}
	if took := time.Since(sent); took >= validity(ttl) {
		return sent, fmt.Errorf("%w: redlock: refresh: the quorum took %v, past the validity of a %v lease", ErrUnavailable, took, ttl)
	}
	return sent, nil
}

// release deletes l on every node, and returns once every node answered or
// its NodeTimeout passed, not at the quorum as a renewal does: a holder
// that exits right after would leave the lock on the slower nodes until
// its lease ends, and a contender then needs a quorum among the others.
// The calls run to their NodeTimeout whatever ctx does (a caller that
// cancels ctx once Release returned, or that gave up on it, must not take
// back a release on its way to a slow node); ctx ends the wait.
func (r *Redlock) release(ctx context.Context, l *Lock) error {
	replies := r.next(context.WithoutCancel(ctx), time.Now().Add(r.nodeTimeout(leaseTTL(l))), l, func(ctx context.Context, c *Client) (int64, error) {
		return c.releaseOne(ctx, l.keys[:], l.args[:])
	}).within(ctx, nil)
	return r.tally(ctx, "release", "released", replies)
}

// next calls every node for l, each call after l's last call to that node
// returned, and makes these l's last calls.
func (r *Redlock) next(ctx context.Context, deadline time.Time, l *Lock, call func(context.Context, *Client) (int64, error)) *fanout {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = r.fan(ctx, deadline, nil, l.calls, call)
	return l.calls
}

// quorumDid reports whether a quorum of the replies acted (granted,
// extended or released): for a release or renewal the rest cannot change
// what tally says, and a grant is decided. The calls to the other nodes
// run on.
func (r *Redlock) quorumDid(rs []reply) bool { return count(rs, acted) >= r.quorum }

// tally judges the replies of release.lua or refresh.lua from every node:
// nil when a quorum acted; an error matching ErrUnavailable when the nodes
// that did not answer could have made a quorum; else ErrTaken when a node
// has the key with another token, or ErrExpired.
func (r *Redlock) tally(ctx context.Context, op, done string, replies []reply) error {
	var ok, taken, failed int
	var failure error
	for _, rep := range replies {
		switch {
		case rep.err != nil:
			failed++
			failure = cmp.Or(failure, rep.err)
		case rep.n > 0:
			ok++
		case rep.n == 0:
			taken++
		}
	}
	switch {
	case ok >= r.quorum:
		return nil
	case ok+failed >= r.quorum:
		if ctx.Err() != nil {
			return fmt.Errorf("lock: redlock %s: %w", op, failure)
		}
		return fmt.Errorf("%w: redlock: %s: %s on %d of %d nodes, %d did not answer, %d needed: %w",
			ErrUnavailable, op, done, ok, len(r.nodes), failed, r.quorum, failure)
	case taken > 0:
		return fmt.Errorf("%w (redlock: %s on %d of %d nodes, taken on %d)", ErrTaken, done, ok, len(r.nodes), taken)
	default:
		return fmt.Errorf("%w (redlock: %s on %d of %d nodes)", ErrExpired, done, ok, len(r.nodes))
	}
}

// fence is never needed: a Redlock grant carries its token (Obtain
// ignores FenceOnDemand).
func (r *Redlock) fence(context.Context, *Lock) (int64, error) {
	return 0, errors.New("lock: a Redlock lock without a fencing token")
}

func (r *Redlock) pttl(ctx context.Context, l *Lock) (time.Duration, error) {
	replies := r.each(ctx, time.Now().Add(r.nodeTimeout(leaseTTL(l))), nil, func(ctx context.Context, c *Client) (int64, error) {
		return pttlScript.Run(ctx, c.rdb, l.keys[:], l.args[:]...).Int64()
	})
	var ttls []int64
	var failed int
	var failure error
	for _, rep := range replies {
		switch {
		case rep.err != nil:
			failed++
			failure = cmp.Or(failure, rep.err)
		case rep.n >= 0:
			ttls = append(ttls, rep.n)
		}
	}
	switch {
	case len(ttls) >= r.quorum:
		slices.Sort(ttls)
		return time.Duration(ttls[len(ttls)-r.quorum]) * time.Millisecond, nil
	case len(ttls)+failed >= r.quorum:
		if ctx.Err() != nil {
			return 0, fmt.Errorf("lock: redlock ttl: %w", failure)
		}
		return 0, fmt.Errorf("%w: redlock: ttl: held on %d of %d nodes, %d did not answer, %d needed: %w",
			ErrUnavailable, len(ttls), len(r.nodes), failed, r.quorum, failure)
	default:
		return 0, nil
	}
}
