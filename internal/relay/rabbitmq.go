package relay

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/erpsync/erpsync/internal/outbox"
)

// RabbitMQ publishes each event to an exchange (routing key: the
// entity), persistent and mandatory, with message_id = the event's id, and
// awaits the broker's publisher confirms. A message that no queue
// receives (returned unroutable) is not taken, though the broker confirms
// it.
type RabbitMQ struct {
	url, exchange string
	conn          *amqp.Connection
	ch            *amqp.Channel
	// returns are the channel's returned messages; returned those read
	// from it and not yet matched with their confirm, by message_id.
	returns  chan amqp.Return
	returned map[string]amqp.Return
}

// NewRabbitMQ connects to the broker at url and declares exchange (a
// durable topic exchange) when it is missing.
func NewRabbitMQ(url, exchange string) (*RabbitMQ, error) {
	s := &RabbitMQ{url: url, exchange: exchange}
	if err := s.connect(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *RabbitMQ) connect() error {
	conn, err := amqp.DialConfig(s.url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second), Properties: amqp.Table{"connection_name": "erpsync relay"}})
	if err != nil {
		return fmt.Errorf("rabbitmq at %s: %w", redactAMQP(s.url), err)
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err == nil {
		err = ch.ExchangeDeclare(s.exchange, amqp.ExchangeTopic, true, false, false, false, nil)
	}
	if err != nil {
		conn.Close()
		return fmt.Errorf("rabbitmq exchange %s: %w", s.exchange, err)
	}
	// The broker sends a message's basic.return before its confirm, and
	// the client hands it to this channel before it completes the
	// confirm: a wait that sees the confirm finds the return here.
	// deliverEach keeps at most maxInFlight messages out, so the buffer
	// never fills.
	s.returns = ch.NotifyReturn(make(chan amqp.Return, maxInFlight))
	s.returned = map[string]amqp.Return{}
	s.conn, s.ch = conn, ch
	return nil
}

// Deliver publishes evs (see deliverEach) and returns how many, from the
// first, the broker confirmed and did not return.
func (s *RabbitMQ) Deliver(ctx context.Context, evs []outbox.Pending) (int, error) {
	if s.ch == nil || s.ch.IsClosed() {
		s.drop()
		if err := s.connect(); err != nil {
			return 0, err
		}
	}
	n, err := deliverEach(ctx, s, evs)
	if ctx.Err() != nil {
		// Confirms and returns may still come for what was out: a
		// channel of their own for the next batch.
		s.drop()
	}
	return n, err
}

// drop closes the connection; the next Deliver connects again.
func (s *RabbitMQ) drop() {
	if s.conn != nil {
		s.conn.Close()
	}
	s.conn, s.ch = nil, nil
}

func (s *RabbitMQ) publish(ctx context.Context, e outbox.Pending) (func(context.Context) error, error) {
	dc, err := s.ch.PublishWithDeferredConfirmWithContext(ctx, s.exchange, e.Entity, true, false, amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: e.ID, Body: e.Body, Timestamp: time.Now(),
	})
	if err != nil {
		return nil, fmt.Errorf("rabbitmq publish %s to exchange %q: %w", e.ID, s.exchange, err)
	}
	return func(ctx context.Context) error {
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			return fmt.Errorf("rabbitmq confirm %s: %w", e.ID, err)
		}
		if !ok {
			return fmt.Errorf("rabbitmq: exchange %q refused event %s (routing key %q, %d bytes: nack)", s.exchange, e.ID, e.Entity, len(e.Body))
		}
		for more := true; more; {
			select {
			case r, open := <-s.returns:
				if !open { // the channel closed
					more = false
					break
				}
				s.returned[r.MessageId] = r
			default:
				more = false
			}
		}
		if r, ok := s.returned[e.ID]; ok {
			delete(s.returned, e.ID)
			return fmt.Errorf("rabbitmq: exchange %q has no queue for routing key %q: event %s returned unroutable (%d %s); bind a queue to it", s.exchange, r.RoutingKey, e.ID, r.ReplyCode, r.ReplyText)
		}
		return nil
	}, nil
}

// Close closes the connection.
func (s *RabbitMQ) Close() error {
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn, s.ch = nil, nil
	return err
}

// redactAMQP is url without its password, for messages.
func redactAMQP(v string) string {
	u, err := amqp.ParseURI(v)
	if err != nil {
		return "(bad URL)"
	}
	u.Password = ""
	return fmt.Sprintf("%s:%d%s", u.Host, u.Port, u.Vhost)
}
