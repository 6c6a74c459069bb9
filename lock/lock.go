package lock

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	// ErrNotObtained is returned by Obtain when the lock is held by another
	// holder and the retry strategy gave up, or when ctx ended first (then
	// the error also matches ctx.Err()).
	ErrNotObtained = errors.New("lock: not obtained")

	// ErrNotHeld is returned by Release and Refresh when the lock no longer
	// carries this holder's token. The error they return is ErrExpired or
	// ErrTaken, which say why; both match ErrNotHeld with errors.Is. A
	// second Release of a lock it already released returns an error that
	// matches ErrNotHeld only.
	ErrNotHeld = errors.New("lock: not held")

	// ErrExpired is returned by Release and Refresh when the lock's key is
	// gone: the lease ran out (or the key was deleted, or an empty restart
	// lost it) and no one holds it now. It matches ErrNotHeld.
	ErrExpired error = &notHeldError{"lock: not held: expired"}

	// ErrTaken is returned by Release and Refresh when the lock's key
	// carries another holder's token: the lease ran out and the key was
	// granted again. Writes made under this lock may have overlapped the
	// next holder's; only fencing tokens sort them out. It matches
	// ErrNotHeld.
	ErrTaken error = &notHeldError{"lock: not held: taken by another holder"}

	// errReleased is returned by a second Release of one lock.
	errReleased = fmt.Errorf("%w: already released", ErrNotHeld)

	// ErrLost is the cause of a Hold context cancelled because the watchdog
	// found the lock gone or could not renew it before the lease ran out.
	ErrLost = errors.New("lock: lost while held")

	// ErrUnavailable wraps network, connection and timeout errors, and Redis
	// replies that mean the server cannot serve now (LOADING, READONLY,
	// CLUSTERDOWN, ...). The original error stays reachable with errors.As.
	// A Redlock returns it when too few nodes answered to reach or refuse a
	// quorum; the message says how many did.
	ErrUnavailable = errors.New("lock: redis unavailable")

	// ErrInvalid is returned for an empty key, a key with a brace, a TTL
	// below one millisecond, a Redlock without nodes, and a Redlock's lock
	// passed to Client.ReleaseMany.
	ErrInvalid = errors.New("lock: invalid argument")
)

// notHeldError is the type of ErrExpired and ErrTaken: each is itself and
// also ErrNotHeld, so that callers who do not care why keep working.
type notHeldError struct{ msg string }

func (e *notHeldError) Error() string { return e.msg }

// Is reports whether target is ErrNotHeld; errors.Is checks identity first.
func (e *notHeldError) Is(target error) bool { return target == ErrNotHeld }

// notHeld turns the reply of release.lua or refresh.lua into an error: nil
// for 1, ErrTaken for 0, ErrExpired for -1.
func notHeld(n int64) error {
	switch {
	case n > 0:
		return nil
	case n == 0:
		return ErrTaken
	default:
		return ErrExpired
	}
}

var (
	//go:embed obtain.lua
	obtainSrc string
	//go:embed obtain_many.lua
	obtainManySrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed release_many.lua
	releaseManySrc string
	//go:embed tokens.lua
	tokensSrc string
	//go:embed refresh.lua
	refreshSrc string
	//go:embed pttl.lua
	pttlSrc string
	//go:embed raise_fence.lua
	raiseFenceSrc string

	obtainScript      = newScript(obtainSrc)
	obtainManyScript  = newScript(tokensSrc + obtainManySrc)
	releaseScript     = newScript(releaseSrc)
	releaseManyScript = newScript(tokensSrc + releaseManySrc)
	refreshScript     = newScript(refreshSrc)
	pttlScript        = newScript(pttlSrc)
	raiseFenceScript  = newScript(raiseFenceSrc)
)

// script is a Lua script with its source at hand, for the EVAL fallback of
// pipelines (redis.Script.Run does it for single calls only).
type script struct {
	*redis.Script
	src string
}

func newScript(src string) script { return script{redis.NewScript(src), src} }

// Defaults of Options.
const (
	// DefaultPrefix is the default of Options.Prefix.
	DefaultPrefix = "erpsync:lock:"
	// DefaultFenceTTL is the default of Options.FenceTTL.
	DefaultFenceTTL = time.Hour
	// DefaultTimeout is the default of Options.Timeout.
	DefaultTimeout = 3 * time.Second
)

