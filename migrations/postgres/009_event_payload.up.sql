-- The outbox stores an event's data, not its whole body. payload holds the
-- row as written (the body's "data"); the relay writes the rest of the body
-- (id, entity, op, key, version, run_id) from the row's own columns. body
-- stays for the events recorded before, which the relay delivers as they
-- were recorded; the events recorded since leave it NULL.
ALTER TABLE erpsync_events ALTER COLUMN body DROP NOT NULL, ADD COLUMN IF NOT EXISTS payload text NULL;
