// Package relay delivers the outbox's change events to a sink (a webhook,
// NATS JetStream or RabbitMQ) and marks what the sink acknowledged, under
// a job lock of its own whose fencing token guards the mark.
//
// A pass reads the undelivered events in id order, hands a batch to the
// sink, and marks the prefix of the batch that the sink took: a 2xx to the
// webhook's POST of the whole batch, a JetStream acknowledgement, a
// RabbitMQ confirm of a message published mandatory and not returned
// unroutable. The next attempt starts again at the oldest undelivered
// event. The brokers get one message per event through one delivery loop
// (deliverEach): pipelined across keys, but an event is never published
// while an earlier event of its key is unanswered, and nothing more once
// an answer is a failure, so a broker that refused v2 of a key was never
// given v3. Transient failures (a 5xx, 408 or 429, a network error, a
// broker that does not take a message) are retried with exponential
// backoff, honouring a Retry-After; a rejection (any other 4xx, or a
// redirect, which is never followed) stops the relay with the events left
// undelivered. Webhook POSTs are signed with a time-stamp (package
// webhook).
//
// A pass that finds nothing waits Config.Poll (1s by default) before the
// next; the read of what is pending is one index range (delivered_at,
// id). On MySQL that poll is all. On PostgreSQL the relay also listens
// on outbox.Channel on a connection of its own (Outbox.Listen), and a
// notification ends the wait at once. The store sends it after the
// commit of a write that recorded events, outside the transaction, at
// most one every outbox.NotifyEvery per store and never dropping the
// last (outbox.Notifier): a NOTIFY in the sync's transaction would
// serialize the commits of every notifying transaction on one lock, and
// four writers of 20 events a transaction committed 28 to 35% fewer
// transactions a second with it (pgbench, no listener). A notification is
// a hint: the poll still finds what a lost one did not announce (a writer
// killed between its commit and its notification, a listening connection
// broken, which is logged once and listened again with backoff; after
// each LISTEN the relay looks once, for what was committed while nothing
// listened).
//
// What it does not promise: delivery is at least once. A relay killed
// between a delivery and its mark delivers that batch again with the same
// event ids; NATS drops such a redelivery by its Nats-Msg-Id within the
// stream's duplicate window, other consumers de-duplicate on the id. The
// lock alone cannot stop a relay that paused past its lease from
// delivering once more; the fence stops it from marking.
package relay
