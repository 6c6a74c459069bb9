package guarantee

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/proctest"
)

// sinkFaults are what an events feed's sink does wrong for a while, each
// the way a real one does: a webhook that answers a redirect, a RabbitMQ
// exchange that routes the relays' messages to no queue, a NATS stream
// whose max_msg_size refuses some events of a batch and takes the rest.
// None may lose an event or reorder a key's: an event the sink did not
// take stays undelivered until it does.
type sinkFaults struct {
	// Redirect is the status (301, 302, 303, 307 or 308) a webhook answers
	// to Redirects POSTs of the running relays, sending them to a place
	// that answers 200 to anything and keeps nothing; 0: none.
	Redirect, Redirects int
	// Unroute: the exchanges of the relays started while the fault lasts
	// are bound to the feed's with no binding ("none": a RabbitMQ
	// exchange without a queue) or a binding whose routing key is not the
	// entity's ("orders"); "": bound right.
	Unroute string
	// TooLarge: for a while after the last wave, the NATS stream's
	// max_msg_size refuses every event, then an event of a key, and takes
	// a later one (see startFaults).
	TooLarge bool
}

func (sf sinkFaults) String() string {
	var out []string
	if sf.Redirect != 0 {
		out = append(out, fmt.Sprintf("the webhook redirects %d POST(s) with a %d", sf.Redirects, sf.Redirect))
	}
	switch sf.Unroute {
	case "none":
		out = append(out, "the relays' exchanges route to no queue for a while")
	case "":
	default:
		out = append(out, fmt.Sprintf("the relays' exchanges are bound with routing key %s for a while", sf.Unroute))
	}
	if sf.TooLarge {
		out = append(out, "after the waves the stream refuses every event, then an earlier larger one of a key, for a while")
	}
	if len(out) == 0 {
		return ""
	}
	return ", " + strings.Join(out, ", ")
}

// genSinkFaults draws, from a generator of its own, the faults of an
// events feed's sink: each in about three feeds of four of its sink.
func genSinkFaults(seed uint64, ev *eventsSpec) {
	r := rand.New(rand.NewPCG(seed, 0x5171f))
	if r.IntN(4) == 0 {
		return
	}
	switch ev.Sink {
	case sinkWebhook:
		ev.Faults.Redirect = []int{301, 302, 303, 307, 308}[r.IntN(5)]
		ev.Faults.Redirects = 1 + r.IntN(2)
	case sinkRabbitMQ:
		ev.Faults.Unroute = []string{"none", "orders"}[r.IntN(2)]
	case sinkNATS:
		ev.Faults.TooLarge = true
	}
}

// faultState is a sink's faults as they run.
type faultState struct {
	mu        sync.Mutex
	redirects int      // POSTs redirected
	unrouted  []string // exchanges bound wrong
	lasting   bool     // Unroute and TooLarge hold
	end       chan struct{}
	done      chan struct{}
	endOnce   sync.Once
	waved     chan struct{} // closed when the last wave has settled
	wavedOnce sync.Once
	log       []string
}

// redirected answers a request to the place redirects send to (200, and
// nothing kept), and redirects a running relay's POST while the feed's
// Redirects last; it reports whether it answered.
func (s *sink) redirected(w http.ResponseWriter, r *http.Request, id string) bool {
	if strings.HasPrefix(r.URL.Path, "/elsewhere/") {
		w.WriteHeader(http.StatusOK)
		return true
	}
	sf, fs := s.ev.Faults, &s.faulty
	if sf.Redirect == 0 || strings.HasSuffix(id, "-once") || strings.HasSuffix(id, "-drain") {
		return false
	}
	fs.mu.Lock()
	do := fs.redirects < sf.Redirects
	if do {
		fs.redirects++
		fs.log = append(fs.log, fmt.Sprintf("relay %s's POST redirected with a %d", id, sf.Redirect))
	}
	fs.mu.Unlock()
	if do {
		http.Redirect(w, r, s.srv.URL+"/elsewhere/"+id, sf.Redirect)
	}
	return do
}

