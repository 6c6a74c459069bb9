// Package relay delivers the outbox's change events to a sink (a webhook,
// NATS JetStream or RabbitMQ) and marks what the sink acknowledged, under
// a job lock of its own whose fencing token guards the mark.
//
// A pass reads the undelivered events in id order, hands a batch to the
// sink, and marks the prefix of the batch that the sink acknowledged. A
// sink that fails stops the batch at the failing event, so an event of a
// key is never delivered while an earlier one of that key waits: the next
// attempt starts again at the oldest undelivered event. Transient failures
// (a 5xx, 408 or 429, a network error, a broker that does not confirm) are
// retried with exponential backoff, honouring a Retry-After; a rejection
// (any other 4xx) stops the relay with the events left undelivered.
//
// What it does not promise: delivery is at least once. A relay killed
// between a delivery and its mark delivers that batch again with the same
// event ids; NATS drops such a redelivery by its Nats-Msg-Id within the
// stream's duplicate window, other consumers de-duplicate on the id. The
// lock alone cannot stop a relay that paused past its lease from
// delivering once more; the fence stops it from marking.
package relay
