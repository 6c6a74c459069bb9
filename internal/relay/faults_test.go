package relay_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/relay"
	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/webhook"
)

// rabbitSink is a RabbitMQ sink on an exchange of the test's own, and a
// channel of the test on the broker; the exchange is deleted at the end.
func rabbitSink(t *testing.T) (*relay.RabbitMQ, string, *amqp.Channel) {
	t.Helper()
	exchange := testenv.RandomName("erpsync_t_")
	sink, err := relay.NewRabbitMQ(testenv.AMQPURL(), exchange)
	if err != nil {
		t.Fatalf("%v (is rabbitmq-server running?)", err)
	}
	t.Cleanup(func() { sink.Close() })
	conn, err := amqp.Dial(testenv.AMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.ExchangeDelete(exchange, false, false) })
	return sink, exchange, ch
}

// readQueue reads every message of queue, as events.
func readQueue(t *testing.T, ch *amqp.Channel, queue string) []outbox.Body {
	t.Helper()
	var out []outbox.Body
	for {
		m, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatalf("read queue %s: %v", queue, err)
		}
		if !ok {
			return out
		}
		var e outbox.Body
		if err := json.Unmarshal(m.Body, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
}

// TestRabbitMQUnroutableIsNotDelivered: an exchange with no queue, or
// whose queue's binding does not match the entity, confirms what it
// cannot route; the relay publishes mandatory, takes the broker's return
// as a failure naming the exchange and the routing key, and marks
// nothing. Once a queue is bound, the events arrive, in order.
func TestRabbitMQUnroutableIsNotDelivered(t *testing.T) {
	for _, bind := range []string{"", "orders"} {
		name := "no queue"
		if bind != "" {
			name = "binding " + bind
		}
		t.Run(name, func(t *testing.T) {
			b := setup(t)
			ctx := context.Background()
			sink, exchange, ch := rabbitSink(t)
			q, err := ch.QueueDeclare("", false, true, true, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			if bind != "" {
				if err := ch.QueueBind(q.Name, bind, exchange, false, nil); err != nil {
					t.Fatal(err)
				}
			}
			b.recordMany(t, []string{"K1", "K2"}, 3)
			err = b.relay(relay.Config{Once: true, BatchSize: 4}, sink).Run(ctx)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("exchange %q has no queue for routing key %q", exchange, "customers")) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("relay --once: %v, want one line naming the exchange and the routing key", err)
			}
			if n := b.pending(t); n != 6 {
				t.Fatalf("%d pending, want all 6: no queue received them", n)
			}
			if err := ch.QueueBind(q.Name, "customers", exchange, false, nil); err != nil {
				t.Fatal(err)
			}
			if err := b.relay(relay.Config{Once: true, BatchSize: 4}, sink).Run(ctx); err != nil {
				t.Fatal(err)
			}
			if n := b.pending(t); n != 0 {
				t.Fatalf("%d pending", n)
			}
			checkOrder(t, readQueue(t, ch, q.Name), 6)
		})
	}
}

// big is v of key with data of size bytes.
func big(key string, v int64, size int) outbox.Event {
	e := ev(key, v)
	e.Data["note"] = strings.Repeat("x", size)
	return e
}

// recordRefusable records K1 and K2 v1..v3, one transaction a version,
// K1's v2 size bytes larger than the others.
func (b *bundle) recordRefusable(t *testing.T, size int) {
	t.Helper()
	b.record(t, ev("K1", 1), ev("K2", 1))
	b.record(t, big("K1", 2, size), ev("K2", 2))
	b.record(t, ev("K1", 3), ev("K2", 3))
}

