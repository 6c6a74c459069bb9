-- Writes the body of each event recorded without one from its columns (the
-- relay's envelope; entity and run_id quoted by to_json), then drops
-- payload.
UPDATE erpsync_events SET body = '{"id":"' || event_id || '","entity":' || to_json(entity)::text || ',"op":"' || op || '","key":' || entity_key ||
  ',"version":' || version || ',"run_id":' || to_json(run_id)::text || ',"data":' || payload || '}' WHERE body IS NULL;
ALTER TABLE erpsync_events DROP COLUMN payload, ALTER COLUMN body SET NOT NULL;
