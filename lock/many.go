package lock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// grouping says how the batch calls split keys into script calls.
type grouping int

const (
	// oneGroup sends all keys in one script call: a single server.
	oneGroup grouping = iota
	// bySlot sends one script call per hash slot, pipelined: a Redis
	// Cluster, where a script may only touch keys of one slot.
	bySlot
	// byKey sends one script call per key, pipelined: a Ring or an unknown
	// client, which may shard keys of one slot apart.
	byKey
)

func groupingOf(rdb redis.UniversalClient) grouping {
	switch rdb.(type) {
	case *redis.Client:
		return oneGroup
	case *redis.ClusterClient:
		return bySlot
	default:
		return byKey
	}
}

// groupKeys returns the indexes of rkeys split into script calls.
func (c *Client) groupKeys(rkeys []string) [][]int {
	switch c.group {
	case oneGroup:
		all := make([]int, len(rkeys))
		for i := range all {
			all[i] = i
		}
		return [][]int{all}
	case bySlot:
		var groups [][]int
		at := make(map[uint16]int, len(rkeys))
		for i, k := range rkeys {
			s := slot(k)
			g, ok := at[s]
			if !ok {
				g = len(groups)
				at[s] = g
				groups = append(groups, nil)
			}
			groups[g] = append(groups[g], i)
		}
		return groups
	default:
		groups := make([][]int, len(rkeys))
		for i := range groups {
			groups[i] = []int{i}
		}
		return groups
	}
}

// grantCalls returns the calls of obtain_many.lua that run gs: one per
// group of keys (see groupKeys) and lease (TTL, counter TTL, step), and
// the indexes of each call's grants in gs, those of one fence counter
// together (see grantCall).
func (c *Client) grantCalls(gs []*grant) ([]scriptCall, [][]int) {
	rkeys := make([]string, len(gs))
	for i, g := range gs {
		rkeys[i] = g.keys[0]
	}
	var calls []scriptCall
	var out [][]int
	for _, idx := range c.groupKeys(rkeys) {
		for len(idx) > 0 {
			// The grants with the first one's lease go in this call, the
			// others in later ones.
			first := gs[idx[0]]
			var same, rest []int
			for _, i := range idx {
				if g := gs[i]; g.ttl == first.ttl && g.counterTTL == first.counterTTL && g.step == first.step {
					same = append(same, i)
				} else {
					rest = append(rest, i)
				}
			}
			same = byCounter(gs, same)
			calls = append(calls, grantCall(gs, same))
			out = append(out, same)
			idx = rest
		}
	}
	return calls, out
}

// byCounter returns idx with the grants of each fence counter together,
// the counters in the order they first appear, and the grants of one
// counter in their order in idx. It returns idx itself when every grant
// shares one counter, as on a single server or a cluster's slot.
func byCounter(gs []*grant, idx []int) []int {
	first := gs[idx[0]].keys[1]
	shared := true
	for _, i := range idx {
		if gs[i].keys[1] != first {
			shared = false
			break
		}
	}
	if shared {
		return idx
	}
	var order []string
	of := make(map[string][]int)
	for _, i := range idx {
		k := gs[i].keys[1]
		if _, ok := of[k]; !ok {
			order = append(order, k)
		}
		of[k] = append(of[k], i)
	}
	out := make([]int, 0, len(idx))
	for _, k := range order {
		out = append(out, of[k]...)
	}
	return out
}

// grantCall returns the call of obtain_many.lua that runs the grants
// gs[i] for i in idx, which share their lease and list the grants of each
// fence counter together (see byCounter). The call names each counter
// once, and proposes the largest floor of its grants: a floor only bounds
// a token from below, and a node takes it only near its own clock.
func grantCall(gs []*grant, idx []int) scriptCall {
	first := gs[idx[0]]
	n := len(idx)
	keys := make([]string, n, n+2)
	var floor int64
	for j, i := range idx {
		keys[j] = gs[i].keys[0]
		floor = max(floor, gs[i].proposed)
	}
	args := appendTokens(make([]any, 5, 8), n, func(j int) any { return gs[idx[j]].args[0] })
	args[0], args[1], args[2], args[3], args[4] = first.ttl, first.counterTTL, first.step, floor, n
	if first.keys[2] != "" && gs[idx[n-1]].keys[1] == first.keys[1] {
		// One counter and its epoch counter (see obtain_many.lua).
		keys = append(keys, first.keys[1], first.keys[2])
		args[1] = -1
		return scriptCall{keys: keys, args: args}
	}
	run := 0
	for j, i := range idx {
		run++
		if j == n-1 || gs[idx[j+1]].keys[1] != gs[i].keys[1] {
			keys = append(keys, gs[i].keys[1])
			args = append(args, run)
			run = 0
		}
	}
	return scriptCall{keys: keys, args: args}
}

