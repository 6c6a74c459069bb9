// Package lock provides lease locks in Redis with fencing tokens: a lock
// per ERP record while it is written, and one per job run.
//
// # What a lease promises
//
// Obtain grants a key to one holder for a TTL: Redis sets the key only if
// it is absent (SET NX PX) to a random token, and Release and Refresh act
// only while the key still carries that token, so a holder whose lease ran
// out can neither delete nor extend the lock of the next one. While Redis
// keeps the key, no two holders are granted the same key.
//
// That is all a lease promises, and it is weaker than it looks. As Martin
// Kleppmann argued against Redlock ("How to do distributed locking", 2016),
// a holder can stop for longer than its TTL at any moment — a GC pause, a
// stopped VM or container, a page fault, a packet stuck in a queue — after
// it checked that it holds the lock and before its write lands. The lease
// runs out, a second holder is granted the key, and the first one wakes up
// and writes anyway. No check on the client closes that gap, and neither
// does the watchdog of Hold: it renews the lease and cancels a context when
// it finds the lock gone, but a paused process sees that only after it
// resumes. The lease also trusts time: the server expires keys by its clock
// (a clock that jumps forward ends leases early, as antirez conceded in his
// reply, "Is Redlock safe?"), and the client counts its lease by its own
// clock. And a Redis without persistence, or a replica promoted after an
// asynchronous failover, can forget a key that was granted, and grant it
// again while the first holder still works.
//
// # Fencing tokens
//
// So each grant also returns a fencing token (Lock.Fence): a number that
// strictly increases from grant to grant of one key. The holder passes it
// with every write, and the storage refuses a write whose token is smaller
// than one it has already accepted for that record (in SQL, a guarded
// UPDATE ... WHERE fence_token <= ?). The storage, which sees every write,
// then decides between two holders that overlap in time, and the older one
// loses, however long it slept. The lock is an optimisation that keeps
// holders from wasting work; the token is what keeps data correct.
//
// # Tokens across restarts
//
// The acquire script computes the token in the same step as the grant:
// max(counter+1, TIME in microseconds), and stores it in a counter key next
// to the lock (same hash slot) that expires Options.FenceTTL after the last
// grant, so memory stays bounded by the keys locked recently. A plain INCR
// counter would restart at 1 when Redis restarts empty (this deployment has
// no persistence), and the storage would then refuse every later write for
// good. With the clock as a floor, a token handed out after the counter is
// gone — expired, lost in a restart or a failover — is still larger than
// any earlier one.
//
// This rests on one assumption: the clock of the Redis server that grants a
// key never reads earlier than it did at an earlier grant of that key. NTP
// slewing keeps that; a clock stepped back does not. The counter covers a
// backward step while it lives, so a step smaller than FenceTTL (default
// one hour) is safe on a server that keeps its memory; a server that
// restarts empty must resume from a clock that is not behind its last
// grant, and a replica that may be promoted must keep its clock within the
// time a failover takes of its primary's. Tokens run about one per
// microsecond ahead of the clock at most (a batch of n grants n µs), and
// Lua's doubles hold them exactly until the year 2255.
//
// # Deadlines and failures
//
// Every Redis call runs under ctx's deadline, or under Options.Timeout (3 s
// by default) when ctx has none. Network and server-side unavailability
// errors match ErrUnavailable; go-redis's own retries on network errors
// run inside that deadline. A grant whose reply is lost is not reported:
// Obtain returns an error and the key stays locked until its TTL.
package lock
