-- pttl.lua reports the remaining TTL of a lock that carries the caller's
-- token.
--
-- KEYS[1]  lock key            ARGV[1]  token
--
-- Returns the TTL in ms, or -3 when the lock is not held with this token.
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('PTTL', KEYS[1])
end
return -3
