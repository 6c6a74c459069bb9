// Package outbox is erpsync's transactional outbox of change events: the
// table erpsync_events that a sync write records its events into, in the
// same transaction as the rows it changes (Record), and what the relay
// needs of it: the undelivered events in id order (Pending), the mark of
// what was delivered under the relay's fencing token (MarkDelivered), the
// prune of old delivered events (Prune) and the counts that
// `erpsync events` and the metrics show (Stats). It speaks MySQL's SQL
// (New, the zero Recorder) or PostgreSQL's (NewPostgres,
// NewPostgresRecorder): the same table, the same rules. On PostgreSQL a
// writer also tells a listening relay that it committed events, after the
// commit (Notifier, on Channel), and the relay listens (Listen); the
// notification is a hint, never what delivery depends on.
//
// A row stores the event's data alone (payload) beside its identity and
// run; the body a consumer receives is written from them when it is read
// (Stored.Body), so the sync's transaction writes no byte twice.
//
// A body carries seq, the row's id: writers record a key's events after
// the statement that changed its row, in that transaction, so the row
// lock makes a key's ids, and seqs, increase with every event of the key,
// whatever its op. A consumer that keeps the last seq it applied per key
// skips any event at or below it (a redelivery) and applies the rest.
// Every byte of an event's JSON is written by this package's encoder
// (encode.go), whichever writer recorded it.
//
// An event's id is computed from its identity (entity, key, version, op,
// life), so a replay of one change computes the id it had; together with
// the UNIQUE index on that identity, one change is recorded once, however
// often it is written. The life is how many times the row had come back
// after a soft delete: a key restored can go through a version and op it
// went through before (deleted, back unchanged, deleted again at one
// version; re-created at a lower version and updated past its old one),
// and those are changes of their own.
//
// What it does not promise: the order of ids is the order in which
// events were recorded, not committed. A transaction that commits late
// holds a lower id than events committed after it, so Pending reads what
// is undelivered, never what lies past the last id delivered. Delivery is
// at least once: a relay that dies between a delivery and its mark
// delivers the batch again, with the same ids; consumers de-duplicate on
// the id.
package outbox
