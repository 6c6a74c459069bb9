-- release_many.lua deletes each lock that still carries its token.
--
-- KEYS[i]  lock key i          ARGV[i]  token of lock i
--
-- Returns one integer per lock, as release.lua does: 1 when deleted, 0
-- when the lock carries another token, -1 when the key is gone.
local out = {}
for i = 1, #KEYS do
	local v = redis.call('GET', KEYS[i])
	if v == ARGV[i] then
		out[i] = redis.call('DEL', KEYS[i])
	elseif v then
		out[i] = 0
	else
		out[i] = -1
	end
end
return out
