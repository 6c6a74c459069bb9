package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/erpsync/erpsync/internal/outbox"
)

// StreamName is the stream the NATS sink creates when none covers its
// subject.
const StreamName = "ERPSYNC_EVENTS"

// NATS publishes each event to JetStream as one message on
// <subject>.<entity>, with header Nats-Msg-Id = the event's id, and
// awaits the acks.
type NATS struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	subject string
	// Stream is the stream that takes the messages.
	Stream string
}

// NewNATS connects to the NATS server at url and finds the stream that
// covers subject.>, creating ERPSYNC_EVENTS when none does.
func NewNATS(ctx context.Context, url, subject string) (*NATS, error) {
	nc, err := nats.Connect(url, nats.Name("erpsync relay"), nats.Timeout(5*time.Second), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("nats at %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats jetstream: %w", err)
	}
	s := &NATS{nc: nc, js: js, subject: subject}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	name, err := js.StreamNameBySubject(cctx, subject+".>")
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		if _, err := js.CreateStream(cctx, jetstream.StreamConfig{Name: StreamName, Subjects: []string{subject + ".>"}, Storage: jetstream.FileStorage}); err != nil {
			nc.Close()
			return nil, fmt.Errorf("nats: create stream %s for %s.>: %w", StreamName, subject, err)
		}
		name = StreamName
	case err != nil:
		nc.Close()
		return nil, fmt.Errorf("nats: find the stream of %s.>: %w", subject, err)
	}
	s.Stream = name
	return s, nil
}

// Deliver publishes evs (see deliverEach) and returns how many, from the
// first, JetStream acknowledged (a duplicate it dropped by its
// Nats-Msg-Id included).
func (s *NATS) Deliver(ctx context.Context, evs []outbox.Pending) (int, error) {
	return deliverEach(ctx, s, evs)
}

func (s *NATS) publish(ctx context.Context, e outbox.Pending) (func(context.Context) error, error) {
	m := nats.NewMsg(s.subject + "." + e.Entity)
	m.Header.Set(jetstream.MsgIDHeader, e.ID)
	m.Data = e.Body
	f, err := s.js.PublishMsgAsync(m)
	if err != nil {
		return nil, fmt.Errorf("nats publish %s to %s (%d bytes): %w", e.ID, m.Subject, len(e.Body), err)
	}
	return func(ctx context.Context) error {
		select {
		case <-f.Ok():
			return nil
		case err := <-f.Err():
			return fmt.Errorf("nats: stream %s did not take event %s on %s (%d bytes): %w", s.Stream, e.ID, m.Subject, len(e.Body), err)
		case <-ctx.Done():
			return fmt.Errorf("nats publish %s: %w", e.ID, ctx.Err())
		}
	}, nil
}

// Close closes the connection.
func (s *NATS) Close() error {
	s.nc.Close()
	return nil
}
