ALTER TABLE sync_runs DROP COLUMN deleted, DROP COLUMN restored, DROP COLUMN repaired;
ALTER TABLE memberships DROP COLUMN deleted_at;