// faultExit reports whether res is a relay that a fault of the sink
// stopped: a redirect is a rejection (exit 1 with one line), and a
// `relay --once` exits 1 on a message the broker did not take.
func faultExit(res proctest.Result) bool {
	return res.Code == 1 && slices.ContainsFunc(faultLines, func(l string) bool { return strings.Contains(res.Out(), l) })
}

// faultLines are what the relay says when a fault of the sink fails a
// delivery.
var faultLines = []string{"a redirect is not followed", "did not take event", "has no queue for routing key"}

// bindRelay binds relay exchange x to the feed's: wrong while the feed's
// Unroute lasts, with every routing key otherwise.
func (s *sink) bindRelay(x string) error {
	fs := &s.faulty
	fs.mu.Lock()
	wrong := s.ev.Faults.Unroute != "" && fs.lasting
	if wrong {
		fs.unrouted = append(fs.unrouted, x)
	}
	fs.mu.Unlock()
	switch {
	case !wrong:
		return s.amqpCh.ExchangeBind(s.exchange, "#", x, false, nil)
	case s.ev.Faults.Unroute == "none":
		return nil
	}
	return s.amqpCh.ExchangeBind(s.exchange, s.ev.Faults.Unroute, x, false, nil)
}

// startFaults begins the faults that last a while, until the final
// drain at the latest. Before the relays start, the RabbitMQ exchanges
// are bound wrong, until 2 seconds after events were first pending. After
// the last wave has settled (so that the changes of the same keys that
// follow, records that leave and come back, pile up behind it), the NATS
// stream refuses every message (a max_msg_size of 1 byte) until the
// pending events can be split by size (splitKey); then its max_msg_size
// refuses an event and takes a later one of its key in the same batch; 3
// seconds later, or at the final drain when no key had such events, the
// limit goes.
func (s *sink) startFaults() {
	sf, fs := s.ev.Faults, &s.faulty
	fs.end, fs.done, fs.waved = make(chan struct{}), make(chan struct{}), make(chan struct{})
	if sf.Unroute == "" && !sf.TooLarge {
		close(fs.done)
		return
	}
	fs.lasting = true
	go func() {
		defer close(fs.done)
		defer s.undoFaults()
		if sf.Unroute != "" {
			if s.pending(0) == nil {
				return // ended
			}
			select {
			case <-fs.end:
			case <-time.After(2 * time.Second):
			}
			return
		}
		select {
		case <-fs.end:
			return
		case <-fs.waved:
		}
		s.setMaxMsgSize(1)
		for {
			evs := s.pending(20 * time.Millisecond)
			if evs == nil {
				return
			}
			if n, ok := splitKey(evs, s.ev.Batch); ok {
				s.setMaxMsgSize(int32(n))
				break
			}
		}
		select {
		case <-fs.end:
		case <-time.After(3 * time.Second):
		}
	}()
}

// settled tells the faults that the wave's settling when is over.
func (s *sink) settled(when string) {
	fs := &s.faulty
	if fs.waved != nil && when == fmt.Sprintf("after wave %d", len(s.f.sc.Waves)-1) {
		fs.wavedOnce.Do(func() { close(fs.waved) })
	}
}

// splitKey finds a size limit under which a relay that publishes a whole
// batch before it looks at the acknowledgements would have the stream
// store an event of a key before an earlier one that it refused: it
// follows such a relay over evs (the pending events in the relay's
// order), batch events at a time, each batch starting at the first event
// the previous one had refused.
func splitKey(evs []outbox.Pending, batch int) (int, bool) {
	for _, limit := range evs {
		limit := msgSize(limit)
		for s := 0; s < len(evs); {
			w := evs[s:min(len(evs), s+batch)]
			if reorders(w, limit) {
				return limit, true
			}
			r := slices.IndexFunc(w, func(p outbox.Pending) bool { return msgSize(p) > limit })
			if r == 0 {
				break // stuck: this batch again and again
			}
			if r < 0 {
				r = len(w)
			}
			s += r
		}
	}
	return 0, false
}

