ALTER TABLE memberships DROP COLUMN quarantined_updated_at;
