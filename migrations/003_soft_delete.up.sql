-- Soft deletes: reconcile marks a row whose erp_id the ERP no longer has;
-- the row keeps its data, version and fencing token, and the normal write
-- path clears the mark when the record comes back. ADD COLUMN of a NULL
-- column at the end is instant on MariaDB 10.3+ and MySQL 8.0.12+. A column
-- that exists already (a crash before the bookkeeping row) is taken as
-- applied by migrate.
ALTER TABLE memberships ADD COLUMN deleted_at DATETIME(3) NULL;
-- The counts of a reconcile (and the restores of any run) in the history.
ALTER TABLE sync_runs ADD COLUMN deleted BIGINT NOT NULL DEFAULT 0, ADD COLUMN restored BIGINT NOT NULL DEFAULT 0, ADD COLUMN repaired BIGINT NOT NULL DEFAULT 0;