// reorders reports whether an event of w over limit has a later event of
// its key in w within it.
func reorders(w []outbox.Pending, limit int) bool {
	for i, e := range w {
		if msgSize(e) <= limit {
			continue
		}
		for _, later := range w[i+1:] {
			if later.Entity == e.Entity && later.Key == e.Key && msgSize(later) <= limit {
				return true
			}
		}
	}
	return false
}

// msgSize is the size of e's message as JetStream compares it with a
// stream's max_msg_size: its headers (Nats-Msg-Id) and its body.
func msgSize(e outbox.Pending) int {
	return len("NATS/1.0\r\n"+jetstream.MsgIDHeader+": \r\n\r\n") + len(e.ID) + len(e.Body)
}

// pending waits for pending events (polling every 20 ms, after a first
// wait of first) and returns up to 256 of them; nil when the faults
// ended first.
func (s *sink) pending(first time.Duration) []outbox.Pending {
	ob := s.f.w.st.Outbox()
	wait := first
	for {
		select {
		case <-s.faulty.end:
			return nil
		case <-time.After(wait):
		}
		wait = 20 * time.Millisecond
		if evs, err := ob.Pending(context.Background(), 256); err == nil && len(evs) > 0 {
			return evs
		}
	}
}

func (s *sink) setMaxMsgSize(n int32) {
	cfg := s.stream.CachedInfo().Config
	cfg.MaxMsgSize = n
	js := s.js()
	if js == nil {
		return
	}
	if _, err := js.UpdateStream(context.Background(), cfg); err != nil {
		s.f.t.Errorf("nats: max_msg_size %d: %v", n, err)
		return
	}
	s.faulty.mu.Lock()
	s.faulty.log = append(s.faulty.log, fmt.Sprintf("max_msg_size %d", n))
	s.faulty.mu.Unlock()
}

// undoFaults binds the exchanges bound wrong, and lifts the stream's
// max_msg_size.
func (s *sink) undoFaults() {
	fs := &s.faulty
	fs.mu.Lock()
	fs.lasting = false
	xs := fs.unrouted
	fs.mu.Unlock()
	if len(xs) > 0 {
		s.amqpMu.Lock()
		for _, x := range xs {
			if err := s.amqpCh.ExchangeBind(s.exchange, "#", x, false, nil); err != nil {
				s.f.t.Errorf("rabbitmq: bind %s: %v", x, err)
			}
		}
		s.amqpMu.Unlock()
		fs.mu.Lock()
		fs.log = append(fs.log, fmt.Sprintf("%d exchange(s) bound right", len(xs)))
		fs.mu.Unlock()
	}
	if s.ev.Faults.TooLarge && s.stream != nil {
		s.setMaxMsgSize(-1)
	}
}

// endFaults ends the faults that last (before the final drain) and logs
// what they did.
func (s *sink) endFaults() {
	fs := &s.faulty
	if fs.end == nil {
		return
	}
	fs.endOnce.Do(func() {
		close(fs.end)
		<-fs.done
		fs.mu.Lock()
		defer fs.mu.Unlock()
		if len(fs.log) > 0 {
			s.f.t.Logf("sink faults: %s", strings.Join(fs.log, "; "))
		}
	})
}

// js is the JetStream of the sink's NATS connection.
func (s *sink) js() jetstream.JetStream {
	js, err := jetstream.New(s.nc)
	if err != nil {
		s.f.t.Errorf("nats jetstream: %v", err)
		return nil
	}
	return js
}

// logFaulted logs how many deliveries of the relays (outs: their output)
// the sink's faults failed.
func (s *sink) logFaulted(outs []string) {
	n := 0
	for _, out := range outs {
		for _, l := range strings.Split(out, "\n") {
			if slices.ContainsFunc(faultLines, func(f string) bool { return strings.Contains(l, f) }) {
				n++
			}
		}
	}
	if n > 0 {
		s.f.t.Logf("the sink's faults failed %d deliveries", n)
	}
}
