package lock

import "time"

// Slot exposes the hash slot function to the tests, which check it against
// CLUSTER KEYSLOT.
var Slot = slot

// SplitByKey makes c send one script call per key in its batch calls, the
// strategy the benchmarks compare with one call per server or per slot.
func SplitByKey(c *Client) { c.group = byKey }

// NodeTimeout exposes the per-node call bound of a Redlock for a lease.
func NodeTimeout(r *Redlock, ttl time.Duration) time.Duration { return r.nodeTimeout(ttl) }
