-- A quarantined record keeps the version and updated_at of its invalid
-- copy (NULL when it carried none that could be read), and the number of
-- the last Quarantine that stored or counted it: each job's quarantines
-- are numbered in sync_quarantine_seq, in the order they commit. A run
-- that makes a record's row, from a valid copy older than an invalid one
-- another run met before the row existed, reads the copies quarantined
-- since it last looked to mark the row it made. ADD COLUMN at the end is
-- instant on MariaDB 10.3+ and MySQL 8.0.12+; records quarantined before
-- keep NULL and 0.
ALTER TABLE quarantined_records ADD COLUMN erp_version BIGINT NULL;
ALTER TABLE quarantined_records ADD COLUMN erp_updated_at DATETIME(3) NULL;
ALTER TABLE quarantined_records ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
CREATE INDEX ix_quarantined_job_seq ON quarantined_records (job, seq);
CREATE TABLE IF NOT EXISTS sync_quarantine_seq (
  job VARCHAR(191) NOT NULL PRIMARY KEY,
  seq BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
