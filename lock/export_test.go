package lock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Slot exposes the hash slot function to the tests, which check it against
// CLUSTER KEYSLOT.
var Slot = slot

// SplitByKey makes c send one script call per key in its batch calls, the
// strategy the benchmarks compare with one call per server or per slot.
func SplitByKey(c *Client) { c.group = byKey }

// NodeTimeout exposes the per-node call bound of a Redlock for a lease.
func NodeTimeout(r *Redlock, ttl time.Duration) time.Duration { return r.nodeTimeout(ttl) }

// SlotTag exposes the hash tag of each slot's fence counter.
var SlotTag = slotTag

// Counter returns the fence counter that c uses for key, and its TTL (0:
// none).
func Counter(c *Client, key string) (string, time.Duration) {
	ck, _, ttl := c.counter(c.lockKey(key), time.Minute)
	return ck, ttl
}

// EpochCounter returns the epoch counter of the fence counter that c uses
// for key, "" for none.
func EpochCounter(c *Client, key string) string {
	_, ek, _ := c.counter(c.lockKey(key), time.Minute)
	return ek
}

// RunObtain runs the grant script (obtain.lua) as is.
func RunObtain(ctx context.Context, rdb redis.UniversalClient, keys []string, args ...any) *redis.Cmd {
	return obtainScript.Run(ctx, rdb, keys, args...)
}

// RedlockCounter returns the fence counter a Redlock's nodes use for key.
func RedlockCounter(r *Redlock, key string) string {
	return slotCounter(r.opt.Prefix, r.lockKey(key))
}

// RedlockKey returns the Redis key of key's lock on a Redlock's nodes.
func RedlockKey(r *Redlock, key string) string { return r.lockKey(key) }

// Occupy marks a grant (or, with releases, a release) of c in flight until
// the returned func is called: calls made meanwhile queue, and go out
// together when it is.
func Occupy(c *Client, releases bool) (resume func()) {
	b := &c.grants
	if releases {
		b = &c.releases
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.busy {
		panic("lock: Occupy: a call is in flight")
	}
	b.busy = true
	return b.leave
}

// Queued returns how many grants and releases wait in c's queues.
func Queued(c *Client) (grants, releases int) {
	c.grants.mu.Lock()
	grants = len(c.grants.queue)
	c.grants.mu.Unlock()
	c.releases.mu.Lock()
	releases = len(c.releases.queue)
	c.releases.mu.Unlock()
	return grants, releases
}

// Idle reports whether c has no call in flight and none queued.
func Idle(c *Client) bool {
	idle := true
	for _, b := range []*batcher{&c.grants, &c.releases} {
		b.mu.Lock()
		idle = idle && !b.busy && len(b.queue) == 0
		b.mu.Unlock()
	}
	return idle
}

// BatchStats counts the batches c sent and their entries.
type BatchStats struct{ GrantBatches, Grants, ReleaseBatches, Releases int64 }

// Batches returns what c sent in batches so far.
func Batches(c *Client) BatchStats {
	return BatchStats{c.grants.batches.Load(), c.grants.entries.Load(), c.releases.batches.Load(), c.releases.entries.Load()}
}

// BeforeGrantBatch makes c call f with the keys of each batch of grants
// before it sends it.
func BeforeGrantBatch(c *Client, f func(rkeys []string)) {
	c.grants.beforeSend = func(batch []*pending) {
		keys := make([]string, len(batch))
		for i, p := range batch {
			keys[i] = p.g.keys[0]
		}
		f(keys)
	}
}

// Nodes returns the Clients of a Redlock's nodes.
func Nodes(r *Redlock) []*Client { return r.nodes }

// Settle waits until every last call of a Redlock lock to its nodes
// returned (the grant's, a renewal's or the release's), those to nodes
// slower than the quorum included, and a grant's fence was written back to
// them. Obtain, Refresh and Release return at the quorum: tests that look
// at every node call it first.
func Settle(l *Lock) {
	l.mu.Lock()
	calls := l.calls
	l.mu.Unlock()
	if calls != nil {
		calls.settle()
	}
}

// SetBuckets makes c put each lock key in one of n hash slots.
func SetBuckets(c *Client, n int) { c.buckets = n }

// LockKey returns the Redis key of key's lock in c.
func LockKey(c *Client, key string) string { return c.lockKey(key) }
