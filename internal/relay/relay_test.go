package relay_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/outbox/outboxtest"
	"github.com/erpsync/erpsync/internal/relay"
	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/lock"
	"github.com/erpsync/erpsync/webhook"
)

// bundle is what a relay test works with: the outbox's database (of the
// test matrix), the outbox and a lock client under a key prefix of the
// test's own.
type bundle struct {
	db    *outboxtest.DB
	ob    *outbox.Outbox
	locks *lock.Client
}

func setup(t *testing.T) *bundle {
	t.Helper()
	db := outboxtest.Open(t)
	locks := lock.New(testenv.Redis(t), &lock.Options{Prefix: testenv.RandomName("erpsync_t_") + ":"})
	return &bundle{db: db, ob: db.Outbox, locks: locks}
}

func (b *bundle) relay(cfg relay.Config, sink relay.Sink) *relay.Relay {
	cfg.Poll = cmpOr(cfg.Poll, 20*time.Millisecond)
	cfg.MinBackoff = cmpOr(cfg.MinBackoff, 10*time.Millisecond)
	cfg.MaxBackoff = cmpOr(cfg.MaxBackoff, 50*time.Millisecond)
	return relay.New(cfg, b.ob, sink, b.locks, nil, zerolog.Nop())
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func ev(key string, version int64) outbox.Event {
	op := outbox.OpUpdate
	if version == 1 {
		op = outbox.OpInsert
	}
	return outbox.Event{Entity: "customers", Key: map[string]any{"customer": key}, Op: op, Version: version, RunID: "r",
		Data: map[string]any{"customer": key, "rating": fmt.Sprint(version)}}
}

// begin opens a transaction that records evs; the caller commits it.
func (b *bundle) begin(t *testing.T, evs ...outbox.Event) *sql.Tx {
	t.Helper()
	return b.db.Uncommitted(t, evs...)
}

func (b *bundle) record(t *testing.T, evs ...outbox.Event) {
	t.Helper()
	b.db.Record(t, evs...)
}

// recordMany records n versions of each of keys, a transaction per version
// of all keys.
func (b *bundle) recordMany(t *testing.T, keys []string, n int) {
	for v := 1; v <= n; v++ {
		var evs []outbox.Event
		for _, k := range keys {
			evs = append(evs, ev(k, int64(v)))
		}
		b.record(t, evs...)
	}
}

func (b *bundle) pending(t *testing.T) int64 {
	t.Helper()
	st, err := b.ob.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Pending()
}

// received is what a test sink or webhook got, in order.
type received struct {
	mu     sync.Mutex
	bodies []outbox.Body
}

func (r *received) add(bs ...outbox.Body) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies = append(r.bodies, bs...)
}

func (r *received) all() []outbox.Body {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]outbox.Body(nil), r.bodies...)
}

func (r *received) ids() []string {
	var out []string
	for _, b := range r.all() {
		out = append(out, b.ID)
	}
	return out
}

// checkOrder fails unless every key's events came in increasing version
// order, each once, and want events came in all.
func checkOrder(t *testing.T, got []outbox.Body, want int) {
	t.Helper()
	seen := map[string]bool{}
	last := map[string]int64{}
	for _, b := range got {
		if seen[b.ID] {
			t.Errorf("event %s delivered twice", b.ID)
		}
		seen[b.ID] = true
		k := fmt.Sprint(b.Key["customer"])
		if b.Version <= last[k] {
			t.Errorf("key %s: version %d after %d", k, b.Version, last[k])
		}
		last[k] = b.Version
	}
	if len(seen) != want {
		t.Errorf("%d distinct events delivered, want %d", len(seen), want)
	}
}

