-- The contract's table: one row per erp_id. The UNIQUE constraint is the
-- second line of defense behind the per-record Redis lock. erp_id compares
-- byte for byte (COLLATE "C").
CREATE TABLE IF NOT EXISTS memberships (
  erp_id         varchar(64) COLLATE "C" NOT NULL,
  member_id      varchar(64) NOT NULL,
  product_code   varchar(32) NOT NULL,
  status         varchar(16) NOT NULL,
  starts_at      timestamptz(3) NOT NULL,
  ends_at        timestamptz(3) NULL,
  erp_version    bigint NOT NULL,
  erp_updated_at timestamptz(3) NOT NULL,
  fence_token    bigint NOT NULL,
  created_at     timestamptz(3) NOT NULL,
  updated_at     timestamptz(3) NOT NULL,
  CONSTRAINT uq_memberships_erp_id UNIQUE (erp_id)
);
