ALTER TABLE memberships DROP COLUMN IF EXISTS quarantined_updated_at;
