package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/relay"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/webhook"
)

// eventsTable is the demo's entity: the built-in memberships, with events,
// as a config file declares it with `events: true`.
var eventsTable = func() *store.Table {
	e := entity.Memberships()
	e.Events = true
	t, err := store.Compile(e)
	if err != nil {
		panic("demo: compile memberships with events: " + err.Error()) // a fixed declaration
	}
	return t
}()

// Events is what the demo's relay delivered to its webhook.
type Events struct {
	// URL is the webhook's.
	URL string
	// Delivered counts the distinct events the webhook took (a consumer
	// de-duplicates on the id), Received every event of every POST.
	Delivered, Received int
	// Posts counts the POSTs, BadSignatures those whose signature did not
	// verify (answered 401).
	Posts, BadSignatures int
	// Inserted and Updated are the rows the instances inserted and
	// updated, summed: Delivered must equal Inserted+Updated.
	Inserted, Updated int64
	// Insert and Update are the first event of each op the webhook took.
	Insert, Update *outbox.Body
	// Pending is what the outbox still held when the relay stopped.
	Pending int64
	Err     error
}

// OK reports whether every row written was delivered as one event, each
// POST signed.
func (e *Events) OK() bool {
	return e != nil && e.Err == nil && e.BadSignatures == 0 && e.Pending == 0 && int64(e.Delivered) == e.Inserted+e.Updated
}

// hook is the demo's webhook: it verifies each POST's signature and keeps
// the events, de-duplicated on their id.
type hook struct {
	secret []byte
	mu     sync.Mutex
	ev     Events
	seen   map[string]bool
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ev.Posts++
	if webhook.Verify(h.secret, r.Header, body, nil) != nil {
		h.ev.BadSignatures++
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var evs []outbox.Body
	if err := json.Unmarshal(body, &evs); err != nil {
		http.Error(w, "not a JSON array of events", http.StatusBadRequest)
		return
	}
	for i, e := range evs {
		h.ev.Received++
		if h.seen[e.ID] {
			continue
		}
		h.seen[e.ID] = true
		h.ev.Delivered++
		switch {
		case e.Op == outbox.OpInsert && h.ev.Insert == nil:
			h.ev.Insert = &evs[i]
		case e.Op == outbox.OpUpdate && h.ev.Update == nil:
			h.ev.Update = &evs[i]
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// events is the demo's webhook and the relay that delivers to it while
// the instances run.
type events struct {
	hook *hook
	srv  *httpServer
	st   *store.Store
	ob   *outbox.Outbox
	// relay delivers while the instances run, last does the final pass.
	relay, last *relay.Relay
	log         zerolog.Logger
	// stop ends the delivering and pruning of startEvents; done counts
	// them down.
	stop context.CancelFunc
	done sync.WaitGroup
}

// The demo relay's settings. It polls every relayPoll and the events it
// delivered are pruned as often, so that the outbox stays as small as what
// the instances write between two passes (see firstUser for why it must):
// a relay that waited for the instances to finish marked each batch in an
// outbox of thousands of events, seconds a batch. A batch takes all that
// is pending.
const (
	batchSize = 1000
	relayPoll = 20 * time.Millisecond
)

// startEvents serves the webhook and starts a relay delivering the
// outbox of the database of dsn to it, with locks, until finish.
func startEvents(ctx context.Context, dsn string, locks relay.Locker, log zerolog.Logger) (*events, error) {
	h := &hook{secret: []byte(randomHex(16)), seen: map[string]bool{}}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	st, err := store.Open(cctx, dsn, &store.Options{MaxOpenConns: 4})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", store.DialectOf(dsn), err)
	}
	srv, err := serveHTTP(h, "webhook")
	if err != nil {
		st.Close()
		return nil, err
	}
	h.ev.URL = srv.url + "/hook"
	sink, err := relay.NewWebhook(h.ev.URL, relay.WebhookOptions{Secret: h.secret, Timeout: time.Minute})
	if err != nil {
		srv.Close()
		st.Close()
		return nil, err
	}
	ob := st.Outbox()
	cfg := relay.Config{BatchSize: batchSize, Poll: relayPoll, LockTTL: time.Minute}
	e := &events{hook: h, srv: srv, st: st, ob: ob, relay: relay.New(cfg, ob, sink, locks, nil, log), log: log}
	cfg.Once = true
	e.last = relay.New(cfg, ob, sink, locks, nil, log)
	dctx, stop := context.WithCancel(ctx)
	e.stop = stop
	e.done.Add(2)
	go func() {
		defer e.done.Done()
		if err := e.relay.Run(dctx); err != nil {
			e.log.Warn().Err(err).Msg("relay stopped; the last pass delivers the rest")
		}
	}()
	go func() {
		defer e.done.Done()
		e.prune(dctx)
	}()
	return e, nil
}

// prune deletes the delivered events every relayPoll until ctx ends.
func (e *events) prune(ctx context.Context) {
	tick := time.NewTicker(relayPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := e.ob.Prune(ctx, time.Now(), 10000); err != nil && ctx.Err() == nil {
			e.log.Warn().Err(err).Msg("prune delivered events")
		}
	}
}

// finish stops the relay of startEvents and runs a last pass: it delivers
// what the outbox still holds until nothing is pending, then returns what
// the webhook took, with the rows the instances inserted and updated.
func (e *events) finish(ctx context.Context, inserted, updated int64) *Events {
	e.stop()
	e.done.Wait()
	err := e.last.Run(ctx)
	var pending int64 = -1
	if st, serr := e.ob.Stats(ctx); serr == nil {
		pending = st.Pending()
	} else if err == nil {
		err = serr
	}
	e.hook.mu.Lock()
	defer e.hook.mu.Unlock()
	ev := e.hook.ev
	ev.Inserted, ev.Updated, ev.Pending, ev.Err = inserted, updated, pending, err
	return &ev
}

// close stops the relay, if finish did not, and the webhook.
func (e *events) close() {
	e.stop()
	e.done.Wait()
	e.srv.Close()
	e.st.Close()
}

// excerpt is a few columns of an event's data: the ones an ERP change
// moves.
func excerpt(b *outbox.Body) string {
	var parts []string
	for _, c := range []string{"member_id", "status", "ends_at"} {
		v, ok := b.Data[c]
		switch {
		case !ok:
		case v == nil:
			parts = append(parts, c+"=null")
		default:
			parts = append(parts, fmt.Sprintf("%s=%v", c, v))
		}
	}
	return strings.Join(parts, " ")
}
