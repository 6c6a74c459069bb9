-- Checkpoints: one row per job (and per resumable backfill window). The
-- fence_token is the job lock's fencing token of the last writer; a writer
-- with an older token cannot move the position.
CREATE TABLE IF NOT EXISTS sync_checkpoints (
  name        VARCHAR(191) NOT NULL PRIMARY KEY,
  position    DATETIME(3) NOT NULL,
  fence_token BIGINT NOT NULL,
  run_id      VARCHAR(40) NOT NULL,
  updated_at  DATETIME(3) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Run history: every run, skipped ones included.
CREATE TABLE IF NOT EXISTS sync_runs (
  id                 BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  run_id             VARCHAR(40) NOT NULL,
  job                VARCHAR(191) NOT NULL,
  mode               VARCHAR(16) NOT NULL,
  status             VARCHAR(16) NOT NULL,
  host               VARCHAR(255) NOT NULL,
  pid                INT NOT NULL,
  window_since       DATETIME(3) NULL,
  window_until       DATETIME(3) NULL,
  shard              VARCHAR(32) NOT NULL DEFAULT '',
  fence_token        BIGINT NOT NULL DEFAULT 0,
  started_at         DATETIME(3) NOT NULL,
  finished_at        DATETIME(3) NULL,
  fetched            BIGINT NOT NULL DEFAULT 0,
  inserted           BIGINT NOT NULL DEFAULT 0,
  updated            BIGINT NOT NULL DEFAULT 0,
  unchanged          BIGINT NOT NULL DEFAULT 0,
  duplicates_in_feed BIGINT NOT NULL DEFAULT 0,
  lock_contended     BIGINT NOT NULL DEFAULT 0,
  unique_violations  BIGINT NOT NULL DEFAULT 0,
  stale_rejected     BIGINT NOT NULL DEFAULT 0,
  invalid            BIGINT NOT NULL DEFAULT 0,
  failed             BIGINT NOT NULL DEFAULT 0,
  erp_requests       BIGINT NOT NULL DEFAULT 0,
  erp_retries        BIGINT NOT NULL DEFAULT 0,
  records_per_second DOUBLE NOT NULL DEFAULT 0,
  error              TEXT NULL,
  UNIQUE KEY uq_sync_runs_run_id (run_id),
  KEY ix_sync_runs_job_started (job, started_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Invalid records from the feed, with the reason and the raw payload. One row
-- per distinct payload: replays bump seen_count instead of growing the table.
CREATE TABLE IF NOT EXISTS quarantined_records (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  payload_hash CHAR(64) NOT NULL,
  job          VARCHAR(191) NOT NULL,
  run_id       VARCHAR(40) NOT NULL,
  erp_id       VARCHAR(255) NULL,
  reason       VARCHAR(1024) NOT NULL,
  payload      MEDIUMBLOB NOT NULL,
  seen_count   BIGINT NOT NULL DEFAULT 1,
  first_seen   DATETIME(3) NOT NULL,
  last_seen    DATETIME(3) NOT NULL,
  UNIQUE KEY uq_quarantined_payload (payload_hash),
  KEY ix_quarantined_erp_id (erp_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
