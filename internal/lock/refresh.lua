-- refresh.lua sets a new TTL on a lock only while it carries the caller's
-- token.
--
-- KEYS[1]  lock key            ARGV[1]  token
-- ARGV[2]  new TTL in ms
--
-- Returns 1 when extended, 0 when the lock had expired or passed on.
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
