ALTER TABLE sync_runs DROP COLUMN quarantined, DROP COLUMN forced;
ALTER TABLE memberships DROP COLUMN quarantined_at, DROP COLUMN quarantined_version;
