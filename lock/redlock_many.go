package lock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ObtainMany tries once to grant each key for ttl on a quorum of nodes, as
// Obtain does for one key, and returns one entry per key: the Lock, or nil
// where the key is held by another on enough nodes that no quorum granted
// it (a key repeated in keys is granted at most once).
//
// The whole batch goes to every node at once, as one call of the batch
// grant script (obtain_many.lua; on a node that is a Redis Cluster, one
// per hash slot, pipelined), coalesced with the other grants in flight to
// that node (see Coalescing in the package doc), each node bounded by
// Options.NodeTimeout. A key is granted where a quorum of nodes granted it
// and the lease, counted from the moment the batch began, has time left
// after the drift margin. ObtainMany returns as soon as every key is
// decided — granted by a quorum, or refused by more nodes than a quorum
// leaves — and the calls to slower nodes run on. Each granted key's
// fencing token is the largest its quorum handed out, written back to the
// nodes of the quorum that handed out less in one call per node before
// ObtainMany returns, and to the slower nodes when they answer: tokens of
// one key strictly increase across quorums, as with Obtain. The keys not
// granted are released on every node that granted them or did not answer,
// once all answered, in one call per node.
//
// When fewer than a quorum of nodes answered, or a token could not be
// written to a quorum, or the quorum answered too late for the lease, it
// returns nil and an error matching ErrUnavailable, and releases whatever
// the batch was granted. Hooks are called per key, as for Obtain (none
// on an error).
func (r *Redlock) ObtainMany(ctx context.Context, keys []string, ttl time.Duration) ([]*Lock, error) {
	if len(r.nodes) == 0 {
		return nil, fmt.Errorf("%w: redlock without nodes", ErrInvalid)
	}
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return nil, err
		}
	}
	if len(keys) == 0 {
		return []*Lock{}, nil
	}
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	floor := proposedFloor(start)
	gs := make([]*grant, len(keys))
	counters := make([]string, len(keys))
	for i, k := range keys {
		rkey := r.lockKey(k)
		counters[i] = slotCounter(r.opt.Prefix, rkey)
		gs[i] = makeGrant(rkey, counters[i], "", token, ttl.Milliseconds(), 0).withFloor(clockStep, floor)
	}

	nt := r.nodeTimeout(ttl)
	// got[i] are node i's answers, one per key; read where the node's
	// reply says it answered.
	got := make([][]int64, len(r.nodes))
	plan := new(grantPlan)
	calls := r.fan(ctx, start.Add(nt), nil, nil, func(ctx context.Context, c *Client) (int64, error) {
		i := r.indexOf(c)
		ns, err := c.obtainBatch(ctx, gs, plan)
		got[i] = ns
		return 0, err
	})
	replies := calls.until(func(rs []reply) bool { return r.decided(rs, got, len(keys)) })

	answered := count(replies, func(rep reply) bool { return rep.asked && rep.err == nil })
	fences := make([]int64, len(keys))
	for k := range keys {
		var granted int
		var fence int64
		for i, rep := range replies {
			if rep.asked && rep.err == nil && got[i][k] > 0 {
				granted++
				fence = max(fence, got[i][k])
			}
		}
		if granted >= r.quorum {
			fences[k] = fence
		}
	}
	ofNode := func(i, k int) int64 { return got[i][k] }

	switch {
	case answered < r.quorum:
		err = fmt.Errorf("%w: redlock: obtain many: %d of %d nodes answered, %d needed: %w",
			ErrUnavailable, answered, len(r.nodes), r.quorum, firstErr(replies))
	default:
		err = r.raise(ctx, counters, fences, 0, replies, ofNode, nt)
		if err != nil && calls.read < calls.asked {
			// A node of the quorum failed since it granted: the nodes
			// slower than the quorum may make up for it.
			replies = calls.until(nil)
			err = r.raise(ctx, counters, fences, 0, replies, ofNode, nt)
		}
		if took := time.Since(start); err == nil && took >= validity(ttl) {
			err = fmt.Errorf("%w: redlock: obtain many: the quorums took %v, past the validity of a %v lease", ErrUnavailable, took, ttl)
		}
	}
	if err != nil {
		// Undo the whole batch once every node answered, as Obtain does.
		r.releaseGrants(context.WithoutCancel(ctx), gs, got, calls.until(nil), func(int) bool { return false }, nt)
		return nil, err
	}

	locks := make([]*Lock, len(keys))
	wait := time.Since(start)
	for k, key := range keys {
		if fences[k] == 0 {
			if r.hook.Contended != nil {
				r.hook.Contended(key)
			}
			r.notObtained(key)
			continue
		}
		l := gs[k].lock(r, key, fences[k], ttl, start)
		l.calls = calls
		locks[k] = l
		if r.hook.Obtained != nil {
			r.hook.Obtained(key, wait)
		}
	}
	calls.followUp(func(all []reply) {
		// The nodes slower than the quorum that granted a smaller token get
		// the fence too, as the quorum's did; the keys not granted are
		// released wherever they may be ours.
		bg := context.WithoutCancel(ctx)
		late := slices.Clone(all)
		for i, rep := range replies {
			if rep.asked {
				late[i] = reply{}
			}
		}
		_ = r.raise(bg, counters, fences, 0, late, ofNode, nt)
		r.releaseGrants(bg, gs, got, all, func(k int) bool { return fences[k] > 0 }, nt)
	})
	return locks, nil
}

