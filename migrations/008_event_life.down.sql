-- Fails while two events share (entity, entity_key, version, op) at different
-- lives: delete the older of each pair first.
ALTER TABLE erpsync_events DROP INDEX uq_erpsync_events_change, DROP COLUMN life,
  ADD UNIQUE KEY uq_erpsync_events_change (entity, entity_key, version, op),
  ADD UNIQUE KEY uq_erpsync_events_event_id (event_id);
ALTER TABLE memberships DROP COLUMN restore_count;
