-- Table owners: the job each table erpsync writes belongs to. The first
-- run, backfill, reconcile or schedule of a job claims its table; a command
-- of another job against it is refused at start, since two jobs' reconciles
-- would each soft-delete the rows of the other's feed. --take-table hands a
-- table to another job on purpose.
CREATE TABLE IF NOT EXISTS sync_table_owners (
  table_name varchar(64) COLLATE "C" NOT NULL PRIMARY KEY,
  job        varchar(191) NOT NULL,
  claimed_at timestamptz(3) NOT NULL
);