// tokenBytes is the number of random bytes in a lock token.
const tokenBytes = 24

// Options configure a Client. The zero value is valid.
type Options struct {
	// Prefix is put before every Redis key. Defaults to "erpsync:lock:".
	Prefix string

	// FenceTTL is how long a per-key fence counter is kept after its last
	// grant: those of a Client over a Ring or any other client that may
	// shard keys of one slot apart. It bounds memory to the keys locked
	// within FenceTTL. A counter never expires before the lease it was
	// granted with. Once it expired, the next token comes from the server
	// clock, so FenceTTL is also the largest backward step of that clock
	// that fencing survives there. A Client on one server or on a Redis
	// Cluster, and a Redlock, share one counter per server or per hash
	// slot, kept without expiry, and ignore it. Defaults to one hour.
	FenceTTL time.Duration

	// Timeout is the deadline of every Redis call whose ctx has none. It
	// bounds the wait for a pool connection, and a call's reads and writes
	// when the go-redis client has ContextTimeoutEnabled; otherwise its
	// ReadTimeout and WriteTimeout (3 s by default) do. Defaults to 3 s.
	Timeout time.Duration

	// NodeTimeout bounds each call of a Redlock to one of its nodes, so
	// that a node that hangs costs an attempt no more than that. A Client
	// ignores it. Defaults to ttl/10 for a lease of ttl, at most a second
	// and never less than 1 ms: a call decides at its quorum, so the bound
	// only matters when a quorum needs the slow node.
	NodeTimeout time.Duration

	// Hooks receive events for metrics and logs. May be nil.
	Hooks *Hooks
}

// Hooks are called synchronously on lock events, so they must be cheap and
// must not call back into the lock. Every field is optional.
type Hooks struct {
	// Obtained is called when Obtain or ObtainMany granted key, with the
	// time spent since the call began.
	Obtained func(key string, wait time.Duration)
	// Contended is called each time an attempt found key held.
	Contended func(key string)
	// NotObtained is called when Obtain or ObtainMany gave key up: the
	// retry strategy was exhausted or ctx ended. Redis failures are
	// returned as errors and do not call it.
	NotObtained func(key string)
	// Lost is called once when a Hold context is cancelled with ErrLost.
	Lost func(key string, err error)
	// RenewFailed is called when a watchdog renewal failed for a reason
	// other than the lock being gone; the watchdog keeps trying until the
	// lease runs out.
	RenewFailed func(key string, err error)
}

// Client obtains locks in one Redis deployment. It is safe for concurrent
// use.
type Client struct {
	rdb  redis.UniversalClient
	opt  Options
	hook Hooks
	// group tells how ObtainMany and ReleaseMany split keys into script
	// calls, and which fence counter a key uses; see groupKeys and
	// counter.
	group grouping
	// buckets, on a Redis Cluster, puts each key's lock in one of that
	// many hash slots (see bucketTag); 0 gives each key its own tag.
	buckets int
	// serverCounter is the fence counter of every key on a single server,
	// and serverEpoch its epoch counter.
	serverCounter, serverEpoch string
	// grants and releases coalesce concurrent Obtain and Release calls
	// (and a Redlock's calls to this node) into batches.
	grants, releases batcher
}

// New returns a Client that keeps its locks in rdb. opt may be nil; it is
// copied, and its zero fields get their defaults.
func New(rdb redis.UniversalClient, opt *Options) *Client {
	o, hook := opt.withDefaults()
	c := &Client{rdb: rdb, opt: o, hook: hook, group: groupingOf(rdb)}
	if c.group == bySlot {
		c.buckets = ClusterBuckets
	}
	c.serverCounter = o.Prefix + serverCounterName
	c.serverEpoch = c.serverCounter + epochSuffix
	c.grants.send = c.sendGrants
	c.releases.send = c.sendReleases
	if o.Hooks != nil {
		c.opt.Hooks = &c.hook
	}
	return c
}

