package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/relay"
	"github.com/erpsync/erpsync/internal/testenv"
)

func jetStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(testenv.NATSURL())
	if err != nil {
		t.Fatalf("nats: %v (is nats-server -js running?)", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// natsStream creates a memory stream with cfg's settings under a name
// and over subjects of the test's own (set in cfg), and a sink that
// publishes into it; both go at the end of the test.
func natsStream(t *testing.T, js jetstream.JetStream, cfg *jetstream.StreamConfig) (*relay.NATS, jetstream.Stream) {
	t.Helper()
	ctx := context.Background()
	subject := testenv.RandomName("erpsync_t_")
	cfg.Name, cfg.Subjects, cfg.Storage = subject+"_stream", []string{subject + ".>"}, jetstream.MemoryStorage
	s, err := js.CreateStream(ctx, *cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), cfg.Name) })
	sink, err := relay.NewNATS(ctx, testenv.NATSURL(), subject)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	return sink, s
}

// TestNATSDeduplicatesARedelivery: a batch delivered again (its mark lost)
// goes out with the same Nats-Msg-Id, and JetStream keeps one message per
// event.
func TestNATSDeduplicatesARedelivery(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	js := jetStream(t)
	cfg := jetstream.StreamConfig{}
	sink, s := natsStream(t, js, &cfg)
	if sink.Stream != cfg.Name {
		t.Fatalf("publishing into %s, want the stream that covers the subject, %s", sink.Stream, cfg.Name)
	}
	b.recordMany(t, []string{"K1", "K2"}, 10)
	r := b.relay(relay.Config{Once: true, BatchSize: 6}, sink)
	if err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	// The marks are lost (a relay killed after its delivery): every event
	// goes out again.
	if _, err := b.db.Exec("UPDATE erpsync_events SET delivered_at = NULL"); err != nil {
		t.Fatal(err)
	}
	if err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := readStream(t, s)
	if len(msgs) != 20 {
		t.Fatalf("the stream holds %d messages, want 20 (one per event)", len(msgs))
	}
	// Each message is one event on <subject>.<entity>, its id in the header.
	var got []outbox.Body
	for _, m := range msgs {
		var e outbox.Body
		if err := json.Unmarshal(m.Data(), &e); err != nil {
			t.Fatal(err)
		}
		if m.Subject() != strings.TrimSuffix(cfg.Subjects[0], ">")+"customers" || m.Headers().Get(jetstream.MsgIDHeader) != e.ID {
			t.Fatalf("message on %s with id %q, event %s", m.Subject(), m.Headers().Get(jetstream.MsgIDHeader), e.ID)
		}
		got = append(got, e)
	}
	checkOrder(t, got, 20)
}

// readStream reads every message of s, in order.
func readStream(t *testing.T, s jetstream.Stream) []jetstream.Msg {
	t.Helper()
	ctx := context.Background()
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for range info.State.Msgs {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// TestNATSCreatesTheStream: with no stream covering the subject, the sink
// creates ERPSYNC_EVENTS.
func TestNATSCreatesTheStream(t *testing.T) {
	ctx := context.Background()
	js := jetStream(t)
	if _, err := js.Stream(ctx, relay.StreamName); err == nil {
		t.Skipf("a stream %s exists on this server already", relay.StreamName)
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatal(err)
	}
	subject := testenv.RandomName("erpsync_t_")
	sink, err := relay.NewNATS(ctx, testenv.NATSURL(), subject)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), relay.StreamName) })
	s, err := js.Stream(ctx, relay.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if sink.Stream != relay.StreamName || len(s.CachedInfo().Config.Subjects) != 1 || s.CachedInfo().Config.Subjects[0] != subject+".>" {
		t.Fatalf("stream %s, config %+v", sink.Stream, s.CachedInfo().Config.Subjects)
	}
}

// TestRabbitMQConfirms: every event is one persistent message with
// message_id = its id, in order, confirmed before it is marked.
func TestRabbitMQConfirms(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	sink, exchange, ch := rabbitSink(t)
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q.Name, "#", exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	b.recordMany(t, []string{"K1", "K2", "K3"}, 5)
	if err := b.relay(relay.Config{Once: true, BatchSize: 4}, sink).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.pending(t); n != 0 {
		t.Fatalf("%d pending", n)
	}
	msgs, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &received{}
	for range 15 {
		select {
		case m := <-msgs:
			var e outbox.Body
			if err := json.Unmarshal(m.Body, &e); err != nil {
				t.Fatal(err)
			}
			if m.MessageId != e.ID || m.RoutingKey != "customers" || m.DeliveryMode != amqp.Persistent {
				t.Fatalf("message %q routing %q mode %d, event %s", m.MessageId, m.RoutingKey, m.DeliveryMode, e.ID)
			}
			rec.add(e)
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of 15 messages", len(rec.all()))
		}
	}
	checkOrder(t, rec.all(), 15)
}