// TestNATSKeepsKeyOrderWhenAMessageIsRefused: a stream whose
// max_msg_size refuses v2 of a key must not hold v3 before it: JetStream
// would drop v3's redelivery by its Nats-Msg-Id, and v2 would come after
// it for good. Once the limit is raised, the stream holds each key's
// events in order, each once.
func TestNATSKeepsKeyOrderWhenAMessageIsRefused(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	js := jetStream(t)
	cfg := jetstream.StreamConfig{MaxMsgSize: 2000}
	sink, s := natsStream(t, js, &cfg)
	b.recordRefusable(t, 5000)
	err := b.relay(relay.Config{Once: true}, sink).Run(ctx)
	if err == nil || !strings.Contains(err.Error(), cfg.Name) {
		t.Fatalf("relay --once: %v, want the stream's refusal", err)
	}
	if n := b.pending(t); n != 4 {
		t.Fatalf("%d pending, want 4 (K1 v2 and v3, K2 v2 and v3)", n)
	}
	cfg.MaxMsgSize = -1
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := b.relay(relay.Config{Once: true}, sink).Run(ctx); err != nil {
		t.Fatal(err)
	}
	var got []outbox.Body
	for _, m := range readStream(t, s) {
		var e outbox.Body
		if err := json.Unmarshal(m.Data(), &e); err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	checkOrder(t, got, 6)
	if n := b.pending(t); n != 0 {
		t.Fatalf("%d pending", n)
	}
}

// TestRabbitMQKeepsKeyOrderWhenAMessageIsRefused: a queue with a byte
// limit that rejects what would overflow it (x-overflow reject-publish)
// nacks v2 of a key, and must not have been given v3. The limit raised
// (the consumer moves to a queue without one), each key's events arrive
// in order.
func TestRabbitMQKeepsKeyOrderWhenAMessageIsRefused(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	sink, exchange, ch := rabbitSink(t)
	small, err := ch.QueueDeclare("", false, true, true, false, amqp.Table{"x-max-length-bytes": int64(4000), "x-overflow": "reject-publish"})
	if err == nil {
		err = ch.QueueBind(small.Name, "customers", exchange, false, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	b.recordRefusable(t, 5000)
	err = b.relay(relay.Config{Once: true}, sink).Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "nack") {
		t.Fatalf("relay --once: %v, want the broker's nack", err)
	}
	if n := b.pending(t); n != 4 {
		t.Fatalf("%d pending, want 4 (K1 v2 and v3, K2 v2 and v3)", n)
	}
	got := readQueue(t, ch, small.Name)
	large, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err == nil {
		err = ch.QueueBind(large.Name, "customers", exchange, false, nil)
	}
	if err == nil {
		_, err = ch.QueueDelete(small.Name, false, false, false)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := b.relay(relay.Config{Once: true}, sink).Run(ctx); err != nil {
		t.Fatal(err)
	}
	got = append(got, readQueue(t, ch, large.Name)...)
	// K2's v2 was taken after K1's v2 was refused, and goes out again
	// with it: a consumer drops it on its id.
	checkOrder(t, dedup(got), 6)
}

// dedup is evs without the repeats of an id, as a consumer applies them.
func dedup(evs []outbox.Body) []outbox.Body {
	seen := map[string]bool{}
	var out []outbox.Body
	for _, e := range evs {
		if !seen[e.ID] {
			seen[e.ID] = true
			out = append(out, e)
		}
	}
	return out
}

// TestWebhookRedirectIsARejection: a webhook that answers a redirect
// (301, 302, 303, 307, 308, or http to https) never saw the events; the
// relay does not follow it, stops with one line naming the status and
// the Location, and marks nothing. The place redirected to answers 200 to
// anything, as a login page or a moved site does.
func TestWebhookRedirectIsARejection(t *testing.T) {
	var elsewhere atomic.Int64
	target := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(target.Close)
	for _, c := range []struct {
		code int
		to   string
	}{{301, "/moved"}, {302, "/login"}, {303, "/see-other"}, {307, "/temporary"}, {308, "/permanent"}, {301, target.URL + "/hook"}} {
		t.Run(fmt.Sprintf("%d to %s", c.code, c.to), func(t *testing.T) {
			b := setup(t)
			loc := c.to
			if strings.HasPrefix(c.to, "/") {
				loc = target.URL + c.to
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, loc, c.code)
			}))
			t.Cleanup(srv.Close)
			before := elsewhere.Load()
			b.recordMany(t, []string{"K1"}, 3)
			// The client trusts the target's certificate, as a real
			// client trusts a real site's.
			sink, err := relay.NewWebhook(srv.URL+"/hook", relay.WebhookOptions{Secret: []byte("s"), Client: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: target.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}}}})
			if err != nil {
				t.Fatal(err)
			}
			err = b.relay(relay.Config{Once: true}, sink).Run(context.Background())
			var rej *relay.RejectedError
			if !errors.As(err, &rej) || !strings.Contains(err.Error(), fmt.Sprint(c.code)) || !strings.Contains(err.Error(), loc) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("run: %v, want a rejection naming %d and %s", err, c.code, loc)
			}
			if n := b.pending(t); n != 3 {
				t.Fatalf("%d pending, want 3", n)
			}
			if n := elsewhere.Load() - before; n != 0 {
				t.Fatalf("the redirect was followed: %d requests reached %s", n, loc)
			}
		})
	}
}