// withDefaults returns a copy of opt with its zero fields defaulted, and a
// copy of its hooks.
func (opt *Options) withDefaults() (Options, Hooks) {
	var o Options
	if opt != nil {
		o = *opt
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.FenceTTL <= 0 {
		o.FenceTTL = DefaultFenceTTL
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	var h Hooks
	if o.Hooks != nil {
		h = *o.Hooks
	}
	return o, h
}

// ClusterBuckets is the number of hash slots a Client on a Redis Cluster
// puts its lock keys in: each key's lock is Prefix + "{T}" + key, T the
// tag of one of ClusterBuckets slots spread evenly over the 16384 (see
// bucketTag), so that ObtainMany and ReleaseMany send a chunk of 500 keys
// in about 64 script calls instead of about 500 (one per key's own slot),
// while the keys still spread evenly over masters that split the slots
// evenly (with three, 22, 21 and 21 buckets).
const ClusterBuckets = 64

// lockKey returns the Redis key of key's lock. The braces make key the
// hash tag, so that a Redis Cluster puts every key of one lock in one
// slot; on a cluster, the tag is that of key's bucket (see
// ClusterBuckets).
func (c *Client) lockKey(key string) string {
	if c.buckets > 0 {
		return c.opt.Prefix + "{" + bucketTag(key, c.buckets) + "}" + key
	}
	return c.opt.Prefix + "{" + key + "}"
}

// bucketTag returns the hash tag of key's bucket among n: a tag of the
// slot that starts the bucket's share of the 16384, so that n buckets
// spread evenly over masters that split the slots evenly.
func bucketTag(key string, n int) string {
	b := int(crc16(key)) % n
	return slotTag(uint16(b * 16384 / n))
}

// Names of the fence counters, after the Prefix. See counter.
const (
	// fenceSuffix follows the lock key in a per-key counter's name.
	fenceSuffix = ":fence"
	// serverCounterName is the one counter of a single server.
	serverCounterName = "server" + fenceSuffix
	// epochSuffix follows a shared counter's name in its epoch counter's.
	epochSuffix = ":epoch"
)

// IsCounter reports whether the Redis key k is one of the fence counters
// that a Client or a Redlock keeps beside its locks (a shared counter, its
// epoch counter, or a key's own), rather than a lock key.
func IsCounter(k string) bool {
	return strings.HasSuffix(k, fenceSuffix) || strings.HasSuffix(k, fenceSuffix+epochSuffix)
}

// counter returns the fence counter of the lock key rkey, its epoch
// counter ("" for none) and its TTL, 0 for none. A key's grants all go
// through the same counter, so that its tokens strictly increase:
//
//   - a single server (*redis.Client, Sentinel included) has one counter,
//     Prefix + "server:fence", shared by all keys and kept without expiry;
//   - a Redis Cluster has one per hash slot, Prefix + "slot{T}:fence",
//     where T is a tag that hashes to that slot (slotTag), also without
//     expiry: at most 16384 keys per Prefix (a Redlock's nodes too, see
//     Redlock.Obtain);
//   - any other client (a Ring shards by hash tag, not by slot) keeps one
//     counter per key, rkey + ":fence", for FenceTTL after its last grant.
//
// A shared counter lets ObtainMany read and write one counter per script
// call instead of one per key, and a single Obtain move a counter that
// exists instead of writing a new key with a TTL. A shared counter also has
// an epoch counter, its name + ":epoch", from which grants take their
// tokens with one INCR, reading the clock and writing the shared counter
// only when an epoch ends (see obtain.lua).
func (c *Client) counter(rkey string, ttl time.Duration) (counter, epoch string, counterTTL time.Duration) {
	switch c.group {
	case oneGroup:
		return c.serverCounter, c.serverEpoch, 0
	case bySlot:
		ck := slotCounter(c.opt.Prefix, rkey)
		return ck, ck + epochSuffix, 0
	default:
		return rkey + fenceSuffix, "", c.fenceTTL(ttl)
	}
}

// grant is one key to grant: the keys and arguments of obtain.lua, and
// its entry in a call of obtain_many.lua.
type grant struct {
	// keys are obtain.lua's: lock key, fence counter key, and its epoch
	// counter key ("" for none; see keyList).
	keys [3]string
	// args are obtain.lua's: token, lease TTL in ms, fence counter TTL in
	// ms (0: none), and for a Redlock (step > 0) a clock step and a
	// proposed floor in µs (see argv).
	args [5]any
	// ttl, counterTTL (ms), step and proposed (µs, 0: none) are the same
	// as numbers.
	ttl, counterTTL, step, proposed int64
}

// newGrant draws a token and returns the call that grants the lock key
// rkey for ttl, with the fence counter counterKey kept for counterTTL
// after the grant, or without expiry when it is 0, and its epoch counter
// epochKey ("" for none).
func newGrant(rkey, counterKey, epochKey string, ttl, counterTTL time.Duration) (*grant, error) {
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	return makeGrant(rkey, counterKey, epochKey, token, ttl.Milliseconds(), counterTTL.Milliseconds()), nil
}

func makeGrant(rkey, counterKey, epochKey, token string, ttl, counterTTL int64) *grant {
	g := grantOf(rkey, counterKey, epochKey, token, ttl, ttl, counterTTL)
	return &g
}

// grantOf is the grant of makeGrant, with the token and the TTL as
// obtain.lua's arguments given boxed.
func grantOf(rkey, counterKey, epochKey string, tokenArg, ttlArg any, ttl, counterTTL int64) grant {
	return grant{
		keys: [3]string{rkey, counterKey, epochKey},
		args: [5]any{tokenArg, ttlArg, counterTTL},
		ttl:  ttl, counterTTL: counterTTL,
	}
}

// makeGrants returns the grants of the lock keys rkeys with one token, for
// ttl ms, each with the fence counter, epoch counter and counter TTL (ms)
// that counter gives its key: one allocation for all of them, and the
// token and TTL boxed once, as a batch of 500 keys in a backfill's chunk
// is granted many times a second.
func makeGrants(rkeys []string, counter func(rkey string) (string, string, int64), token string, ttl int64) []*grant {
	block := make([]grant, len(rkeys))
	gs := make([]*grant, len(rkeys))
	tokenArg, ttlArg := any(token), any(ttl)
	for i, rk := range rkeys {
		ck, ek, cttl := counter(rk)
		block[i] = grantOf(rk, ck, ek, tokenArg, ttlArg, ttl, cttl)
		gs[i] = &block[i]
	}
	return gs
}

// withFloor returns a copy of g that rounds the clock up to step and
// proposes floor (see obtain.lua): one Redlock attempt.
func (g *grant) withFloor(step, floor int64) *grant {
	h := *g
	h.args[3], h.args[4] = step, floor
	h.keys[2] = "" // a Redlock's counters have no epochs
	h.step, h.proposed = step, floor
	return &h
}

// keyList returns obtain.lua's keys: the epoch counter's only if there is
// one.
func (g *grant) keyList() []string {
	if g.keys[2] == "" {
		return g.keys[:2]
	}
	return g.keys[:]
}

// argv returns obtain.lua's arguments: the step and floor only with a
// step.
func (g *grant) argv() []any {
	if g.step > 0 {
		return g.args[:]
	}
	return g.args[:3]
}

// token returns the grant's token.
func (g *grant) token() string { return g.args[0].(string) }

// slotCounter returns the fence counter of the hash slot of the lock key
// rkey under prefix: Prefix + "slot{T}:fence", T the slot's tag.
func slotCounter(prefix, rkey string) string {
	return prefix + "slot{" + slotTag(slot(rkey)) + "}" + fenceSuffix
}

// lock returns the Lock that g granted with fence, its lease counting from
// sent.
func (g *grant) lock(b backend, key string, fence int64, ttl time.Duration, sent time.Time) *Lock {
	return newLock(b, key, g.keys[0], g.token(), g.args[0], fence, ttl, sent)
}

// ObtainOptions tune one Obtain call.
type ObtainOptions struct {
	// Retry says how long to wait between attempts while the lock is held
	// by another. nil tries once.
	Retry RetryStrategy

	// FenceOnDemand grants the lock without its fencing token: one plain
	// SET NX PX instead of a script that also makes the token, and not
	// coalesced with other grants. Lock.Fence then returns 0 until
	// Lock.FetchFence got a token, which it hands out only while the lock
	// is still held: as safe as a token made with the grant, at one round
	// trip more for a caller that needs it, and none for one that does
	// not. A Redlock ignores it: its grants always carry their token.
	FenceOnDemand bool
}

// Obtain tries to grant key to the caller for ttl. It returns ErrNotObtained
// when key is held by another and opt.Retry gave up. It retries on
// contention only, sleeping as opt.Retry says, and never past ctx: when ctx
// ends before a grant, the error matches both ErrNotObtained and ctx.Err().
// A Redis failure ends it at once with an error matching ErrUnavailable.
func (c *Client) Obtain(ctx context.Context, key string, ttl time.Duration, opt *ObtainOptions) (*Lock, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	rkey := c.lockKey(key)
	if opt != nil && opt.FenceOnDemand {
		return c.obtainPlain(ctx, key, rkey, ttl, opt)
	}
	ck, ek, cttl := c.counter(rkey, ttl)
	g, err := newGrant(rkey, ck, ek, ttl, cttl)
	if err != nil {
		return nil, err
	}
	return obtain(ctx, &c.hook, key, opt, func() (int64, time.Time, error) {
		sent := time.Now()
		fence, err := c.obtainOne(ctx, g)
		return fence, sent, attemptErr(ctx, err, fence > 0)
	}, func(fence int64, sent time.Time) *Lock { return g.lock(c, key, fence, ttl, sent) })
}

// attemptErr is what one grant call of a Client, which granted or not or
// failed with err, means to obtain: nil, errContended, ctx's error when it
// ended, or err in this package's terms.
func attemptErr(ctx context.Context, err error, granted bool) error {
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return translate(ctx, "obtain", err)
	case !granted:
		return errContended
	}
	return nil
}

// obtainPlain is Obtain with FenceOnDemand: the grant is a SET NX PX.
func (c *Client) obtainPlain(ctx context.Context, key, rkey string, ttl time.Duration, opt *ObtainOptions) (*Lock, error) {
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	return obtain(ctx, &c.hook, key, opt, func() (int64, time.Time, error) {
		sent := time.Now()
		cctx, cancel := c.callContext(ctx, time.Time{})
		ok, err := c.rdb.SetNX(cctx, rkey, token, ttl).Result()
		cancel()
		return 0, sent, attemptErr(ctx, err, ok)
	}, func(_ int64, sent time.Time) *Lock { return newLock(c, key, rkey, token, nil, 0, ttl, sent) })
}

// obtain runs attempt until it grants the lock, opt's retry strategy gives
// up, or ctx ends. attempt returns the fence and the time the lease counts
// from, errContended when another holds the key, or another error, which
// ends it at once. Client and Redlock share it.
func obtain(ctx context.Context, h *Hooks, key string, opt *ObtainOptions, attempt func() (int64, time.Time, error), grant func(int64, time.Time) *Lock) (*Lock, error) {
	var retry RetryStrategy
	if opt != nil {
		retry = opt.Retry
	}
	if retry == nil {
		retry = NoRetry()
	}
	notObtained := func() {
		if h.NotObtained != nil {
			h.NotObtained(key)
		}
	}
	start := time.Now()
	var timer *time.Timer
	for {
		fence, sent, err := attempt()
		if err == nil {
			if h.Obtained != nil {
				h.Obtained(key, time.Since(start))
			}
			return grant(fence, sent), nil
		}
		if ctx.Err() != nil {
			notObtained()
			return nil, notObtainedCtx(ctx)
		}
		if err != errContended {
			return nil, err
		}
		if h.Contended != nil {
			h.Contended(key)
		}
		backoff := retry.NextBackoff()
		if backoff <= 0 {
			notObtained()
			return nil, ErrNotObtained
		}
		if timer == nil {
			timer = time.NewTimer(backoff)
			defer timer.Stop()
		} else {
			timer.Reset(backoff)
		}
		select {
		case <-ctx.Done():
			notObtained()
			return nil, notObtainedCtx(ctx)
		case <-timer.C:
		}
	}
}

func (c *Client) notObtained(key string) {
	if c.hook.NotObtained != nil {
		c.hook.NotObtained(key)
	}
}

// notObtainedCtx returns an error matching ErrNotObtained, ctx.Err() and
// the cause of ctx.
func notObtainedCtx(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause != nil && cause != err {
		return fmt.Errorf("%w: %w (%w)", ErrNotObtained, err, cause)
	}
	return fmt.Errorf("%w: %w", ErrNotObtained, err)
}

// fenceTTL returns the TTL of a fence counter granted with a lease of ttl.
func (c *Client) fenceTTL(ttl time.Duration) time.Duration { return fenceTTL(&c.opt, ttl) }

func fenceTTL(o *Options, ttl time.Duration) time.Duration { return max(o.FenceTTL, ttl) }

// run runs script with a deadline: ctx's, or else the Client's Timeout.
func (c *Client) run(ctx context.Context, s script, keys []string, args []any) *redis.Cmd {
	return c.runUntil(ctx, time.Time{}, s, keys, args)
}

// runUntil runs script with a deadline: limit or ctx's, whichever is
// earlier; with a zero limit and no deadline in ctx, the Client's Timeout.
func (c *Client) runUntil(ctx context.Context, limit time.Time, s script, keys []string, args []any) *redis.Cmd {
	ctx, cancel := c.callContext(ctx, limit)
	defer cancel()
	return s.Run(ctx, c.rdb, keys, args...)
}

// callContext bounds ctx by limit, or by the Client's Timeout when limit is
// zero and ctx has no deadline.
//
// The Timeout is a real timer (context.WithTimeout), not only a deadline
// for go-redis to read: from 463938c to aa7785a it was the latter, which
// saved 2 of a lone Obtain and Release's allocations but made a pair slower
// on these machines. Arming a timer wakes the Go runtime's network poller
// thread (runtime.wakeNetPoller), and a reply that finds that thread awake
// is handed over sooner than one that must wake an idle virtual CPU: in
// four runs that interleaved the two ways in blocks of 20 pairs (one
// goroutine, one server), the timer gave 7-26% more pairs per second. The
// timer also bounds the wait for a pool connection, which go-redis'
// PoolTimeout alone did before.
func (c *Client) callContext(ctx context.Context, limit time.Time) (context.Context, context.CancelFunc) {
	if !limit.IsZero() {
		return context.WithDeadline(ctx, limit)
	}
	if _, ok := ctx.Deadline(); ok {
		return ctx, noCancel
	}
	return context.WithTimeout(ctx, c.opt.Timeout)
}

func noCancel() {}

// unavailablePrefixes are Redis error replies that say the server cannot
// serve now rather than that the request is wrong.
var unavailablePrefixes = []string{
	"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN",
	"NOREPLICAS", "BUSY", "ERR max number of clients",
}

// translate turns a go-redis error of operation op into this package's
// terms. An error while the caller's ctx is done is returned wrapped as is;
// a Redis error reply is wrapped, or marked ErrUnavailable when it means the
// server cannot serve now; everything else (network, timeouts, a closed
// client) is marked ErrUnavailable.
func translate(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("lock: %s: %w", op, err)
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		for _, p := range unavailablePrefixes {
			if redis.HasErrorPrefix(err, p) {
				return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
			}
		}
		return fmt.Errorf("lock: %s: %w", op, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
}

func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalid)
	}
	if strings.ContainsAny(key, "{}") {
		return fmt.Errorf("%w: key %q has a brace", ErrInvalid, key)
	}
	return nil
}

