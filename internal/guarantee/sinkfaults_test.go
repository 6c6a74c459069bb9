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
	// TooLarge: while the fault lasts, the NATS stream's max_msg_size is
	// the median size of the events pending when it begins.
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
		out = append(out, "the stream refuses the larger half of the events for a while")
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
// stopped (a redirect is a rejection: exit 1 with one line).
func faultExit(res proctest.Result) bool {
	return res.Code == 1 && strings.Contains(res.Out(), "a redirect is not followed")
}

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

// startFaults begins the faults that last a while: before the relays
// start, the RabbitMQ exchanges are bound wrong; once events are pending,
// the NATS stream's max_msg_size drops to the median size of their
// bodies, as the relay sends them. They end 2 seconds after events were
// first pending, or at endFaults.
func (s *sink) startFaults() {
	sf, fs := s.ev.Faults, &s.faulty
	fs.end, fs.done = make(chan struct{}), make(chan struct{})
	if sf.Unroute == "" && !sf.TooLarge {
		close(fs.done)
		return
	}
	fs.lasting = true
	go func() {
		defer close(fs.done)
		defer s.undoFaults()
		sizes := s.pendingSizes()
		if sizes == nil {
			return // ended
		}
		if sf.TooLarge {
			s.setMaxMsgSize(int32(sizes[len(sizes)/2]))
		}
		select {
		case <-fs.end:
		case <-time.After(2 * time.Second):
		}
	}()
}

// pendingSizes waits for pending events and returns the sizes of the
// first 64 bodies, sorted; nil when the faults ended first.
func (s *sink) pendingSizes() []int {
	db, err := s.f.w.st.DB().DB()
	if err != nil {
		return nil
	}
	ob := outbox.New(db)
	for {
		select {
		case <-s.faulty.end:
			return nil
		case <-time.After(20 * time.Millisecond):
		}
		evs, err := ob.Pending(context.Background(), 64)
		if err != nil || len(evs) == 0 {
			continue
		}
		sizes := make([]int, len(evs))
		for i, e := range evs {
			sizes[i] = len(e.Body)
		}
		slices.Sort(sizes)
		return sizes
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

// endFaults ends the faults that last (at a settling, and before the
// final drain) and logs what the faults did.
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