// TestWebhookTimestampTolerance: the relay signs the time-stamp with the
// body; a receiver refuses a request signed outside its tolerance (a
// relay whose clock is 10 minutes behind here, as a replay of a request
// captured 10 minutes ago would be), and the events stay pending.
func TestWebhookTimestampTolerance(t *testing.T) {
	secret := []byte("s3cret")
	for _, skew := range []time.Duration{0, -10 * time.Minute} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			b := setup(t)
			rec := &received{}
			var refused []error
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if err := webhook.Verify(secret, r.Header, body, nil); err != nil {
					refused = append(refused, err)
					http.Error(w, err.Error(), http.StatusUnauthorized)
					return
				}
				var bs []outbox.Body
				_ = json.Unmarshal(body, &bs)
				rec.add(bs...)
			}))
			t.Cleanup(srv.Close)
			b.recordMany(t, []string{"K1"}, 3)
			sink, err := relay.NewWebhook(srv.URL, relay.WebhookOptions{Secret: secret, Now: func() time.Time { return time.Now().Add(skew) }})
			if err != nil {
				t.Fatal(err)
			}
			err = b.relay(relay.Config{Once: true}, sink).Run(context.Background())
			if skew == 0 {
				if err != nil || len(refused) > 0 {
					t.Fatalf("run: %v, refused %v", err, refused)
				}
				checkOrder(t, rec.all(), 3)
				return
			}
			var rej *relay.RejectedError
			if !errors.As(err, &rej) || len(refused) != 1 || !errors.Is(refused[0], webhook.ErrExpired) {
				t.Fatalf("run: %v, refused %v; want one refusal of an expired time-stamp", err, refused)
			}
			if n := b.pending(t); n != 3 {
				t.Fatalf("%d pending, want 3", n)
			}
		})
	}
}

// TestWebhookWantsASecret: a webhook sink without a secret is refused,
// unless it is declared unsigned; an unsigned one sends no signature.
func TestWebhookWantsASecret(t *testing.T) {
	if _, err := relay.NewWebhook("http://127.0.0.1:9/hook", relay.WebhookOptions{}); !errors.Is(err, relay.ErrUnsigned) {
		t.Fatalf("no secret: %v, want ErrUnsigned", err)
	}
	b := setup(t)
	var headers http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { headers = r.Header.Clone() }))
	t.Cleanup(srv.Close)
	b.recordMany(t, []string{"K1"}, 1)
	if err := b.relay(relay.Config{Once: true}, webhookSink(t, srv.URL, nil)).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if headers == nil || headers.Get(webhook.SignatureHeader) != "" || headers.Get(webhook.TimestampHeader) != "" {
		t.Fatalf("an unsigned webhook got headers %v", headers)
	}
}

// deliveryFailures is a relay.Observer that counts the failed deliveries.
type deliveryFailures struct{ n atomic.Int64 }

func (*deliveryFailures) ObserveOutbox(outbox.Stats) {}
func (*deliveryFailures) ObserveRelaySkipped()       {}
func (*deliveryFailures) ObserveRelayLockFailed()    {}
func (o *deliveryFailures) ObserveDeliveryFailed()   { o.n.Add(1) }

// TestRabbitMQUnroutableIsRetried: a running relay whose exchange routes
// to no queue retries with backoff, counting each failure and marking
// nothing; once a queue is bound, it delivers every event, in order.
func TestRabbitMQUnroutableIsRetried(t *testing.T) {
	b := setup(t)
	sink, exchange, ch := rabbitSink(t)
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.recordMany(t, []string{"K1", "K2"}, 3)
	obs := &deliveryFailures{}
	cfg := relay.Config{Poll: 20 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- relay.New(cfg, b.ob, sink, b.locks, obs, zerolog.Nop()).Run(ctx) }()
	waitFor(t, func() bool { return obs.n.Load() >= 3 })
	if n := b.pending(t); n != 6 {
		t.Fatalf("%d pending while no queue is bound, want 6", n)
	}
	if err := ch.QueueBind(q.Name, "#", exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return b.pending(t) == 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkOrder(t, readQueue(t, ch, q.Name), 6)
}
