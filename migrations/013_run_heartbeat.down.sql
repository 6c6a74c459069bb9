ALTER TABLE sync_runs DROP COLUMN heartbeat_at;
