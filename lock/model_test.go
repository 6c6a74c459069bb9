package lock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/lock"
)

// lockModel is who holds each key of a pool, as the lock's contract says:
// a key is granted only when free, and stays its grant's until that lock
// releases it or the key is lost; a release deletes only a key its lock
// still holds. fence is the highest fencing token each key was granted at.
type lockModel struct {
	holder map[string]*lock.Lock
	fence  map[string]int64
	tokens map[string]bool // every token a grant handed out
}

// TestLocksMatchAModel runs random sequences of grants and releases by
// three clients of one key prefix against a lockModel: ObtainMany of a few
// keys of a pool of eight (a key sometimes named twice), single Obtain,
// Release, ReleaseMany of locks held, lost or already released, in any
// order and sometimes one named twice, and keys lost (deleted from Redis,
// as a failover to a replica that had not received them loses them), so
// that a stale lock's key is held by a later grant when it is released.
// After every step Redis must hold exactly the model's keys, each with its
// holder's token. The locks of one ObtainMany share a token, which the
// release script must still tell apart from every other grant's.
func TestLocksMatchAModel(t *testing.T) {
	b := setup(t, nil)
	lockModelSweep(t, b.rdb, b.prefix, 40)
}

// The same on a Redis Cluster: a batch's keys spread over hash slots, one
// script call a slot, in one pipeline.
func TestLocksMatchAModelCluster(t *testing.T) {
	_, rdb := startCluster(t)
	lockModelSweep(t, rdb, randomPrefix(), 15)
}

// lockModelSweep runs the sequences of seeds 0 to seeds-1 on rdb.
func lockModelSweep(t *testing.T, rdb redis.UniversalClient, prefix string, seeds uint64) {
	clients := make([]*lock.Client, 3)
	for i := range clients {
		clients[i] = lock.New(rdb, &lock.Options{Prefix: prefix})
	}
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runLockModel(t, rdb, clients, fmt.Sprintf("s%d-", seed), rand.New(rand.NewPCG(seed, 17)))
		})
	}
}

func runLockModel(t *testing.T, rdb redis.UniversalClient, clients []*lock.Client, keyPrefix string, rng *rand.Rand) {
	ctx := context.Background()
	pool := make([]string, 8)
	for i := range pool {
		pool[i] = fmt.Sprintf("%sk%d", keyPrefix, i)
	}
	m := lockModel{holder: map[string]*lock.Lock{}, fence: map[string]int64{}, tokens: map[string]bool{}}
	granted := make([][]*lock.Lock, len(clients)) // every lock each client was granted
	grant := func(step int, c int, key string, l *lock.Lock) {
		t.Helper()
		if f := l.Fence(); f <= m.fence[key] {
			t.Fatalf("step %d: %s granted at fence %d, after %d", step, key, f, m.fence[key])
		}
		m.holder[key], m.fence[key] = l, l.Fence()
		granted[c] = append(granted[c], l)
	}
	pick := func(c int) []*lock.Lock {
		var ls []*lock.Lock
		for _, l := range granted[c] {
			if rng.IntN(3) == 0 {
				ls = append(ls, l)
			}
		}
		rng.Shuffle(len(ls), func(i, j int) { ls[i], ls[j] = ls[j], ls[i] })
		if len(ls) > 0 && rng.IntN(4) == 0 {
			ls = append(ls, ls[rng.IntN(len(ls))])
		}
		return ls
	}
	for step := range 60 {
		c := rng.IntN(len(clients))
		switch op := rng.IntN(10); {
		case op < 4: // ObtainMany
			keys := make([]string, 1+rng.IntN(6))
			for i := range keys {
				keys[i] = pool[rng.IntN(len(pool))]
			}
			locks, err := clients[c].ObtainMany(ctx, keys, time.Minute)
			if err != nil {
				t.Fatalf("step %d: ObtainMany %v: %v", step, keys, err)
			}
			token := ""
			for i, k := range keys {
				want := m.holder[k] == nil
				if (locks[i] != nil) != want {
					t.Fatalf("step %d: ObtainMany %v: %s granted %v, want %v (held by %v)", step, keys, k, locks[i] != nil, want, m.holder[k])
				}
				if locks[i] == nil {
					continue
				}
				if token == "" {
					token = locks[i].Token()
					if m.tokens[token] {
						t.Fatalf("step %d: ObtainMany handed out token %q again", step, token)
					}
					m.tokens[token] = true
				} else if locks[i].Token() != token {
					t.Fatalf("step %d: ObtainMany %v: tokens %q and %q, want one a call", step, keys, token, locks[i].Token())
				}
				grant(step, c, k, locks[i])
			}
		case op < 5: // Obtain
			k := pool[rng.IntN(len(pool))]
			l, err := clients[c].Obtain(ctx, k, time.Minute, nil)
			switch {
			case m.holder[k] != nil && !errors.Is(err, lock.ErrNotObtained):
				t.Fatalf("step %d: Obtain %s held by %v: %v, %v, want ErrNotObtained", step, k, m.holder[k], l, err)
			case m.holder[k] == nil && err != nil:
				t.Fatalf("step %d: Obtain %s, free: %v", step, k, err)
			case err == nil:
				if m.tokens[l.Token()] {
					t.Fatalf("step %d: Obtain handed out token %q again", step, l.Token())
				}
				m.tokens[l.Token()] = true
				grant(step, c, k, l)
			}
		case op < 8: // ReleaseMany
			ls := pick(c)
			want := 0
			for _, l := range ls {
				if m.holder[l.Key()] == l {
					delete(m.holder, l.Key())
				} else {
					want++
				}
			}
			notHeld, err := clients[c].ReleaseMany(ctx, ls)
			if err != nil || notHeld != want {
				t.Fatalf("step %d: ReleaseMany of %d locks: %d not held, %v; want %d", step, len(ls), notHeld, err, want)
			}
		case op < 9: // Release
			ls := pick(c)
			if len(ls) == 0 {
				continue
			}
			l := ls[0]
			err := l.Release(ctx)
			if m.holder[l.Key()] == l {
				delete(m.holder, l.Key())
				if err != nil {
					t.Fatalf("step %d: Release of %s, held: %v", step, l.Key(), err)
				}
			} else if !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("step %d: Release of %s, held by %v: %v, want ErrNotHeld", step, l.Key(), m.holder[l.Key()], err)
			}
		default: // a key lost
			k := pool[rng.IntN(len(pool))]
			if err := rdb.Del(ctx, lock.LockKey(clients[0], k)).Err(); err != nil {
				t.Fatal(err)
			}
			delete(m.holder, k)
		}
		for _, k := range pool {
			v, err := rdb.Get(ctx, lock.LockKey(clients[0], k)).Result()
			h := m.holder[k]
			switch {
			case h == nil && err == nil:
				t.Fatalf("step %d: %s holds %q in Redis, free in the model", step, k, v)
			case h != nil && (err != nil || v != h.Token()):
				t.Fatalf("step %d: %s holds %q (%v) in Redis, %q in the model", step, k, v, err, h.Token())
			}
		}
	}
}
