ALTER TABLE sync_runs DROP COLUMN IF EXISTS quarantined, DROP COLUMN IF EXISTS forced;
DROP INDEX IF EXISTS ix_memberships_quarantined;
ALTER TABLE memberships DROP COLUMN IF EXISTS quarantined_at, DROP COLUMN IF EXISTS quarantined_version;
