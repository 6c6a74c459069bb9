-- Soft deletes: reconcile marks a row whose erp_id the ERP no longer has;
-- the row keeps its data, version and fencing token, and the normal write
-- path clears the mark when the record comes back. ADD COLUMN of a NULL
-- column, or of one with a constant default, does not rewrite the table.
ALTER TABLE memberships ADD COLUMN IF NOT EXISTS deleted_at timestamptz(3) NULL;
-- The counts of a reconcile (and the restores of any run) in the history.
ALTER TABLE sync_runs ADD COLUMN IF NOT EXISTS deleted bigint NOT NULL DEFAULT 0, ADD COLUMN IF NOT EXISTS restored bigint NOT NULL DEFAULT 0, ADD COLUMN IF NOT EXISTS repaired bigint NOT NULL DEFAULT 0;