func checkTTL(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("%w: ttl %v below 1ms", ErrInvalid, ttl)
	}
	return nil
}

// newToken returns a random token of tokenBytes bytes, base64url encoded.
func newToken() (string, error) {
	var buf [tokenBytes]byte
	if _, err := rand.Read(buf[:]); err != nil {
		return "", fmt.Errorf("lock: read random token: %w", err)
	}
	var out [(tokenBytes*8 + 5) / 6]byte
	base64.RawURLEncoding.Encode(out[:], buf[:])
	return string(out[:]), nil
}

// backend is where a Lock was granted and what its methods call: a Client
// (one Redis deployment) or a Redlock (a quorum of independent masters).
type backend interface {
	// refresh sets l's lease to ttl if l still holds its key, under limit
	// unless zero (see Client.runUntil), and returns the time the new
	// lease counts from. A lock no longer held gives ErrExpired or
	// ErrTaken.
	refresh(ctx context.Context, limit time.Time, l *Lock, ttl time.Duration) (time.Time, error)
	// release deletes l's key where it still carries l's token.
	release(ctx context.Context, l *Lock) error
	// pttl returns the time left on l's lease, 0 when not held.
	pttl(ctx context.Context, l *Lock) (time.Duration, error)
	// fence returns a fencing token for l, granted without one, if l
	// still holds its key; else ErrExpired or ErrTaken.
	fence(ctx context.Context, l *Lock) (int64, error)
	// hooks returns the hooks to call; never nil.
	hooks() *Hooks
	// timeout is Options.Timeout.
	timeout() time.Duration
}

