DROP TABLE IF EXISTS quarantined_records;
DROP TABLE IF EXISTS sync_runs;
DROP TABLE IF EXISTS sync_checkpoints;
