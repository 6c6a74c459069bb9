-- Table owners: the job each table erpsync writes belongs to. The first
-- run, backfill, reconcile or schedule of a job claims its table; a command
-- of another job against it is refused at start, since two jobs' reconciles
-- would each soft-delete the rows of the other's feed. --take-table hands a
-- table to another job on purpose.
CREATE TABLE IF NOT EXISTS sync_table_owners (
  table_name VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
  job        VARCHAR(191) NOT NULL,
  claimed_at DATETIME(3) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
