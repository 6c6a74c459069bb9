-- The outbox stores an event's data, not its whole body. payload holds the
-- row as written (the body's "data"); the relay writes the rest of the body
-- (id, entity, op, key, version, run_id) from the row's own columns, which
-- the outbox held already. The body repeated them, and every byte of an
-- outbox row is a byte the database parses and writes in the sync's own
-- transaction: the typed backfill of `make bench` with events ran at 0.58
-- and 0.62 of its rate without them with the whole body stored, 0.62 and
-- 0.63 with the data alone. payload is also the column that Debezium's
-- outbox event router reads by default.
--
-- body stays for the events recorded before, which the relay delivers as
-- they were recorded; the events recorded since leave it NULL. Removing NOT
-- NULL is instant on MariaDB 10.4+; MySQL 8 rebuilds the table in place.
ALTER TABLE erpsync_events
  MODIFY body MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  ADD COLUMN payload MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;