// hook is a webhook receiver: answer decides each POST's status.
func hook(t *testing.T, secret []byte, rec *received, answer func(n int, w http.ResponseWriter) bool) *httptest.Server {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if secret != nil {
			if err := webhook.Verify(secret, r.Header, body, nil); err != nil {
				t.Errorf("signature %q at %q: %v", r.Header.Get(webhook.SignatureHeader), r.Header.Get(webhook.TimestampHeader), err)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		if answer != nil && !answer(int(n.Add(1)), w) {
			return
		}
		var bs []outbox.Body
		if err := json.Unmarshal(body, &bs); err != nil {
			t.Errorf("body %s: %v", body, err)
		}
		if r.Header.Get("Idempotency-Key") == "" {
			t.Error("no Idempotency-Key")
		}
		rec.add(bs...)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// webhookSink is the sink of the webhook at url, signed under secret, or
// unsigned when secret is nil.
func webhookSink(t *testing.T, url string, secret []byte) *relay.Webhook {
	t.Helper()
	s, err := relay.NewWebhook(url, relay.WebhookOptions{Secret: secret, Unsigned: secret == nil})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLateCommitIsDelivered is the outbox trap: an event whose transaction
// commits after later events were delivered has a lower id than they do,
// and must be delivered all the same.
func TestLateCommitIsDelivered(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	rec := &received{}
	srv := hook(t, nil, rec, nil)
	r := b.relay(relay.Config{Once: true}, webhookSink(t, srv.URL, nil))

	late := b.begin(t, ev("A", 1)) // takes its id now, commits last
	b.record(t, ev("B", 1), ev("C", 1))
	if err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rec.ids(); len(got) != 2 {
		t.Fatalf("delivered %v before the late commit, want B and C", got)
	}
	hwm := maxDeliveredSeq(t, b.db)
	if err := late.Commit(); err != nil {
		t.Fatal(err)
	}
	b.record(t, ev("D", 1))

	// A high-water-mark relay reads past the last id delivered, and loses A.
	if missed := highWaterMark(t, b.db, hwm); len(missed) != 1 || missed[0] != "D" {
		t.Fatalf("a high-water-mark relay reads %v, want only D (A is lost)", missed)
	}

	if err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	got := rec.all()
	checkOrder(t, got, 4)
	keys := ""
	for _, e := range got {
		keys += fmt.Sprint(e.Key["customer"])
	}
	if keys != "BCAD" {
		t.Fatalf("delivered %s, want BCAD", keys)
	}
	if n := b.pending(t); n != 0 {
		t.Fatalf("%d pending", n)
	}
}

func maxDeliveredSeq(t *testing.T, db *outboxtest.DB) int64 {
	var n int64
	if err := db.QueryRow("SELECT COALESCE(MAX(id), 0) FROM erpsync_events WHERE delivered_at IS NOT NULL").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// highWaterMark is the broken relay's read: events past the last id
// delivered. It exists only here, to show what the trap costs.
func highWaterMark(t *testing.T, db *outboxtest.DB, after int64) []string {
	rows, err := db.Query(db.Q("SELECT "+outbox.StoredColumns+" FROM erpsync_events WHERE id > ? ORDER BY id"), after)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var s outbox.Stored
		var e outbox.Body
		if err := rows.Scan(s.Dest()...); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal(s.Body(), &e)
		keys = append(keys, fmt.Sprint(e.Key["customer"]))
	}
	return keys
}

// TestWebhookDownThenUp: 503s (with Retry-After) and refused
// connections hold the events in the outbox; once the webhook answers,
// everything is delivered, in order per key.
func TestWebhookDownThenUp(t *testing.T) {
	b := setup(t)
	secret := []byte("s3cret")
	rec := &received{}
	srv := hook(t, secret, rec, func(n int, w http.ResponseWriter) bool {
		if n <= 6 {
			if n%2 == 0 {
				w.Header().Set("Retry-After", "0")
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return false
		}
		return true
	})
	keys := []string{"K1", "K2", "K3"}
	b.recordMany(t, keys, 20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- b.relay(relay.Config{BatchSize: 7}, webhookSink(t, srv.URL, secret)).Run(ctx)
	}()
	waitFor(t, func() bool { return len(rec.all()) >= 60 })
	b.recordMany(t, []string{"K4"}, 3) // while it runs
	waitFor(t, func() bool { return len(rec.all()) >= 63 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkOrder(t, rec.all(), 63)
	if n := b.pending(t); n != 0 {
		t.Fatalf("%d pending", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRejectionStops: a 400 stops the relay with one line; the events stay
// pending.
func TestRejectionStops(t *testing.T) {
	b := setup(t)
	srv := hook(t, nil, &received{}, func(_ int, w http.ResponseWriter) bool {
		http.Error(w, "unknown entity\nsecond line", http.StatusBadRequest)
		return false
	})
	b.recordMany(t, []string{"K1"}, 3)
	err := b.relay(relay.Config{}, webhookSink(t, srv.URL, nil)).Run(context.Background())
	var rej *relay.RejectedError
	if !errors.As(err, &rej) {
		t.Fatalf("run: %v, want a rejection", err)
	}
	for _, c := range err.Error() {
		if c == '\n' {
			t.Fatalf("error is not one line: %q", err)
		}
	}
	if n := b.pending(t); n != 3 {
		t.Fatalf("%d pending, want 3", n)
	}
}

// TestTwoRelays: two relays at once deliver each event once; the second
// skips while the first holds the lock.
func TestTwoRelays(t *testing.T) {
	b := setup(t)
	rec := &received{}
	srv := hook(t, nil, rec, func(int, http.ResponseWriter) bool {
		time.Sleep(20 * time.Millisecond)
		return true
	})
	b.recordMany(t, []string{"K1", "K2"}, 25)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	start := make(chan struct{})
	for i := range errs {
		wg.Go(func() {
			<-start
			errs[i] = b.relay(relay.Config{Once: true, BatchSize: 5}, webhookSink(t, srv.URL, nil)).Run(context.Background())
		})
	}
	close(start)
	wg.Wait()
	skipped := 0
	for _, err := range errs {
		switch {
		case errors.Is(err, relay.ErrSkipped):
			skipped++
		case err != nil:
			t.Fatal(err)
		}
	}
	if skipped != 1 {
		t.Fatalf("%d relays skipped, want 1: %v", skipped, errs)
	}
	checkOrder(t, rec.all(), 50)
}

// TestGraceFinishesTheBatch: a relay stopped mid-batch delivers and marks
// the batch in hand.
func TestGraceFinishesTheBatch(t *testing.T) {
	b := setup(t)
	rec := &received{}
	ctx, cancel := context.WithCancel(context.Background())
	srv := hook(t, nil, rec, func(n int, _ http.ResponseWriter) bool {
		if n == 1 {
			cancel() // SIGTERM while the first batch is in flight
			time.Sleep(100 * time.Millisecond)
		}
		return true
	})
	b.recordMany(t, []string{"K1"}, 10)
	if err := b.relay(relay.Config{BatchSize: 4, Grace: 5 * time.Second}, webhookSink(t, srv.URL, nil)).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(rec.all()); got != 4 {
		t.Fatalf("%d delivered, want the batch of 4", got)
	}
	if n := b.pending(t); n != 6 {
		t.Fatalf("%d pending, want 6 (the batch in hand marked)", n)
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	b := setup(t)
	var first time.Time
	var gap time.Duration
	srv := hook(t, nil, &received{}, func(n int, w http.ResponseWriter) bool {
		if n == 1 {
			first = time.Now()
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return false
		}
		gap = time.Since(first)
		return true
	})
	b.recordMany(t, []string{"K1"}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.relay(relay.Config{MaxBackoff: 5 * time.Second}, webhookSink(t, srv.URL, nil)).Run(ctx)
	}()
	waitFor(t, func() bool { return b.pending(t) == 0 })
	cancel()
	<-done
	if gap < 900*time.Millisecond {
		t.Fatalf("retried after %v, the answer asked for 1s", gap)
	}
}

// TestStaleRelayCannotMark: a relay whose token is older than the one a
// newer relay stored (its lease ran out while it paused) delivers, but
// cannot mark: the events stay pending for the relay that holds the lock.
func TestStaleRelayCannotMark(t *testing.T) {
	b := setup(t)
	rec := &received{}
	srv := hook(t, nil, rec, nil)
	b.recordMany(t, []string{"K1"}, 3)
	if _, err := b.db.Exec(b.db.Q("INSERT INTO erpsync_relay_fence (name, fence_token, updated_at) VALUES ('relay', ?, UTC_TIMESTAMP(3))"), int64(1)<<60); err != nil {
		t.Fatal(err)
	}
	err := b.relay(relay.Config{Once: true}, webhookSink(t, srv.URL, nil)).Run(context.Background())
	if !errors.Is(err, outbox.ErrFenced) {
		t.Fatalf("run: %v, want ErrFenced", err)
	}
	if n := b.pending(t); n != 3 || len(rec.all()) != 3 {
		t.Fatalf("%d pending, %d delivered; want 3 and 3 (delivered again by the holder)", n, len(rec.all()))
	}
}
