-- The quarantine mark: quarantined_at is set when the ERP's newest copy of a
-- record that has a row (its highest version) is invalid, and cleared when a
-- valid copy at that version or a newer one is written; quarantined_version
-- is the version of that invalid copy (NULL when it carried none that could
-- be read). The row keeps its last valid data. ADD COLUMN of NULL columns at
-- the end is instant on MariaDB 10.3+ and MySQL 8.0.12+; the index (for the
-- count of marked rows that the schedule publishes) is built online.
ALTER TABLE memberships ADD COLUMN quarantined_at DATETIME(3) NULL, ADD COLUMN quarantined_version BIGINT NULL, ADD INDEX ix_memberships_quarantined (quarantined_at);
-- Runs count the rows they marked; a reconcile records whether --force took
-- it past the guard, so that the rolling deletion window counts only the
-- deletions the guard allowed.
ALTER TABLE sync_runs ADD COLUMN quarantined BIGINT NOT NULL DEFAULT 0, ADD COLUMN forced BOOLEAN NOT NULL DEFAULT FALSE;
