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
// delivered; duplicates only after a relay fault. In most of
// TestEventsGuarantee's feeds, after the waves, records leave the ERP and
// come back unchanged twice (the same delete and restore again), and
// records recreated at a lower version climb back to the version they were
// deleted at (an update at a version of their previous life).
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
