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
// bounded by Options.NodeTimeout. The attempt succeeds when a quorum
// granted the key and, counting from the moment the attempt began, the
// lease still has time left after the drift margin (1% of ttl and 2 ms).
// The lock's fencing token is then the largest of the tokens the granting
// nodes handed out, and Obtain writes it back to the fence counters of the
// granting nodes that handed out less, before it returns: a quorum of nodes
// must then hold a counter at or above it. A failed attempt releases the
// key on every node that granted it or did not answer.
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
	// A Redlock's nodes keep a counter per hash slot, whatever kind of
	// client they are: one counter for all keys would count the grants of
	// concurrent attempts in a different order on each node, so that
	// their tokens would rarely agree (see clockStep); a slot's counter
	// sees another grant in the same millisecond only when two keys of one
	// slot are granted together. It needs no TTL, unlike a key's own.
	rkey := r.opt.Prefix + "{" + key + "}"
	g, err := newGrant(rkey, slotCounter(r.opt.Prefix, rkey), ttl, 0)
	if err != nil {
		return nil, err
	}
	return obtain(ctx, &r.hook, key, opt, func() (int64, time.Time, error) {
		return r.attempt(ctx, g, ttl)
	}, func(fence int64, sent time.Time) *Lock { return g.lock(r, key, fence, ttl, sent) })
}

// attempt makes one attempt to run g on a quorum, and returns the fencing
// token and the time the lease counts from. It fails with errContended, or
// with an error that says why no lock was granted.
func (r *Redlock) attempt(ctx context.Context, g *grant, ttl time.Duration) (int64, time.Time, error) {
	start := time.Now()
	nt := r.nodeTimeout(ttl)
	ga := g.withFloor(clockStep, proposedFloor(start))
	replies := r.each(ctx, start.Add(nt), nil, func(ctx context.Context, c *Client) (int64, error) {
		return c.obtainOne(ctx, ga)
	})
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
		err = r.raise(ctx, g.keys[1], fence, g.counterTTL, replies, nt)
		if err == nil {
			took := time.Since(start)
			if took < validity(ttl) {
				return fence, start, nil
			}
			err = fmt.Errorf("%w: redlock: the quorum took %v, past the validity of a %v lease", ErrUnavailable, took, ttl)
		}
	case held > len(r.nodes)-r.quorum:
		err = errContended
	default:
		err = fmt.Errorf("%w: redlock: %d of %d nodes answered (%d granted, %d held by another), %d needed: %w",
			ErrUnavailable, granted+held, len(r.nodes), granted, held, r.quorum, failure)
	}

	// Undo: release wherever the key may be ours. It outlives ctx, for a
	// grant that ctx's end interrupted is a grant all the same.
	r.each(context.WithoutCancel(ctx), time.Now().Add(nt), func(i int) bool {
		return replies[i].err != nil || replies[i].n > 0
	}, func(ctx context.Context, c *Client) (int64, error) {
		return c.releaseOne(ctx, g.keys[:1], g.args[:1])
	})
	return 0, start, err
}

// raise writes fence back to the counter at fenceKey on the granting nodes
// that handed out a smaller token, and checks that a quorum of nodes then
// holds a counter at or above fence.
func (r *Redlock) raise(ctx context.Context, fenceKey string, fence, fenceTTLms int64, replies []reply, nt time.Duration) error {
	have := 0
	for _, rep := range replies {
		if rep.err == nil && rep.n == fence {
			have++
		}
	}
	keys := []string{fenceKey}
	ups := r.each(ctx, time.Now().Add(nt), func(i int) bool {
		return replies[i].err == nil && replies[i].n > 0 && replies[i].n < fence
	}, func(ctx context.Context, c *Client) (int64, error) {
		return raiseFenceScript.Run(ctx, c.rdb, keys, fence, fenceTTLms).Int64()
	})
	var failure error
	for _, up := range ups {
		switch {
		case !up.asked:
		case up.err != nil:
			failure = cmp.Or(failure, up.err)
		case up.n >= fence:
			have++
		}
	}
	if have >= r.quorum {
		return nil
	}
	return fmt.Errorf("%w: redlock: fencing token written to %d of %d nodes, %d needed: %w",
		ErrUnavailable, have, len(r.nodes), r.quorum, failure)
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

// nodeTimeout returns the bound of one call to one node for a lease of ttl.
func (r *Redlock) nodeTimeout(ttl time.Duration) time.Duration {
	if r.opt.NodeTimeout > 0 {
		return r.opt.NodeTimeout
	}
	return max(min(50*time.Millisecond, ttl/10), time.Millisecond)
}

// reply is one node's answer to a script call: its integer reply or an
// error. asked is false for a node that was not called.
type reply struct {
	n     int64
	err   error
	asked bool
}

// each calls every node i for which want(i) (every node when want is nil)
// at once, under deadline and ctx, and returns one reply per node.
func (r *Redlock) each(ctx context.Context, deadline time.Time, want func(i int) bool, call func(context.Context, *Client) (int64, error)) []reply {
	replies := make([]reply, len(r.nodes))
	first := -1
	var wg sync.WaitGroup
	var cctx context.Context
	for i := range r.nodes {
		if want != nil && !want(i) {
			continue
		}
		if cctx == nil {
			var cancel context.CancelFunc
			cctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
		if first < 0 {
			first = i // called from this goroutine, below
			continue
		}
		wg.Go(func() {
			n, err := call(cctx, r.nodes[i])
			replies[i] = reply{n: n, err: err, asked: true}
		})
	}
	if first >= 0 {
		n, err := call(cctx, r.nodes[first])
		replies[first] = reply{n: n, err: err, asked: true}
	}
	wg.Wait()
	return replies
}

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
	replies := r.each(ctx, deadline, nil, func(ctx context.Context, c *Client) (int64, error) {
		return refreshScript.Run(ctx, c.rdb, l.keys[:], l.token, ttl.Milliseconds()).Int64()
	})
	if err := r.tally(ctx, "refresh", "extended", replies); err != nil {
		return sent, err
	}
	if took := time.Since(sent); took >= validity(ttl) {
		return sent, fmt.Errorf("%w: redlock: refresh: the quorum took %v, past the validity of a %v lease", ErrUnavailable, took, ttl)
	}
	return sent, nil
}

func (r *Redlock) release(ctx context.Context, l *Lock) error {
	replies := r.each(ctx, time.Now().Add(r.nodeTimeout(leaseTTL(l))), nil, func(ctx context.Context, c *Client) (int64, error) {
		return c.releaseOne(ctx, l.keys[:], l.args[:])
	})
	return r.tally(ctx, "release", "released", replies)
}

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
