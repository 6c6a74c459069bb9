-- release.lua deletes a lock only while it still carries the caller's token.
--
-- KEYS[1]  lock key            ARGV[1]  token
--
-- Returns 1 when deleted, 0 when the lock carries another token (it
-- expired and passed on), -1 when the key is gone (it expired, or was
-- deleted or lost, and no one holds it).
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
if v then
	return 0
end
return -1
