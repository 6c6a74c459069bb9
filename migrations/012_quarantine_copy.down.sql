DROP TABLE IF EXISTS sync_quarantine_seq;
DROP INDEX ix_quarantined_job_seq ON quarantined_records;
ALTER TABLE quarantined_records DROP COLUMN seq;
ALTER TABLE quarantined_records DROP COLUMN erp_updated_at;
ALTER TABLE quarantined_records DROP COLUMN erp_version;
