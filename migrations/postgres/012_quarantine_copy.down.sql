DROP TABLE IF EXISTS sync_quarantine_seq;
DROP INDEX IF EXISTS ix_quarantined_job_seq;
ALTER TABLE quarantined_records DROP COLUMN IF EXISTS seq;
ALTER TABLE quarantined_records DROP COLUMN IF EXISTS erp_updated_at;
ALTER TABLE quarantined_records DROP COLUMN IF EXISTS erp_version;
