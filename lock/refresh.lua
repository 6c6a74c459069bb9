-- refresh.lua sets a new TTL on a lock only while it carries the caller's
-- token.
--
-- KEYS[1]  lock key            ARGV[1]  token
-- ARGV[2]  new TTL in ms
--
-- Returns 1 when extended, 0 when the lock carries another token (it
-- expired and passed on), -1 when the key is gone.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
	return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if v then
	return 0
end
return -1
