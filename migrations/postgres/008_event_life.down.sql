-- Fails while two events share (entity, entity_key, version, op) at different
-- lives: delete the older of each pair first.
ALTER TABLE erpsync_events DROP CONSTRAINT IF EXISTS uq_erpsync_events_change, DROP COLUMN IF EXISTS life,
  ADD CONSTRAINT uq_erpsync_events_change UNIQUE (entity, entity_key, version, op),
  ADD CONSTRAINT uq_erpsync_events_event_id UNIQUE (event_id);
ALTER TABLE memberships DROP COLUMN IF EXISTS restore_count;
