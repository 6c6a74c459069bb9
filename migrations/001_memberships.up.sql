-- The contract's table: one row per erp_id. The UNIQUE index is the second
-- line of defense behind the per-record Redis lock.
CREATE TABLE IF NOT EXISTS memberships (
  erp_id         VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  member_id      VARCHAR(64) NOT NULL,
  product_code   VARCHAR(32) NOT NULL,
  status         VARCHAR(16) NOT NULL,
  starts_at      DATETIME(3) NOT NULL,
  ends_at        DATETIME(3) NULL,
  erp_version    BIGINT NOT NULL,
  erp_updated_at DATETIME(3) NOT NULL,
  fence_token    BIGINT NOT NULL,
  created_at     DATETIME(3) NOT NULL,
  updated_at     DATETIME(3) NOT NULL,
  UNIQUE KEY uq_memberships_erp_id (erp_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
