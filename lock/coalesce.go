package lock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxBatch bounds the entries of one coalesced batch: a script holds the
// server while it runs (see ObtainMany).
const maxBatch = 256

// soloBatch is the size from which a batch of a Redlock's node goes out
// at once, never queued (see obtainBatch).
const soloBatch = maxBatch / 2

// batcher coalesces the concurrent calls of one kind (grants or releases)
// to one Client, as a database's group commit does. A call made while none
// is in flight goes out at once, alone, from the caller's goroutine, so a
// single caller waits for nothing. Calls made while one is in flight queue,
// and go out together, one script call per group of keys (see
// Client.groupKeys), when the call in flight returns, sent by a goroutine
// that keeps sending what queued meanwhile until the queue is empty. Each
// queued caller waits for its own entry's result or for its ctx,
// whichever comes first.
type batcher struct {
	// send runs a batch and delivers each entry's result.
	send func(batch []*pending)
	// beforeSend, when set (by tests), runs before each batch is sent.
	beforeSend func(batch []*pending)
	// sent counts the batches sent and their entries, for tests.
	batches, entries atomic.Int64

	mu    sync.Mutex
	busy  bool // a call is in flight
	queue []*pending
}

// States of a pending entry.
const (
	waiting int32 = iota
	delivered
	abandoned // the caller's ctx ended first
)

// pending is one queued call and, once delivered, its result.
type pending struct {
	g     *grant // a grant: the key, its token and its lease; nil for a release
	rkey  string // the lock key
	token any    // the token
	// deadline bounds the caller's wait: its ctx's deadline, or the
	// Client's Timeout from the moment it queued.
	deadline time.Time

	n     int64 // the script's result for this entry
	err   error
	state atomic.Int32
	done  chan struct{}
}

// do runs script s with keys and args: alone, from this goroutine, when
// no call of b is in flight; else queued, in the next batch. g is the
// grant the call makes, nil for a release.
func (b *batcher) do(ctx context.Context, c *Client, s script, keys []string, args []any, g *grant) (int64, error) {
	b.mu.Lock()
	if b.busy {
		p := c.newPending(ctx, g, keys[0], args[0])
		b.queue = append(b.queue, p)
		b.mu.Unlock()
		return p.wait(ctx)
	}
	b.busy = true
	b.mu.Unlock()
	n, err := c.run(ctx, s, keys, args).Int64()
	b.leave()
	return n, err
}

// doMany runs the calls ps together: at once, as one batch sent from this
// goroutine, when no call of b is in flight; else queued, in the next
// batches, with what other callers queued. It returns each call's result,
// and the first error among them (ctx's for a call still queued when ctx
// ended).
func (b *batcher) doMany(ctx context.Context, ps []*pending) ([]int64, error) {
	b.mu.Lock()
	switch {
	case b.busy:
		b.queue = append(b.queue, ps...)
		b.mu.Unlock()
	default:
		b.busy = true
		b.mu.Unlock()
		b.send(ps)
		b.leave()
	}
	ns := make([]int64, len(ps))
	var first error
	for i, p := range ps {
		n, err := p.wait(ctx)
		ns[i] = n
		if err != nil && first == nil {
			first = err
		}
	}
	return ns, first
}

// newPending returns a call of the lock key rkey with token, queued under
// ctx; g is its grant, nil for a release.
func (c *Client) newPending(ctx context.Context, g *grant, rkey string, token any) *pending {
	return &pending{g: g, rkey: rkey, token: token, deadline: c.deadline(ctx), done: make(chan struct{})}
}

// leave ends the call in flight, and sends what queued meanwhile, from a
// goroutine of its own.
func (b *batcher) leave() {
	b.mu.Lock()
	batch := b.take()
	b.mu.Unlock()
	if batch != nil {
		go b.drain(batch)
	}
}

// take returns the next batch, or nil and marks the batcher idle when the
// queue is empty. b.mu must be held.
func (b *batcher) take() []*pending {
	if len(b.queue) == 0 {
		b.busy = false
		return nil
	}
	n := min(len(b.queue), maxBatch)
	batch := b.queue[:n:n]
	if n == len(b.queue) {
		b.queue = nil
	} else {
		b.queue = b.queue[n:]
	}
	return batch
}

