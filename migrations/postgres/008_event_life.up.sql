-- The life of a key in a change event's identity. A row that comes back
-- after a soft delete counts it in restore_count (NULL: never), and its
-- events carry that count as life: after a restore, a key can go through a
-- version and op it went through before, and a UNIQUE constraint over
-- (entity, key, version, op) alone dropped the second as a change recorded
-- twice. The events recorded before keep life 0, the life of a key never
-- restored.
--
-- event_id loses its own UNIQUE constraint: it is a UUID v5 of the
-- identity that uq_erpsync_events_change holds unique. The constraints are
-- dropped (IF EXISTS) and added again in one statement, which a second run
-- repeats without harm.
ALTER TABLE memberships ADD COLUMN IF NOT EXISTS restore_count bigint NULL;
ALTER TABLE erpsync_events ADD COLUMN IF NOT EXISTS life bigint NOT NULL DEFAULT 0,
  DROP CONSTRAINT IF EXISTS uq_erpsync_events_change,
  DROP CONSTRAINT IF EXISTS uq_erpsync_events_event_id,
  ADD CONSTRAINT uq_erpsync_events_change UNIQUE (entity, entity_key, version, op, life);
