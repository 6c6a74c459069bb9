// Package guarantee holds the model-based test of erpsync's guarantee: any
// number of `run`, `backfill` and `reconcile` executions, in any overlap,
// with kills, leave memberships with exactly one live row per valid erp_id
// at the ERP's latest version and fields, once a run and a reconcile have
// followed the last change; a record whose newest copy is invalid keeps a
// live row, if any, with its last valid data, marked quarantined; every
// record the ERP deleted has a soft-deleted row, if any, that keeps the
// data and version it had; a record recreated at a lower version is live
// again at that version; a reconcile soft-deletes no record the ERP held,
// unchanged, from the end of its first pass to its end, and reconciles
// without Force delete no more than MaxDeleteTotal over their window; no
// row's erp_version ever goes down but through such a recreation; and a run
// that reported succeeded has written or found current every valid version
// it was served.
//
// The package has no code outside its tests. A generator, deterministic
// from a seed and fuzz bytes, builds an adversarial ERP: its own clock that
// stamps every change and sets every response's Date header; the tail of
// the previous page replayed at the start of the next one, in the version
// served or an older one; duplicates within a page in any version order;
// records that change while a client pages, the record on the page boundary
// included; invalid and unstorable items (on erp_ids no valid record uses)
// with any timestamps, far past and far future; valid records dated in the
// future; ties in updated_at; page sizes from 1 to 1000; records deleted
// (gone from every page) and recreated, at the same version or a higher
// one, or, once a reconcile soft-deleted them, at a lower one stamped
// later; records whose current copy turns invalid one version higher, and
// valid again later; a record hidden from a reconcile's first pass and
// served again unchanged after it; deletions that creep across reconciles,
// each within MaxDelete, together past MaxDeleteTotal. An httptest server
// serves that ERP with the API of the feed's spec, and logs what each
// execution was served under its own path prefix.
//
// In about one feed of three the same server is the ERP's OData v4 face
// instead, read through internal/odata as `--erp-kind odata` wires it:
// keyset pages ($filter on the window and after the last (modified-at,
// key), $orderby, $top, $select), /$count and $metadata, with the same
// per-execution log. The key is an Edm.String or an Edm.Guid (written
// unquoted; a quoted one is answered 400); the version is a property, or
// there is none (version=) and it is updated_at in microseconds, so every
// change moves updated_at forward; the server may cap a page below $top.
// Records change, appear and go between pages, the boundary record
// included; an OData server answers the query, so there are no replays,
// duplicates or old copies. In some feeds every attempt of the first
// $metadata read answers 503, or each execution gets, at a given request,
// an empty page that carries an @odata.nextLink while rows remain. The
// in-process executions of such a feed share one source, as the runs of
// one `erpsync schedule` process do. A third of the OData feeds are
// served as OData V2, as SAP Gateway serves them (odata_v2_face_test.go):
// EDMX 1.0 $metadata, from which erpsync learns the version, {"d":
// {"results":[...],"__next":...}} with __metadata, /Date(ms)/ date-times,
// the version an Edm.Int64 string, and V2 literals in $filter (a V4
// literal is a 400).
//
// Each feed takes its locks from one Redis, from Redlock over three
// independent masters, or from a Redis Cluster of three masters (about one
// feed of four each); the masters and the cluster are started once per
// test binary and shared, each feed under its own key prefix.
//
// Executions are the real syncer on the real MariaDB and Redis: mostly in
// this process, several at once, with the lock client and the source the
// cli would wire, and a share as bin/erpsync processes with the matching
// flags, killed with SIGKILL at a page and run again; reconciles run in
// this process, through internal/reconcile as the cli wires it. After each wave
// the ERP stops changing, one more run and (in feeds with reconciles) one
// forced reconcile bring the table up to date, and the table must equal the
// reference model field by field: the ERP's latest valid records live and
// unmarked, the rows of records whose current copy is invalid live and
// marked quarantined at its version (after a reconcile; after a run, those
// it was served), the records it deleted soft-deleted. After each reconcile,
// no record the ERP held unchanged since the end of its first pass may have
// been soft-deleted by it, and the rows soft-deleted by reconciles without
// Force must stay within its MaxDeleteTotal. A watcher polls the table for
// versions that go down, but through a record recreated at a lower version.
//
// The same feeds run against entities of a config file
// (TestTypedGuaranteeSweep, TestTwoEntitiesGuarantee): the simulated ERP
// also serves every item as a contract of erpmock's typed face
// (erpmock.ContractOf: a key (region, no) split from the erp_id, a status
// code, exact decimals and an int64 past 2^53, a date, a nullable
// date-time, a nested object), every execution is a `bin/erpsync --config`
// process, some killed, and the contracts table must equal the model row by
// row, each typed column read back from MySQL. With testdata/both.yaml the
// contracts and memberships entities share the database, a process of each
// at once for every execution; both tables must equal the model, and the
// keys the processes send to Redis (read with MONITOR) and the checkpoints
// they leave must stay in each entity's namespace.
//
// In a share of the contracts' feeds and in TestEventsGuarantee the entity
// records change events (testdata/events.yaml): bin/erpsync relay
// processes, two at once, killed and paused, deliver them to a signed
// webhook of the test, a NATS JetStream stream or a RabbitMQ queue of its
// own, while the test stalls writers on row locks (writes that change
// nothing) and holds transactions that recorded events (late commits).
// After a final `relay --once`, the events received, without duplicates,
// must be per key the changes the row went through, one for one, as
// triggers on the table logged them in the writing transactions; each a
// version the ERP made; the last the row as it ends; the outbox all
// delivered and every event marked delivered received; duplicates only
// after a relay fault. In most feeds the sink also fails for a while the
// way real ones do: a webhook that redirects POSTs, RabbitMQ exchanges
// that route the relays' messages to no queue or bind a wrong key, a NATS
// stream whose max_msg_size refuses an event of a key and takes a later
// one of the same batch (sinkfaults_test.go). In most of
// TestEventsGuarantee's feeds, after the waves, records leave the ERP and
// come back unchanged twice (the same delete and restore again), and
// records recreated at a lower version climb back to the version they were
// deleted at (an update at a version of their previous life). In most of
// them a writer of the test replays rows of the table through the store's
// upsert while the feed runs (as they are, one version lower, at their
// version with other data, one version higher under an older fencing
// token): writes that must change nothing and record no event, which the
// syncer's own reads under its locks keep from the database almost
// always. In two feeds of three the ERP changes records at their version
// after the waves (a field, neither version nor updated_at), which the
// settling's reconcile must repair, with an update event at that version
// each. A consumer that applies each key's events as received, by seq,
// skipping any at or below the last it applied, must end holding every
// row as the table does, live or soft-deleted.
//
// In two feeds of three of TestDocumentsGuarantee the documents record
// change events (testdata/orders-events.yaml), and after the waves the ERP
// changes the lines of some documents at their version (lines_test.go:
// erpmock.OrderLinesAt's next revision, neither version nor updated_at
// moving), which the settling's reconcile must repair: the table must hold
// the new lines, the outbox one update event of each since the change,
// carrying them, and nothing else, and a consumer applying the outbox's
// events per key by seq must end holding every document and its lines as
// the table does.
//
// In one feed of three of TestDocumentsGuarantee (odata_docs_test.go) the
// ERP serves the orders as an OData V2 entity set, read with `kind: odata`
// (testdata/orders-odata.yaml, orders-odata-events.yaml with events): Orders
// with their lines in the navigation property Items, asked with
// $expand=Items; EDMX 1.0 $metadata, {"d":{"results":[...],"__next":...}}
// pages, /Date(ms)/ date-times and dates, decimals and Edm.Int64 values as
// strings, lines as {"results":[...]}, in most such feeds cut after k with
// a nested __next that serves the rest of the order's lines. The compare
// of the table and its lines with the ERP catches a nested __next ignored
// or a /Date(ms)/ read as local time. Such a feed has no invalid items.
//
// TestSourcesGuarantee (sources_test.go) reads erpmock's contracts as an
// entity of two to four REST sources of one path, one per tenant, each
// setting a tenant and a plant, key columns, to values with "/" and "%"
// that often join into one text ({a/b, c} and {a, b/c}), and selecting its
// tenant's records with params the mock applies or, in a quarter of the
// feeds, ignores. bin/erpsync runs and backfills, several at once and in
// half the feeds only runs without an overlap, while records change and
// the mock errs, duplicates and replays; after a final run every valid
// record must be one row under its own tenant and plant at its latest
// version, no row another's, and where the params are ignored the other
// tenants' records quarantined.
//
// TestExactKeysGuarantee runs waves of overlapping `erpsync run` processes
// over an entity whose keys differ in case, by spaces or past ASCII ("A",
// "a", "A ", " A", "Ä"), with items the decoder must refuse (keys with a
// lone UTF-16 surrogate, a member given twice, a date-time with more
// digits than its column keeps): the table must hold one row per key,
// byte for byte, at its latest version and fields (a datetime(6) with its
// microseconds), the outbox one insert per key under its exact JSON, and
// the refused items must be quarantined with no row.
//
// TestPartsGuarantee runs the same feeds with every execution reading
// its window in parts (--fetchers 2 to 8, syncer.Plan cutting it on the
// ERP's count, so that boundaries fall on ties), some parts stalled while
// the others are paged, in-process runs stopped with parts in flight and
// run again, processes killed with parts in flight.
//
// Run `go test -run TestGuaranteeSweep ./internal/guarantee/` for the
// bounded sweep and `go test -run '^$' -fuzz FuzzGuarantee
// ./internal/guarantee/` to search further. A failure names the seed (and
// fuzz input) that reproduces the feed; the interleaving of the executions
// is the scheduler's, so a rare failure may need a few repetitions of its
// seed (-guarantee.seed N -count 20).
//
// What it does not promise: it does not prove the guarantee. It samples
// feeds, interleavings and kill points; the watcher samples the table every
// few milliseconds, so a version that went down and up again between two
// polls escapes it; the mark of a soft-deleted row is no part of the model
// (a record that turned invalid is never deleted, a deleted one never turns
// invalid); and the deletion window is checked only against a count, within
// the default window.
package guarantee
