// Package demo is `erpsync demo`: the whole job on a machine that has only
// Go. It starts erpmock, a Redis-protocol server (miniredis) and a
// MySQL-protocol server (go-mysql-server, in memory) inside the process, on
// loopback ports, and drives them with the production code unchanged: the
// same go-redis and gorm/go-sql-driver clients, store.Migrate, the lock
// scripts, the syncer and verify.
//
// It runs several sync instances at once, as several processes would: two
// runs (the one that finds the job lock taken reports skipped), two
// backfills of the whole feed with different chunk sizes, while records
// change in the ERP; then a final run, then verify. Each change is written
// with its event to the outbox, and a relay delivers the events to a
// webhook in the process while the instances run. It prints each run's
// report, verify's result and what the webhook took, and exits 0 only when
// the database matches the feed and the webhook took one event for each
// row inserted or updated.
//
// Given --mysql-dsn and --redis-addr it uses those servers instead; the
// database must be new or empty of memberships, and the lock keys get a
// prefix of their own.
//
// What the demo does NOT show: speed or scale. The embedded MySQL runs one
// statement at a time and scans a table for every lookup and every UNIQUE
// check, so its cost grows with the square of the records: the demo
// defaults to 5,000 records there (about ten seconds on two cores) and to
// 20,000 on real servers. Nor durability: both embedded servers keep
// everything in memory and forget it on exit. The embedded servers live
// only here: no other package imports them, and only cmd/erpsync imports
// this one.
package demo
