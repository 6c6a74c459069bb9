DROP TABLE IF EXISTS erpsync_relay_fence;
DROP TABLE IF EXISTS erpsync_events;