func (c *Client) hooks() *Hooks          { return &c.hook }
func (c *Client) timeout() time.Duration { return c.opt.Timeout }

func (c *Client) pttl(ctx context.Context, l *Lock) (time.Duration, error) {
	ms, err := c.run(ctx, pttlScript, l.keys[:], l.args[:]).Int64()
	if err != nil {
		return 0, translate(ctx, "ttl", err)
	}
	if ms < 0 {
		return 0, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func (c *Client) refresh(ctx context.Context, limit time.Time, l *Lock, ttl time.Duration) (time.Time, error) {
	sent := time.Now()
	n, err := c.runUntil(ctx, limit, refreshScript, []string{l.rkey}, []any{l.token, ttl.Milliseconds()}).Int64()
	if err != nil {
		return sent, translate(ctx, "refresh", err)
	}
	return sent, notHeld(n)
}

func (c *Client) release(ctx context.Context, l *Lock) error {
	n, err := c.releaseOne(ctx, l.keys[:], l.args[:])
	if err != nil {
		return translate(ctx, "release", err)
	}
	return notHeld(n)
}

// fence hands l, granted without a fencing token, one while it still holds
// its key: obtain.lua with a lease TTL of 0.
func (c *Client) fence(ctx context.Context, l *Lock) (int64, error) {
	l.mu.Lock()
	ttl := l.ttl
	l.mu.Unlock()
	ck, ek, cttl := c.counter(l.rkey, ttl)
	g := makeGrant(l.rkey, ck, ek, l.token, 0, cttl.Milliseconds())
	n, err := c.run(ctx, obtainScript, g.keyList(), g.argv()).Int64()
	if err != nil {
		return 0, translate(ctx, "fence", err)
	}
	if n <= 0 {
		return 0, notHeld(n)
	}
	return n, nil
}

// Lock is one grant of a key. Its methods are safe for concurrent use. A
// nil *Lock (what a failed Obtain returns) holds nothing: Release, Refresh,
// TTL and FetchFence return ErrNotHeld, Hold returns a cancelled context,
// Fence 0 and Key and Token "".
type Lock struct {
	b     backend
	key   string
	rkey  string
	token string
	// fence is the grant's fencing token; 0 until FetchFence got one for a
	// grant made with FenceOnDemand.
	fence atomic.Int64
	// keys and args are rkey and token as the release, refresh and TTL
	// scripts take them, made once.
	keys [1]string
	args [1]any

	mu sync.Mutex
	// ttl is the lease length last set by Obtain or Refresh.
	ttl time.Duration
	// validUntil is the local time before which the lease surely still
	// runs: the send time of the last successful grant or refresh plus its
	// ttl less a drift margin.
	validUntil time.Time
	// released is set when Release or ReleaseMany began; deleted when
	// Release deleted the key.
	released, deleted bool
	hold              *holder
	// calls are a Redlock lock's last calls to its nodes (the grant's, a
	// renewal's, the release's), those to nodes slower than the quorum
	// perhaps still in flight; nil for a Client's lock.
	calls *fanout
}

// newLock returns the Lock of a grant. tokenArg is token as an any, or
// nil to box it here.
func newLock(b backend, key, rkey, token string, tokenArg any, fence int64, ttl time.Duration, sent time.Time) *Lock {
	return initLock(new(Lock), b, key, rkey, token, tokenArg, fence, ttl, sent)
}

// initLock makes l, a zero Lock, newLock's, and returns it: ObtainMany
// makes the Locks of a batch in one allocation.
func initLock(l *Lock, b backend, key, rkey, token string, tokenArg any, fence int64, ttl time.Duration, sent time.Time) *Lock {
	if tokenArg == nil {
		tokenArg = token
	}
	l.b, l.key, l.rkey, l.token = b, key, rkey, token
	l.keys, l.args = [1]string{rkey}, [1]any{tokenArg}
	l.ttl, l.validUntil = ttl, sent.Add(validity(ttl))
	l.fence.Store(fence)
	return l
}

// validity is how long a lease of ttl surely runs after its request was
// sent, allowing for clock rate drift between client and server: ttl less
// 1% and 2 ms, as Redlock does.
func validity(ttl time.Duration) time.Duration {
	return max(ttl-ttl/100-2*time.Millisecond, 0)
}

// Key returns the key the lock was obtained for, without prefix.
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Token returns the random token that identifies this holder in Redis.
func (l *Lock) Token() string {
	if l == nil {
		return ""
	}
	return l.token
}

// Fence returns the fencing token of this grant. Tokens of one key strictly
// increase from grant to grant; storage should refuse a write that carries
// a smaller token than one it has already seen. A lock obtained with
// FenceOnDemand has 0 until FetchFence got its token.
func (l *Lock) Fence() int64 {
	if l == nil {
		return 0
	}
	return l.fence.Load()
}

// FetchFence returns the fencing token of this grant: Fence, or for a lock
// obtained with FenceOnDemand and no token yet, a token that Redis hands
// out only while the lock still carries this lock's token. Every holder of
// the key after this one gets a larger token, as with tokens made by the
// grant. When the lock is no longer held it returns ErrExpired or ErrTaken
// (and a running Hold context is cancelled with ErrLost), after Release
// an error matching ErrNotHeld, and on a Redis failure an error matching
// ErrUnavailable; FetchFence may then be called again.
func (l *Lock) FetchFence(ctx context.Context) (int64, error) {
	if l == nil {
		return 0, ErrNotHeld
	}
	if f := l.fence.Load(); f > 0 {
		return f, nil
	}
	l.mu.Lock()
	released, h := l.released, l.hold
	l.mu.Unlock()
	if released {
		return 0, errReleased
	}
	f, err := l.b.fence(ctx, l)
	if err != nil {
		if h != nil && errors.Is(err, ErrNotHeld) {
			l.lose(h, err)
		}
		return 0, err
	}
	// Of two calls at once, the first token stored stands: each is
	// smaller than any later holder's.
	if !l.fence.CompareAndSwap(0, f) {
		f = l.fence.Load()
	}
	return f, nil
}

// String returns key and fence, for logs.
func (l *Lock) String() string {
	if l == nil {
		return "<nil>"
	}
	return l.key + "#" + strconv.FormatInt(l.Fence(), 10)
}

// TTL returns the time left on the lease, or 0 when the lock is no longer
// held with this token. For a Redlock lock it is the time a quorum of nodes
// still holds it: the quorum-th longest of their TTLs.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if l == nil {
		return 0, ErrNotHeld
	}
	return l.b.pttl(ctx, l)
}

