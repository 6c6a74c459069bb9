-- The entities: what each entity's table was last migrated to, as the
-- config file declared it. `erpsync migrate` writes a row after it has
-- created or changed the entity's table; the definition is the canonical
-- JSON of the entity's key, cursor, version and columns. It is text, not
-- JSON: MySQL's JSON type rewrites a document (key order, spacing), and the
-- definition is compared as written.
CREATE TABLE IF NOT EXISTS erpsync_entities (
  name       VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
  table_name VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  definition MEDIUMTEXT NOT NULL,
  applied_at DATETIME(3) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
