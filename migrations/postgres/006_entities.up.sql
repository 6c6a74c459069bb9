-- The entities: what each entity's table was last migrated to, as the
-- config file declared it. `erpsync migrate` writes a row after it has
-- created or changed the entity's table; the definition is the canonical
-- JSON of the entity's key, cursor, version and columns, kept as text: it
-- is compared as written.
CREATE TABLE IF NOT EXISTS erpsync_entities (
  name       varchar(64) COLLATE "C" NOT NULL PRIMARY KEY,
  table_name varchar(64) COLLATE "C" NOT NULL,
  definition text NOT NULL,
  applied_at timestamptz(3) NOT NULL
);
