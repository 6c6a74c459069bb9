-- The quarantine mark: quarantined_at is set when the ERP's newest copy of a
-- record that has a row (its highest version) is invalid, and cleared when a
-- valid copy at that version or a newer one is written; quarantined_version
-- is the version of that invalid copy (NULL when it carried none that could
-- be read). The row keeps its last valid data. The index is for the count
-- of marked rows that the schedule publishes.
ALTER TABLE memberships ADD COLUMN IF NOT EXISTS quarantined_at timestamptz(3) NULL, ADD COLUMN IF NOT EXISTS quarantined_version bigint NULL;
CREATE INDEX IF NOT EXISTS ix_memberships_quarantined ON memberships (quarantined_at);
-- Runs count the rows they marked; a reconcile records whether --force took
-- it past the guard, so that the rolling deletion window counts only the
-- deletions the guard allowed.
ALTER TABLE sync_runs ADD COLUMN IF NOT EXISTS quarantined bigint NOT NULL DEFAULT 0, ADD COLUMN IF NOT EXISTS forced boolean NOT NULL DEFAULT false;
