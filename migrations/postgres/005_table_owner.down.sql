DROP TABLE IF EXISTS sync_table_owners;