// Refresh sets the lease to ttl from now, if the lock still carries this
// token; otherwise it returns ErrExpired or ErrTaken, which match
// ErrNotHeld (and a running Hold context is cancelled with ErrLost). Later
// watchdog renewals use the new ttl. A Redlock lock needs a quorum of nodes
// to extend it.
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if l == nil {
		return ErrNotHeld
	}
	if err := checkTTL(ttl); err != nil {
		return err
	}
	err := l.refresh(ctx, time.Time{}, ttl)
	if errors.Is(err, ErrNotHeld) {
		l.mu.Lock()
		h := l.hold
		l.mu.Unlock()
		if h != nil {
			l.lose(h, err)
		}
	}
	return err
}

// refresh renews the lease, under limit unless zero (see runUntil), and on
// success moves the lease's local deadline.
func (l *Lock) refresh(ctx context.Context, limit time.Time, ttl time.Duration) error {
	sent, err := l.b.refresh(ctx, limit, l, ttl)
	if err != nil {
		return err
	}
	l.extended(sent, ttl)
	return nil
}

// Release deletes the lock if it still carries this token and stops a
// running watchdog (its Hold context ends with context.Canceled). When the
// lock had expired it returns ErrExpired (the key is free) or ErrTaken
// (another holder has it, and keeps it), both matching ErrNotHeld. A Redis
// failure gives an error matching ErrUnavailable, and Release may be
// called again. A Redlock lock is deleted on every node that still has it,
// and Release succeeds when a quorum of nodes had it.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil {
		return ErrNotHeld
	}
	l.stop()
	l.mu.Lock()
	deleted := l.deleted
	l.mu.Unlock()
	if deleted {
		return errReleased
	}
	if err := l.b.release(ctx, l); err != nil {
		return err
	}
	l.mu.Lock()
	l.deleted = true
	l.mu.Unlock()
	return nil
}
