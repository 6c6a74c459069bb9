-- The outbox of change events. A sync write that changes a row records its
-- event here in the same transaction (outbox.Record); `erpsync relay`
-- delivers what is undelivered, in id order, and sets delivered_at. id is
-- the order of recording, not of commit: a transaction that commits late
-- has a lower id than events already delivered, so the relay reads
-- "delivered_at IS NULL", never "id past the last one delivered". The
-- UNIQUE index on the event's identity is the second line of defense
-- against one change recorded twice (overlapping runs, a retried chunk).
CREATE TABLE IF NOT EXISTS erpsync_events (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  event_id     CHAR(36) CHARACTER SET ascii NOT NULL,
  entity       VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  entity_key   VARCHAR(500) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  op           VARCHAR(8) CHARACTER SET ascii NOT NULL,
  version      BIGINT NOT NULL,
  run_id       VARCHAR(40) NOT NULL,
  body         MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  recorded_at  DATETIME(3) NOT NULL,
  delivered_at DATETIME(3) NULL,
  UNIQUE KEY uq_erpsync_events_event_id (event_id),
  UNIQUE KEY uq_erpsync_events_change (entity, entity_key, version, op),
  KEY ix_erpsync_events_delivered (delivered_at, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- The relay's fence: the highest fencing token of the relay job lock that
-- marked events delivered. A relay whose lock expired (a lower token)
-- cannot mark.
CREATE TABLE IF NOT EXISTS erpsync_relay_fence (
  name        VARCHAR(64) NOT NULL PRIMARY KEY,
  fence_token BIGINT NOT NULL,
  updated_at  DATETIME(3) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
