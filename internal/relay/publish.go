package relay

import (
	"context"

	"github.com/erpsync/erpsync/internal/outbox"
)

// publisher is a sink that sends one event at a time and learns later
// whether the broker took it: NATS JetStream and RabbitMQ.
type publisher interface {
	// publish sends e. The returned wait blocks until the broker took e
	// (nil) or did not (why); err says that e was not sent at all.
	publish(ctx context.Context, e outbox.Pending) (wait func(context.Context) error, err error)
}

// maxInFlight is the most events a publisher has out, unanswered, at
// once.
const maxInFlight = 1024

// deliverEach is the delivery loop of every per-event sink: it hands evs
// to p, in order, and returns how many of them, from the first, the broker
// took, and why it stopped there.
//
// Events of distinct keys are pipelined: each is published without
// waiting for the answers to those before it. An event whose key has an
// event in flight waits for that answer first, and nothing more is
// published once one answer is a failure: so no event is ever out while
// an earlier event of its key may fail, and a broker that refuses v2 of a
// key (too large, unroutable, not confirmed) has not been given v3. Events
// of other keys that were in flight are awaited; the broker may have taken
// some of them, after the failed one: they are not in the acknowledged
// prefix and go out again with the failed one, with the same ids (JetStream
// drops such a redelivery within its duplicate window; other consumers
// de-duplicate on the id), after their key's earlier events, so the order
// of each key holds.
func deliverEach(ctx context.Context, p publisher, evs []outbox.Pending) (int, error) {
	type flight struct {
		i    int
		wait func(context.Context) error
	}
	var out []flight          // in publish order
	busy := map[string]bool{} // keys with an event in flight
	took := make([]bool, len(evs))
	failed, ferr := len(evs), error(nil) // the first event not taken, and why
	settle := func() {
		f := out[0]
		out = out[1:]
		delete(busy, keyOf(evs[f.i]))
		if err := f.wait(ctx); err != nil {
			if f.i < failed {
				failed, ferr = f.i, err
			}
			return
		}
		took[f.i] = true
	}
	for i, e := range evs {
		k := keyOf(e)
		for failed == len(evs) && (busy[k] || len(out) >= maxInFlight) {
			settle()
		}
		if failed < len(evs) {
			break
		}
		wait, err := p.publish(ctx, e)
		if err != nil {
			failed, ferr = i, err
			break
		}
		out = append(out, flight{i: i, wait: wait})
		busy[k] = true
	}
	for len(out) > 0 {
		settle()
	}
	n := 0
	for n < len(evs) && took[n] {
		n++
	}
	return n, ferr
}

// keyOf is the identity of e's key: the order of its events is kept.
func keyOf(e outbox.Pending) string { return e.Entity + "\x00" + e.Key }
