// Package bench measures erpsync's write path against the ceilings of the
// machine it runs on, all on the same MariaDB and Redis, one measurement
// after the other:
//
//   - the ceiling: multi-row INSERT IGNORE of 1,000 rows a statement on 4
//     connections, no locks, into an empty table, measured with the values
//     as placeholders and as literals (as the sync sends them), the faster
//     kept;
//   - the seed pipeline, the naive sync: per record SETNX, SELECT EXISTS, a
//     single-row INSERT and DEL, with 16 goroutines;
//   - a full backfill into an empty table, by an `erpsync backfill` child
//     process (its peak RSS is its own) against an in-process erpmock;
//   - the same backfill with its locks on a Redlock of five masters and on
//     a Redis Cluster of three, redis-servers the bench starts, in the
//     same rounds, compared with the one-Redis backfill;
//   - the backfill of a 12-column entity of a config file (TypedEntity:
//     a composite key, decimals, a date, a date-time, int64s, a bool and a
//     values map) from a REST feed this process serves (TypedFeed), and
//     the raw multi-row INSERT IGNORE of the same rows through the
//     entity's table (store.Table), in the same rounds as the memberships
//     backfill and compared with it;
//   - the backfill of documents (DocumentsEntity: headers of a config
//     file's entity with 5 to 20 lines each, a child of typed columns)
//     against the raw insert of the same header and line rows, in lines a
//     second, each round's tables checked against the feed;
//   - the backfill of a slow ERP (erpmock with SlowLatency a page) at
//     --fetchers 1 against Config.SlowFetchers, in rounds that alternate
//     which goes first, each round's table checked against the feed, and
//     `erpsync verify` and `erpsync reconcile` of that table at both;
//   - a re-run of it over the same, unchanged records;
//   - the peak RSS of a backfill of a big feed against a small one;
//   - the typed backfill with change events on against off, in rounds
//     that alternate which goes first, the outbox checked after each, and
//     `erpsync relay --once` delivering that outbox to a webhook this
//     process serves and to NATS JetStream, at each of RelayBatchSizes;
//   - with Config.PostgresDSN, on PostgreSQL: the memberships backfill
//     against the faster of two raw bulk upserts into the same table (a
//     multi-row INSERT ... ON CONFLICT DO NOTHING of literal values, and a
//     COPY into a temporary table then one INSERT ... SELECT ... ON
//     CONFLICT a batch), and the typed and documents backfills against
//     the raw inserts of their rows, in the same rounds, each table
//     checked against the feed after each measurement.
//
// cmd/erpsync-bench prints the results as markdown tables with the goals
// of the issue (backfill at least half the ceiling and ten times the seed
// pipeline, a re-run at least as fast, memory under 150 MiB and flat in
// the number of records, a Redlock backfill at least half and a Cluster
// one at least 0.8 of the one-Redis backfill, the typed backfill at least
// 0.9 of the memberships backfill, the typed backfill with events at
// least 0.7 of it without, the backfill, the verify and the reconcile of
// the slow ERP at least 6 times faster at Config.SlowFetchers than at one
// and that backfill at least 0.8 of the one without latency, the backfill on
// PostgreSQL at least 0.8 of its ceiling).
//
// The numbers are for one machine at one time: the mock, this process and
// the database share its CPUs. They are not assertions; nothing here fails
// because a goal is missed.
package bench
