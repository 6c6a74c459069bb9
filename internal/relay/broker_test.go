package relay_test

import (
	"context"
	"encoding/json"
	"errors"
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

// TestNATSDeduplicatesARedelivery: a batch delivered again (its mark lost)
// goes out with the same Nats-Msg-Id, and JetStream keeps one message per
// event.
func TestNATSDeduplicatesARedelivery(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	js := jetStream(t)
	subject := testenv.RandomName("erpsync_t_")
	stream := subject + "_stream"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject + ".>"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })

	sink, err := relay.NewNATS(ctx, testenv.NATSURL(), subject)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	if sink.Stream != stream {
		t.Fatalf("publishing into %s, want the stream that covers the subject, %s", sink.Stream, stream)
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
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 20 {
		t.Fatalf("the stream holds %d messages, want 20 (one per event)", info.State.Msgs)
	}
	// Each message is one event on <subject>.<entity>, its id in the header.
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &received{}
	for range 20 {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var e outbox.Body
		if err := json.Unmarshal(m.Data(), &e); err != nil {
			t.Fatal(err)
		}
		if m.Subject() != subject+".customers" || m.Headers().Get(jetstream.MsgIDHeader) != e.ID {
			t.Fatalf("message on %s with id %q, event %s", m.Subject(), m.Headers().Get(jetstream.MsgIDHeader), e.ID)
		}
		rec.add(e)
	}
	checkOrder(t, rec.all(), 20)
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
	exchange := testenv.RandomName("erpsync_t_")
	sink, err := relay.NewRabbitMQ(testenv.AMQPURL(), exchange)
	if err != nil {
		t.Fatalf("%v (is rabbitmq-server running?)", err)
	}
	defer sink.Close()
	conn, err := amqp.Dial(testenv.AMQPURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.ExchangeDelete(exchange, false, false) })
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
