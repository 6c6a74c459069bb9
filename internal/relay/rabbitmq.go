package relay

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/erpsync/erpsync/internal/outbox"
)

// RabbitMQ publishes each event to an exchange (routing key: the
// entity), persistent, with message_id = the event's id, and awaits the
// broker's publisher confirms.
type RabbitMQ struct {
	url, exchange string
	conn          *amqp.Connection
	ch            *amqp.Channel
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
	s.conn, s.ch = conn, ch
	return nil
}

// Deliver publishes evs and returns how many, from the first, the broker
// confirmed.
func (s *RabbitMQ) Deliver(ctx context.Context, evs []outbox.Pending) (int, error) {
	if s.ch == nil || s.ch.IsClosed() {
		if s.conn != nil {
			s.conn.Close()
		}
		s.ch = nil
		if err := s.connect(); err != nil {
			return 0, err
		}
	}
	dcs := make([]*amqp.DeferredConfirmation, 0, len(evs))
	var perr error
	for _, e := range evs {
		dc, err := s.ch.PublishWithDeferredConfirmWithContext(ctx, s.exchange, e.Entity, false, false, amqp.Publishing{
			ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: e.ID, Body: e.Body, Timestamp: time.Now(),
		})
		if err != nil {
			perr = fmt.Errorf("rabbitmq publish %s: %w", e.ID, err)
			break
		}
		dcs = append(dcs, dc)
	}
	for i, dc := range dcs {
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			return i, fmt.Errorf("rabbitmq confirm %s: %w", evs[i].ID, err)
		}
		if !ok {
			return i, fmt.Errorf("rabbitmq: the broker refused %s (nack)", evs[i].ID)
		}
	}
	return len(dcs), perr
}

// Close closes the connection.
func (s *RabbitMQ) Close() error {
	if s.conn == nil {
		return nil
	}
	return s.conn.Close()
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
