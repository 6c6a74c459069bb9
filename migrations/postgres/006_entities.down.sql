DROP TABLE IF EXISTS erpsync_entities;
