-- The life of a key in a change event's identity. A row that comes back
-- after a soft delete counts it in restore_count (NULL: never), and its
-- events carry that count as life: after a restore, a key can go through a
-- version and op it went through before (deleted, back unchanged, deleted
-- again; re-created at a lower version and updated past its old one), and
-- the outbox's UNIQUE index over (entity, key, version, op) alone dropped
-- the second as a change recorded twice. ADD COLUMN at the end is instant
-- on MariaDB 10.3+ and MySQL 8.0.12+; the events recorded before keep life
-- 0, the life of a key never restored, whose ids do not change.
--
-- event_id loses its own UNIQUE index: it is a UUID v5 of the identity
-- that uq_erpsync_events_change holds unique, so the index added nothing
-- but an insert at a random place of a growing B-tree for every event
-- (the typed backfill of `make bench` with events ran at 0.48 of its rate
-- without them with that index, 0.54 to 0.57 without it).
ALTER TABLE memberships ADD COLUMN restore_count BIGINT NULL;
ALTER TABLE erpsync_events ADD COLUMN life BIGINT NOT NULL DEFAULT 0,
  DROP INDEX uq_erpsync_events_change,
  DROP INDEX uq_erpsync_events_event_id,
  ADD UNIQUE KEY uq_erpsync_events_change (entity, entity_key, version, op, life);