// decided reports whether every one of n keys is decided by the replies
// rs and the answers got (see ObtainMany): granted by a quorum, or refused
// by more nodes than a quorum leaves.
func (r *Redlock) decided(rs []reply, got [][]int64, n int) bool {
	for k := range n {
		var granted, refused int
		for i, rep := range rs {
			if !rep.asked || rep.err != nil {
				continue
			}
			if got[i][k] > 0 {
				granted++
			} else {
				refused++
			}
		}
		if granted < r.quorum && refused <= len(r.nodes)-r.quorum {
			return false
		}
	}
	return true
}

// releaseGrants releases, on every node, in one call per node, the keys of
// gs that keep(k) does not keep and that the node granted or may have
// granted (it did not answer).
func (r *Redlock) releaseGrants(ctx context.Context, gs []*grant, got [][]int64, replies []reply, keep func(k int) bool, nt time.Duration) {
	rkeys := make([][]string, len(r.nodes))
	tokens := make([][]any, len(r.nodes))
	for i, rep := range replies {
		if !rep.asked {
			continue
		}
		for k, g := range gs {
			if !keep(k) && (rep.err != nil || got[i][k] > 0) {
				rkeys[i] = append(rkeys[i], g.keys[0])
				tokens[i] = append(tokens[i], g.args[0])
			}
		}
	}
	r.each(ctx, time.Now().Add(nt), func(i int) bool { return len(rkeys[i]) > 0 }, func(ctx context.Context, c *Client) (int64, error) {
		i := r.indexOf(c)
		_, err := c.releaseBatch(ctx, rkeys[i], tokens[i])
		return 0, err
	})
}

// ReleaseMany releases every non-nil lock of this Redlock that still
// carries its token, on every node at once, in one call per node
// (coalesced with that node's other releases), and stops their watchdogs.
// Each node's call waits until the locks' last calls to that node
// returned, as Release does. A lock counts as released when a quorum had
// it, and ReleaseMany returns as soon as every lock is decided, or ctx
// ends; the calls to slower nodes run on to their NodeTimeout whatever ctx
// does afterwards (see Wait, for a process about to exit). It returns
// how many locks were no longer held (ErrExpired or ErrTaken by Release's
// rule); err matches ErrUnavailable when too few nodes answered to decide
// some lock, and ErrInvalid, before anything is released, for a lock not
// obtained from this Redlock.
func (r *Redlock) ReleaseMany(ctx context.Context, locks []*Lock) (notHeld int, err error) {
	held, err := toRelease(locks, func(l *Lock) bool { return l.b == backend(r) }, "this Redlock")
	if err != nil || len(held) == 0 {
		return 0, err
	}
	rkeys := make([]string, len(held))
	tokens := make([]any, len(held))
	var after []*fanout
	var ttl time.Duration
	for i, l := range held {
		rkeys[i], tokens[i] = l.rkey, l.args[0]
		l.mu.Lock()
		if l.calls != nil && (len(after) == 0 || after[len(after)-1] != l.calls) {
			after = append(after, l.calls)
		}
		ttl = max(ttl, l.ttl)
		l.mu.Unlock()
	}
	// The calls run to their NodeTimeout whatever ctx does, as Release's:
	// those to the nodes slower than the decision must not be taken back
	// when the caller cancels ctx once ReleaseMany returned.
	got := make([][]int64, len(r.nodes))
	calls := r.fan(context.WithoutCancel(ctx), time.Now().Add(r.nodeTimeout(ttl)), nil, nil, func(ctx context.Context, c *Client) (int64, error) {
		i := r.indexOf(c)
		for _, f := range after {
			f.wait(ctx, i)
		}
		ns, err := c.releaseBatch(ctx, rkeys, tokens)
		got[i] = ns
		return 0, err
	})
	for _, l := range held {
		l.mu.Lock()
		l.calls = calls
		l.mu.Unlock()
	}
	replies := calls.within(ctx, func(rs []reply) bool { return r.decided(rs, got, len(held)) })
	per := make([]reply, len(r.nodes))
	for k, l := range held {
		for i, rep := range replies {
			per[i] = rep
			if rep.asked && rep.err == nil {
				per[i].n = got[i][k]
			}
		}
		switch terr := r.tally(ctx, "release", "released", per); {
		case terr == nil:
			l.mu.Lock()
			l.deleted = true
			l.mu.Unlock()
		case errors.Is(terr, ErrNotHeld):
			notHeld++
		default:
			err = cmp.Or(err, terr)
		}
	}
	return notHeld, err
}

// firstErr returns the first error among rs.
func firstErr(rs []reply) error {
	for _, rep := range rs {
		if rep.err != nil {
			return rep.err
		}
	}
	return nil
}

func (r *Redlock) notObtained(key string) {
	if r.hook.NotObtained != nil {
		r.hook.NotObtained(key)
	}
}

// lockKey returns the Redis key of key's lock on every node: in one of
// ClusterBuckets hash slots, as a Client's on a cluster, so that the
// grants of a batch share their fence counters (one per bucket, see
// Redlock.Obtain) and a node that is itself a Redis Cluster takes a batch
// in one call per bucket.
func (r *Redlock) lockKey(key string) string {
	return r.opt.Prefix + "{" + bucketTag(key, ClusterBuckets) + "}" + key
}