// releaseCalls returns the calls of release_many.lua that delete rkeys[i]
// where it carries tokens[i]: one per group of keys (see groupKeys), and
// the indexes of each call's keys.
func (c *Client) releaseCalls(rkeys []string, tokens []any) ([]scriptCall, [][]int) {
	groups := c.groupKeys(rkeys)
	calls := make([]scriptCall, len(groups))
	for g, idx := range groups {
		keys := make([]string, len(idx))
		for j, i := range idx {
			keys[j] = rkeys[i]
		}
		args := appendTokens(nil, len(idx), func(j int) any { return tokens[idx[j]] })
		calls[g] = scriptCall{keys: keys, args: args}
	}
	return calls, groups
}

// appendTokens appends to args the tokens tok(j) of n locks, run-length
// coded as tokens.lua reads them: a token, then "*" and a count when the
// next locks carry it too.
func appendTokens(args []any, n int, tok func(j int) any) []any {
	for j := 0; j < n; {
		t := tok(j)
		k := j + 1
		for k < n && tok(k) == t {
			k++
		}
		args = append(args, t)
		if k-j > 1 {
			args = append(args, "*"+strconv.Itoa(k-j-1))
		}
		j = k
	}
	return args
}

// ObtainMany tries once to grant each key for ttl and returns one entry per
// key: the Lock, or nil where the key is held by another (a key repeated in
// keys is granted at most once). On a single server all keys go in one
// script call; on a Redis Cluster one call per hash slot, all in one
// pipeline. The script holds the server while it runs (measured: about
// 1.5 ms for 250 keys, obtain or release), so keep batches to a few
// hundred keys.
//
// On a Redis failure it returns nil and an error matching ErrUnavailable;
// locks already granted by other calls of the batch are released, or
// expire after ttl when that fails too.
func (c *Client) ObtainMany(ctx context.Context, keys []string, ttl time.Duration) ([]*Lock, error) {
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	rkeys := make([]string, len(keys))
	for i, k := range keys {
		if err := checkKey(k); err != nil {
			return nil, err
		}
		rkeys[i] = c.lockKey(k)
	}
	if len(keys) == 0 {
		return []*Lock{}, nil
	}
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	gs := makeGrants(rkeys, func(rk string) (string, string, int64) {
		ck, ek, cttl := c.counter(rk, ttl)
		return ck, ek, cttl.Milliseconds()
	}, token, ttl.Milliseconds())
	calls, groups := c.grantCalls(gs)

	start := time.Now()
	cmds, err := c.runMany(ctx, obtainManyScript, calls)

	locks := make([]*Lock, len(keys))
	block := make([]Lock, len(keys))
	for j, idx := range groups {
		fences, ferr := results(cmds[j], err, len(idx))
		for k, i := range idx {
			if ferr == nil {
				ferr = fenceError(fences[k], gs[i])
			}
			if ferr != nil {
				break
			}
			if fences[k] > 0 {
				g := gs[i]
				locks[i] = initLock(&block[i], c, keys[i], g.keys[0], g.token(), g.args[0], fences[k], ttl, start)
			}
		}
		err = cmp.Or(err, ferr)
	}
	if err != nil {
		err = translate(ctx, "obtain many", err)
		c.cleanUp(locks)
		return nil, err
	}

	wait := time.Since(start)
	for i, l := range locks {
		if l != nil {
			if c.hook.Obtained != nil {
				c.hook.Obtained(keys[i], wait)
			}
			continue
		}
		if c.hook.Contended != nil {
			c.hook.Contended(keys[i])
		}
		c.notObtained(keys[i])
	}
	return locks, nil
}

// cleanUp releases, best effort, the locks granted by a failed batch.
func (c *Client) cleanUp(locks []*Lock) {
	granted := locks[:0:0]
	for _, l := range locks {
		if l != nil {
			granted = append(granted, l)
		}
	}
	if len(granted) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opt.Timeout)
	defer cancel()
	_, _ = c.ReleaseMany(ctx, granted)
}

