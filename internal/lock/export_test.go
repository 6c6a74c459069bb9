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
	return c.counter(c.lockKey(key), time.Minute)
}

// RunObtain runs the grant script (obtain.lua) as is.
func RunObtain(ctx context.Context, rdb redis.UniversalClient, keys []string, args ...any) *redis.Cmd {
	return obtainScript.Run(ctx, rdb, keys, args...)
}

// RedlockCounter returns the fence counter a Redlock's nodes use for key.
func RedlockCounter(r *Redlock, key string) string {
	return slotCounter(r.opt.Prefix, r.opt.Prefix+"{"+key+"}")
}
