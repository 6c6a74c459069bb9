-- release.lua deletes a lock only while it still carries the caller's token.
--
-- KEYS[1]  lock key            ARGV[1]  token
--
-- Returns 1 when deleted, 0 when the lock had expired or passed on.
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0
