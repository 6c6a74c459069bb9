-- Keys compare byte for byte. utf8mb4_bin is a PAD SPACE collation: under
-- its UNIQUE index 'A' and 'A ' (a trailing space) are one key, so two
-- records of the ERP shared one row, and their change events one outbox
-- identity. utf8mb4_nopad_bin (MariaDB 10.2+) compares every byte; on a
-- server without it, migrate writes the server's NO PAD binary collation
-- in its place (MySQL 8: utf8mb4_0900_bin), or keeps utf8mb4_bin where it
-- has none. The change only tells apart keys that were one: no row merges
-- and no index refuses a row. Both columns are in an index, which is
-- rebuilt: a large outbox takes a while.
ALTER TABLE memberships MODIFY erp_id VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL;
ALTER TABLE erpsync_events MODIFY entity_key VARCHAR(500) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL;