// drain sends batch, then every batch that queued meanwhile.
func (b *batcher) drain(batch []*pending) {
	growStack()
	for batch != nil {
		live := batch[:0]
		for _, p := range batch {
			if p.state.Load() == waiting {
				live = append(live, p)
			}
		}
		if len(live) > 0 {
			if b.beforeSend != nil {
				b.beforeSend(live)
			}
			b.batches.Add(1)
			b.entries.Add(int64(len(live)))
			b.send(live)
		}
		b.mu.Lock()
		batch = b.take()
		b.mu.Unlock()
	}
}

// wait waits for p's result, or for ctx to end first.
func (p *pending) wait(ctx context.Context) (int64, error) {
	select {
	case <-p.done:
		return p.n, p.err
	case <-ctx.Done():
		if p.state.CompareAndSwap(waiting, abandoned) {
			return 0, ctx.Err()
		}
		<-p.done
		return p.n, p.err
	}
}

// deliver hands p its result, and reports false when its caller left
// already: a grant is then nobody's, and the sender releases it.
func (p *pending) deliver(n int64, err error) bool {
	p.n, p.err = n, err
	if !p.state.CompareAndSwap(waiting, delivered) {
		return false
	}
	close(p.done)
	return true
}

// batchContext returns a context bounded by the latest deadline of batch:
// the call serves every caller in it, each of which stops waiting at its
// own deadline.
func batchContext(batch []*pending) (context.Context, context.CancelFunc) {
	var d time.Time
	for _, p := range batch {
		if p.deadline.After(d) {
			d = p.deadline
		}
	}
	return context.WithDeadline(context.Background(), d)
}

// deadline returns the deadline of a queued call: ctx's, or the Client's
// Timeout from now.
func (c *Client) deadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(c.opt.Timeout)
}

// obtainOne runs the grant g: alone, with obtain.lua, when no grant of c is
// in flight; else in the next batch, with obtain_many.lua. It returns the
// fencing token, 0 when the key is held, or the error as Redis or go-redis
// gave it.
func (c *Client) obtainOne(ctx context.Context, g *grant) (int64, error) {
	return c.grants.do(ctx, c, obtainScript, g.keyList(), g.argv(), g)
}

// obtainBatch runs the grants gs together, coalesced with the other
// grants of c (see batcher.doMany). It returns each grant's fencing token,
// 0 where the key is held, or the first error.
//
// A batch of soloBatch grants or more is a full batch already, and goes
// out at once, beside any call in flight, without the bookkeeping of
// queued calls: queued, it would wait for every batch before it, and the
// concurrent chunks of a sync would take turns per node; and a queued
// call's state and channel, per key and node, cost a Redlock backfill an
// eighth of its CPU (measured with pprof).
//
// plan, when not nil, holds the script calls of gs already made for
// another node that groups keys alike: a Redlock sends one batch to every
// node.
func (c *Client) obtainBatch(ctx context.Context, gs []*grant, plan *grantPlan) ([]int64, error) {
	if len(gs) >= soloBatch {
		calls, groups := plan.calls(c, gs)
		return c.runBatch(ctx, obtainManyScript, calls, groups, func(n int64, i int) error { return fenceError(n, gs[i]) })
	}
	ps := make([]*pending, len(gs))
	for i, g := range gs {
		ps[i] = c.newPending(ctx, g, g.keys[0], g.args[0])
	}
	return c.grants.doMany(ctx, ps)
}

// grantPlan makes the script calls of one batch of grants once for every
// node that is a single server, as most of a Redlock's are.
type grantPlan struct {
	once   sync.Once
	made   []scriptCall
	groups [][]int
}

// calls returns c.grantCalls(gs): from the plan when c is a single server
// (and the plan not nil), made once for all such nodes.
func (p *grantPlan) calls(c *Client, gs []*grant) ([]scriptCall, [][]int) {
	if p == nil || c.group != oneGroup {
		return c.grantCalls(gs)
	}
	p.once.Do(func() { p.made, p.groups = c.grantCalls(gs) })
	return p.made, p.groups
}