// ReleaseMany releases every non-nil lock that still carries its token, in
// one script call per group (see ObtainMany), and stops their watchdogs.
// It returns how many of them were no longer held (expired, maybe passed
// on: those keys are left alone). err is for Redis failures, then notHeld
// counts the groups that did answer, and for a lock obtained from a
// Redlock (ErrInvalid, before anything is released).
func (c *Client) ReleaseMany(ctx context.Context, locks []*Lock) (notHeld int, err error) {
	held, err := toRelease(locks, func(l *Lock) bool { _, ok := l.b.(*Client); return ok }, "a Client")
	if err != nil || len(held) == 0 {
		return 0, err
	}
	rkeys := make([]string, len(held))
	tokens := make([]any, len(held))
	for i, l := range held {
		rkeys[i], tokens[i] = l.rkey, l.args[0]
	}
	calls, groups := c.releaseCalls(rkeys, tokens)
	cmds, err := c.runMany(ctx, releaseManyScript, calls)
	for j, idx := range groups {
		ns, rerr := results(cmds[j], err, len(idx))
		if rerr != nil {
			err = cmp.Or(err, rerr)
			continue
		}
		for _, n := range ns {
			if n <= 0 {
				notHeld++
			}
		}
	}
	if err != nil {
		return notHeld, translate(ctx, "release many", err)
	}
	return notHeld, nil
}

// raiseFences raises each fence counter counters[i] to tokens[i] (see
// raise_fence.lua), one script call per group of counters, and returns
// the counters as they are then.
func (c *Client) raiseFences(ctx context.Context, counters []string, tokens []any, fenceTTLms int64) ([]int64, error) {
	groups := c.groupKeys(counters)
	calls := make([]scriptCall, len(groups))
	for g, idx := range groups {
		keys := make([]string, len(idx))
		args := make([]any, 1, 1+len(idx))
		args[0] = fenceTTLms
		for j, i := range idx {
			keys[j] = counters[i]
			args = append(args, tokens[i])
		}
		calls[g] = scriptCall{keys: keys, args: args}
	}
	return c.runBatch(ctx, raiseFenceScript, calls, groups, nil)
}

// toRelease returns the non-nil locks, their watchdogs stopped; or, with
// nothing stopped, ErrInvalid for a lock that ours says was not obtained
// from the releaser, which owner names.
func toRelease(locks []*Lock, ours func(*Lock) bool, owner string) ([]*Lock, error) {
	var held []*Lock
	for _, l := range locks {
		if l == nil {
			continue
		}
		if !ours(l) {
			return nil, fmt.Errorf("%w: release many: %s was not obtained from %s", ErrInvalid, l, owner)
		}
		held = append(held, l)
	}
	for _, l := range held {
		l.stop()
	}
	return held, nil
}

// scriptCall is one call of a script in a batch.
type scriptCall struct {
	keys []string
	args []any
}

// runMany runs s once per call: directly when there is one, else in one
// pipeline (EVALSHA, then EVAL for the calls that met NOSCRIPT). cmds has
// one entry per call, nil where no answer is known; err is the first
// failure of the pipeline.
func (c *Client) runMany(ctx context.Context, s script, calls []scriptCall) ([]*redis.Cmd, error) {
	ctx, cancel := c.callContext(ctx, time.Time{})
	defer cancel()
	cmds := make([]*redis.Cmd, len(calls))
	if len(calls) == 1 {
		cmds[0] = s.Run(ctx, c.rdb, calls[0].keys, calls[0].args...)
	} else {
		pipe := c.rdb.Pipeline()
		for i, call := range calls {
			cmds[i] = pipe.EvalSha(ctx, s.Hash(), call.keys, call.args...)
		}
		_, _ = pipe.Exec(ctx) // errors are read per command below

		var again []int
		for i, cmd := range cmds {
			if isNoScript(cmd.Err()) {
				again = append(again, i)
			}
		}
		if len(again) > 0 {
			pipe = c.rdb.Pipeline()
			for _, i := range again {
				cmds[i] = pipe.Eval(ctx, s.src, calls[i].keys, calls[i].args...)
			}
			_, _ = pipe.Exec(ctx)
		}
	}

	var first error
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
			if first == nil {
				first = err
			}
			cmds[i] = nil
		}
	}
	return cmds, first
}

func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}
