-- Writes the body of each event recorded without one from its columns (the
-- relay's envelope; entity and run_id quoted by JSON_QUOTE, which escapes
-- fewer characters than the relay does), then drops payload.
UPDATE erpsync_events SET body = CONCAT('{"id":"', event_id, '","entity":', JSON_QUOTE(entity), ',"op":"', op, '","key":', entity_key,
  ',"version":', version, ',"run_id":', JSON_QUOTE(run_id), ',"data":', payload, '}') WHERE body IS NULL;
ALTER TABLE erpsync_events DROP COLUMN payload,
  MODIFY body MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;