// runBatch runs calls of s, the script calls of a batch whose entries
// groups[j] call j holds, and returns each entry's result, or the first
// error (of Redis, or of check, when set, for a result n of entry i).
func (c *Client) runBatch(ctx context.Context, s script, calls []scriptCall, groups [][]int, check func(n int64, i int) error) ([]int64, error) {
	cmds, err := c.runMany(ctx, s, calls)
	n := 0
	for _, idx := range groups {
		n += len(idx)
	}
	out := make([]int64, n)
	for j, idx := range groups {
		ns, rerr := results(cmds[j], err, len(idx))
		if rerr != nil {
			return nil, rerr
		}
		for k, i := range idx {
			if check != nil {
				if err := check(ns[k], i); err != nil {
					return nil, err
				}
			}
			out[i] = ns[k]
		}
	}
	return out, nil
}

// sendGrants runs a batch of grants and delivers their results; the
// grants whose callers left are released.
func (c *Client) sendGrants(batch []*pending) {
	ctx, cancel := batchContext(batch)
	defer cancel()
	gs := make([]*grant, len(batch))
	for i, p := range batch {
		gs[i] = p.g
	}
	calls, groups := c.grantCalls(gs)
	cmds, err := c.runMany(ctx, obtainManyScript, calls)
	var orphans []string
	var orphanTokens []any
	for j, idx := range groups {
		fences, ferr := results(cmds[j], err, len(idx))
		for k, i := range idx {
			n, e := int64(0), ferr
			if ferr == nil {
				n, e = fences[k], fenceError(fences[k], gs[i])
			}
			if !batch[i].deliver(n, e) && n > 0 {
				orphans = append(orphans, gs[i].keys[0])
				orphanTokens = append(orphanTokens, gs[i].args[0])
			}
		}
	}
	if len(orphans) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), c.opt.Timeout)
		defer cancel()
		calls, _ := c.releaseCalls(orphans, orphanTokens)
		_, _ = c.runMany(ctx, releaseManyScript, calls)
	}
}

// results returns the integers that cmd, a call of a batch script for n
// keys, returned, or why there are none: err, the first failure of the
// pipeline, when cmd is nil.
func results(cmd *redis.Cmd, err error, n int) ([]int64, error) {
	if cmd == nil {
		return nil, err
	}
	ns, err := cmd.Int64Slice()
	if err == nil && len(ns) != n {
		err = fmt.Errorf("script returned %d results for %d keys", len(ns), n)
	}
	return ns, err
}

// fenceError returns the error of an obtain_many.lua result for g: -1
// says its fence counter is not an integer.
func fenceError(n int64, g *grant) error {
	if n < 0 {
		return fmt.Errorf("fence counter %s is not an integer", g.keys[1])
	}
	return nil
}

// releaseOne runs release.lua with keys (the lock key) and args (the
// token): alone when no release of c is in flight; else in the next batch,
// with release_many.lua. It returns release.lua's result (1 deleted, 0
// taken, -1 gone) or the error as Redis or go-redis gave it.
func (c *Client) releaseOne(ctx context.Context, keys []string, args []any) (int64, error) {
	return c.releases.do(ctx, c, releaseScript, keys, args, nil)
}

// releaseBatch deletes each lock key rkeys[i] that carries tokens[i],
// coalesced with the other releases of c (see batcher.doMany). It returns
// release.lua's result for each, or the first error.
func (c *Client) releaseBatch(ctx context.Context, rkeys []string, tokens []any) ([]int64, error) {
	if len(rkeys) >= soloBatch {
		calls, groups := c.releaseCalls(rkeys, tokens)
		return c.runBatch(ctx, releaseManyScript, calls, groups, nil)
	}
	ps := make([]*pending, len(rkeys))
	for i, rk := range rkeys {
		ps[i] = c.newPending(ctx, nil, rk, tokens[i])
	}
	return c.releases.doMany(ctx, ps)
}

// sendReleases runs a batch of releases and delivers their results.
func (c *Client) sendReleases(batch []*pending) {
	ctx, cancel := batchContext(batch)
	defer cancel()
	rkeys := make([]string, len(batch))
	tokens := make([]any, len(batch))
	for i, p := range batch {
		rkeys[i], tokens[i] = p.rkey, p.token
	}
	calls, groups := c.releaseCalls(rkeys, tokens)
	cmds, err := c.runMany(ctx, releaseManyScript, calls)
	for j, idx := range groups {
		ns, rerr := results(cmds[j], err, len(idx))
		for k, i := range idx {
			var n int64
			if rerr == nil {
				n = ns[k]
			}
			batch[i].deliver(n, rerr)
		}
	}
}
