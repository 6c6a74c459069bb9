-- A run's process writes heartbeat_at (the database's clock) and its
-- counters so far every few seconds while it runs, so that `erpsync runs`
-- can tell a run still running from one whose process was killed or
-- paused: a running row not heard from for --lost-after shows as lost.
-- Rows of runs started before keep NULL.
ALTER TABLE sync_runs ADD COLUMN IF NOT EXISTS heartbeat_at timestamptz(3) NULL;
