// Package lock provides lease locks in Redis with fencing tokens, on one
// server (New with a *redis.Client), a Redis Cluster (New with a
// *redis.ClusterClient) or a quorum of independent masters (NewRedlock).
// erpsync takes one per ERP record while it writes it, and one per job run;
// any program that guards a write with a Redis lock can use it the same
// way: Obtain, write with Lock.Fence as a fencing token the storage checks,
// Release. ObtainMany locks a batch of keys in one round trip, and Hold
// keeps a lock renewed for as long as a job runs. The examples show each
// use.
//
// # What a lease promises
//
// Obtain grants a key to one holder for a TTL: Redis sets the key only if
// it is absent (SET NX PX) to a random token, and Release and Refresh act
// only while the key still carries that token, so a holder whose lease ran
// out can neither delete nor extend the lock of the next one. While Redis
// keeps the key, no two holders are granted the same key. The locks of one
// ObtainMany share one random token: each is its own key, and a later
// grant of any of them draws a new token.
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
// A caller that needs the token only on some paths can obtain with
// ObtainOptions.FenceOnDemand: the grant is then a plain SET NX PX, the
// cheapest there is, and Lock.FetchFence gets the token later, in one
// more round trip, from the same counter and by the same script as a
// grant — which hands it out only while the key still carries the
// caller's lock token. Holds of one key never overlap, so tokens fetched
// while holding follow the order of the holds as tokens made by the grant
// do, and a holder that lost its lock gets ErrExpired or ErrTaken instead
// of a token. A Redlock always makes the token with the grant.
//
// # Tokens across restarts
//
// The acquire script computes the token in the same step as the grant:
// max(counter+1, TIME in microseconds), and leaves the counter at it. A
// plain INCR counter would restart at 1 when Redis restarts empty (this
// deployment has no persistence), and the storage would then refuse every
// later write for good. With the clock as a floor, a token handed out after
// the counter is gone — lost in a restart or a failover, or expired — is
// still larger than any earlier one. (A shared counter gets there in two
// steps, see "Epochs" below.)
//
// # One counter for many keys
//
// The counter need not be the key's own: tokens of a key strictly increase
// as long as all its grants go through one counter, whoever else counts on
// it. So a Client on a single server keeps one counter for all keys
// (Prefix + "server:fence"), and a Client on a Redis Cluster one per hash
// slot (Prefix + "slot{T}:fence", T a short tag that hashes to the slot,
// from a table computed once per process), both without expiry: memory
// stays at one key per server, or at most 16384 per Prefix (and as many
// epoch counters, each of which lives 10 ms, see Epochs). A grant then
// moves a counter that exists (an INCR of its epoch counter) instead of
// writing a key of its own with a TTL, and
// ObtainMany and a coalesced batch (see below) read and write one counter
// per script call instead of one per key, which costs the server less CPU
// per grant (docs/performance.md has the figures). Tokens of different keys are
// distinct on one server or slot, which nothing relies on. A Redlock's
// nodes keep one counter per bucket of keys (see Redlock below), on every
// kind of node. Only a Client over a Ring or another client that may shard the
// keys of one slot apart keeps one counter per key (the lock key +
// ":fence"), which expires Options.FenceTTL after its key's last grant.
//
// This rests on one assumption: the clock of the Redis server that grants a
// key never reads earlier than it did at an earlier grant of that key. NTP
// slewing keeps that; a clock stepped back does not. The counter covers a
// backward step while it lives: on a single server or a cluster, as long as
// the server keeps its memory; for a per-key counter, a step smaller than
// FenceTTL (default one hour). A server that restarts empty must resume
// from a clock that is not behind its last grant, and a replica that may be
// promoted must keep its clock within the time a failover takes of its
// primary's. Tokens run ahead of the clock only while a counter hands out
// more than one per microsecond: a batch of n grants runs up to n µs ahead
// (a Redlock's grants up to 2 ms, see below). Lua's doubles hold tokens
// exactly until the year 2255.
//
// # Epochs
//
// Reading the clock and rewriting the counter cost the server more than
// the grant itself: measured with redis-benchmark, the grant script took
// 19 µs of Redis CPU against 13 for bsm/redislock's plain SET NX. So a
// shared counter hands out tokens in epochs. Beside the counter (now the
// bound of the epochs) lives an epoch counter, its name + ":epoch", that
// expires 10 ms after the epoch began. A grant INCRs the epoch counter and
// takes the result: two Redis calls, the SET NX and the INCR. Only when the
// epoch counter is gone (expired, lost, or never there) or its next value
// would pass the next multiple of 500 does the grant read the clock and
// start a new epoch at max(clock, counter) + 1, and it then sets the
// counter to the multiple of 500 at or above that token. So every token
// lies at or below the counter, and every epoch starts above it: tokens
// strictly increase while the counter lives, whatever the clock does, and
// start from the clock when it is gone, as above. A new epoch starts at
// the clock unless grants came faster than one per microsecond, so tokens
// run no more than 500 ahead of the clock unless they did, and lag it by
// at most 10 ms. ObtainMany and coalesced batches take consecutive tokens
// from the epoch counter with one INCRBY. The epochs lasted 2 ms at first;
// one goroutine's loop of grants then started a new one every 12 grants,
// and with 10 ms its pairs ran 4-8% faster.
//
// Epochs add one assumption to those above: a server that comes back with
// its data — a restart from an RDB or AOF file, or a promoted replica that
// may lag behind its primary — must not grant within 10 ms of its last
// grant before it went, by the server's clock, or an epoch counter it kept
// from before could hand out a token again. Restarts and failovers take far
// longer (Sentinel waits down-after-milliseconds, 30 s by default, before
// it even starts one). A per-key counter (over a Ring) and a Redlock's
// counters keep the way above, without epochs. A grant by a build without
// epochs, sharing the counter, moves it without ending the epoch, so for
// up to 10 ms a later grant of the same key by this build can carry a
// smaller token: do not run the two builds against one Redis and Prefix
// at once.
//
// # Coalescing
//
// Concurrent calls to one Client are coalesced, as a database's group
// commit does: while one Obtain's grant is in flight, the grants of other
// Obtain calls of the Client queue, and when it returns they go out
// together, as one call of the batch grant script per group of keys (all
// of a single server's, one per hash slot on a cluster, pipelined), which
// reads and writes the fence counter once; Release does the same with its
// own queue. Each caller still gets its own token, fencing token and lease
// (callers with different TTLs share the batch, in separate script calls
// of one pipeline), and its own result: a grant or ErrNotObtained, nil,
// ErrExpired or ErrTaken. A caller alone, with nothing in flight, sends
// its call at once, so a single goroutine waits no longer than without
// coalescing; under concurrency a call waits for at most the one in
// flight, and the server and the client handle one request and one reply
// per batch instead of one per call, which is where the throughput of
// many goroutines comes from. A Redlock coalesces per node.
//
// A queued caller still stops at its ctx: when ctx ends before its batch
// answered, it returns at once (Obtain with ErrNotObtained and ctx's
// error). A grant still queued is then never sent; one already sent is
// released when its reply comes back. A batch's call runs under the
// latest deadline of its callers (ctx's, or Options.Timeout from the
// moment it queued), and a Redis failure reaches each of them.
//
// # Deadlines and failures
//
// Every Redis call runs under ctx's deadline, or under Options.Timeout (3 s
// by default) when ctx has none. Network and server-side unavailability
// errors match ErrUnavailable; go-redis's own retries on network errors
// run inside that deadline. A grant whose reply is lost is not reported:
// Obtain returns an error and the key stays locked until its TTL. (Only a
// coalesced grant whose caller left before its reply came back is
// released, see above.)
//
// # Errors
//
// Each error says what happened, and callers check it with errors.Is:
//
//   - ErrNotObtained: the key is held by another holder (Obtain, after its
//     retries; with ctx's error too when ctx ended first).
//   - ErrUnavailable: Redis could not answer — network, timeout, LOADING,
//     READONLY, CLUSTERDOWN and the like, or, for a Redlock, too few nodes
//     answered to decide (the message says how many did). The lock fails
//     closed: nothing is granted.
//   - ErrNotHeld: Release or Refresh found the lock no longer carrying this
//     holder's token. They return one of two errors that match it and say
//     why: ErrExpired, the key is gone and no one holds it, or ErrTaken,
//     another holder was granted the key since. Either way the lease ran
//     out while the holder thought it held the lock, and its writes were
//     only safe if the storage checked its fencing token.
//   - ErrLost: the cause of a Hold context that ended because the watchdog
//     found the lock gone (then with ErrExpired or ErrTaken) or could not
//     renew it before the lease ran out (then with the last ErrUnavailable).
//   - ErrInvalid: a bad argument; nothing was sent.
//
// # Redis Cluster
//
// A Client works on a Redis Cluster as on a single server. A script may
// only touch keys of one hash slot, so the lock keys are put in
// ClusterBuckets (64) buckets, each a hash slot: a lock's key is Prefix +
// "{T}" + key, where T is the tag of the key's bucket (a slot chosen by
// CRC16 of the key, the 64 slots spaced evenly over the 16384), and its
// fence counter is that slot's, whose name carries the same tag. A key
// may not contain a brace. ObtainMany, ReleaseMany and coalesced batches
// send one script call per slot, all in one pipeline, each with the
// slot's counter: a chunk of 500 keys is about 64 calls, spread over the
// masters as the slots are (with three masters splitting the slots
// evenly, 22, 21 and 21 buckets). Each key its own hash tag, as before,
// spread keys as evenly but made a chunk about 500 calls, each paying
// the script's fixed cost: a 100,000-record backfill on three local
// masters ran at 0.42 and 0.48 of one server's rate in the same runs
// (Redis CPU 2.9 s), with the buckets at 0.77 and 0.85 (Redis CPU 1.2 to
// 1.4 s, one server's 0.8 to 0.9 s). Fewer buckets save little more
// and spread coarser (16 over three masters: 6, 5 and 5). A
// cluster fails over like a replicated server: a replica promoted before
// it received a grant can grant the key again (see above), and the time
// floor of the tokens keeps fencing right across it.
//
// Upgrading to the buckets changes every lock key and fence counter on a
// cluster: an instance of an earlier build and one of this build lock
// different keys for one record and count its tokens on different
// counters, so they neither exclude each other nor order their tokens.
// Stop every instance of the earlier build (let its runs end) before the
// first one of this build starts, as for the epochs above. The same holds
// for a Redlock, whose keys and counters moved to the buckets at the same
// time; a single server keeps its keys.
//
// # Redlock
//
// A Redlock (NewRedlock) takes the same locks over several independent
// Redis masters — five is usual, and three tolerates one failure — so that
// no single server, failover or restart decides alone. It is the algorithm
// Salvatore Sanfilippo (antirez) described as Redlock:
//
//   - Obtain runs the single-server grant script on every node at once
//     (coalesced with the concurrent attempts on that node, see
//     Coalescing), each call bounded by Options.NodeTimeout (ttl/10, at
//     most a second, by default), and counts the grants. With a quorum (more
//     than half the nodes) and time left on the lease — ttl less the time
//     the attempt took, less 1% of ttl and 2 ms for clock drift — the lock
//     is taken, as soon as the quorum answered: the calls to slower nodes
//     run on, so one slow or hung node costs no attempt its NodeTimeout.
//     Otherwise, once every node answered, it is released on every node
//     that granted it or did not answer, and Obtain retries as told
//     (contention) or fails (too few nodes answered: ErrUnavailable, at
//     once).
//   - ObtainMany grants a batch of keys the same way, per key: the whole
//     batch is one call of the batch grant script per node (coalesced
//     with that node's other grants), a key is granted where a quorum
//     granted it within the validity, and ObtainMany returns once every
//     key is granted by a quorum or refused by too many nodes. The token
//     write-backs go in one call per node, and the keys not granted are
//     released, once every node answered, in one call per node. A batch
//     fails closed as a whole (ErrUnavailable, everything it was granted
//     released) when fewer than a quorum of nodes answered. ReleaseMany
//     releases a batch in one call per node.
//   - Refresh and the Hold watchdog extend the lease on every node, and
//     need a quorum; Release deletes it on every node that still has it,
//     and succeeds when a quorum had it. Refresh and ReleaseMany return as
//     soon as a quorum acted; Release returns once every node answered or
//     its NodeTimeout passed, so that a holder that exits right after
//     leaves no copy on a slow node. A call to a node waits until the
//     lock's previous call to that node returned, so a release never
//     overtakes a slow node's grant and leaves it behind. Wait waits for
//     the calls still running to slower nodes: call it before the process
//     exits. TTL is the time a quorum still holds it.
//
// Fencing tokens stay strictly increasing across quorums. Each node hands
// out a token as a single server would (its slot's counter and its clock),
// and the lock's token is the largest of its quorum's (the first nodes to
// grant). Before Obtain returns, that token is written back (max(counter,
// token)) to the fence counter of every node of the quorum that handed out
// less, and at least a quorum of nodes must then hold it: any later quorum
// shares a node with this one, and that node hands out more. The nodes
// slower than the quorum get the write-back when they answer. That argument needs nothing of
// the clocks; they matter only when counters are gone (see "Tokens across
// restarts").
//
// So that the nodes usually agree and the write-back round trip is
// skipped, a Redlock's grants round the clock floor up to a whole
// millisecond, and each attempt proposes a floor of its own: its clock
// rounded up to a millisecond, plus one millisecond. A node takes the
// proposal when it lies above its own rounded clock by at most 2 ms, which
// covers the spread in time of one attempt's calls (without it, one grant
// in five on a loaded machine crossed a millisecond boundary between nodes
// and needed the write-back; with it, about one in twenty). A token then
// runs up to 2 ms ahead of the clock of the node that handed it out, never
// behind it; nodes whose clocks differ by more still need the write-back.
// The nodes count per bucket of keys, not per server: a lock's key is
// Prefix + "{T}" + key, T the tag of one of ClusterBuckets (64) hash slots
// as on a cluster, and its counter is that slot's. One counter for all
// keys would count the grants of concurrent attempts in a different order
// on each node, and their tokens would rarely agree. A counter per key's
// own slot, as before, made the tokens of single grants agree more often,
// but cost a batch a counter read and write per key on every node; with
// the buckets, a batch of 500 keys reads and writes about 64 per node. A
// batch call names each counter once, with the number of its keys, and
// one proposed floor for all of them, and a write-back names each counter
// once, at the largest token of its keys, so a key costs a node its name
// and token, as on a single server. What that costs a backfill against
// one server is measured by erpsync's bench (docs/performance.md, "Lock
// topologies").
//
// What a Redlock guarantees, and under which assumptions: while a lease
// runs (by the holder's clock, less the drift margin), no other holder is
// granted a quorum for the key, provided that (1) every node expires keys
// no earlier than the TTL says, by its own clock — clocks may drift at a
// bounded rate, covered by the margin, but must not jump forward (an
// operator's date change, a stepped NTP correction); (2) no node forgets a
// key while its lease runs: a node that crashes, or restarts without
// persistence, must stay down at least as long as the longest TTL in use
// before it rejoins (the delayed restart of the Redlock description). A
// node that restarts empty at once can give a second holder the quorum it
// no longer remembers: with five nodes, if a holder got exactly three and
// one of them comes back empty while the two others that missed the grant
// are up again, a contender gets three. A restarted minority is harmless
// while the others that granted the key still keep it.
//
// What it does not guarantee is what no lease can: the holder can pause
// (GC, a stopped VM, a slow network) past the end of its lease and act on
// a lock it no longer has. Martin Kleppmann's critique ("How to do
// distributed locking", 2016) is that Redlock's safety rests on these
// timing assumptions — bounded network delay, bounded pauses, clocks that
// do not jump — which an asynchronous system cannot promise, and that a
// lock for correctness needs fencing tokens, which plain Redlock has none
// of. antirez's reply ("Is Redlock safe?") accepts the clock assumption
// (use a monotonic time source, avoid clock steps) and argues that the
// pause problem is shared by every lease-based lock. Both points stand
// here: the quorum makes the lease survive the loss or failover of a
// minority of servers, and the fencing token, checked by the storage, is
// what keeps data correct when the timing assumptions break. A Redlock
// costs more round trips than a single server (a grant is one round trip
// to every node at once, plus one more when the nodes' tokens differ), and
// buys availability, not a stronger safety proof.
package lock
