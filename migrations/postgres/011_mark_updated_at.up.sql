-- The quarantine mark keeps the updated_at of the invalid copy that set it
-- (NULL when that copy carried none that could be read). A mark set by a
-- copy without a readable version holds the row's version, so a later
-- write of a higher version cleared it even when that copy was older than
-- the invalid one (an earlier version served late to another run); the
-- time-stamp tells them apart. Marks set before keep NULL and clear as
-- they did.
ALTER TABLE memberships ADD COLUMN IF NOT EXISTS quarantined_updated_at timestamptz(3) NULL;
