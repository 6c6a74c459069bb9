ALTER TABLE sync_runs DROP COLUMN IF EXISTS heartbeat_at;
