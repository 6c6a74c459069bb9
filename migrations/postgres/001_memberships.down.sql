DROP TABLE IF EXISTS memberships;
