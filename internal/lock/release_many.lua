-- release_many.lua deletes each lock that still carries its token.
--
-- KEYS[i]  lock key i          ARGV[i]  token of lock i
--
-- Returns how many locks were deleted.
local n = 0
for i = 1, #KEYS do
	if redis.call('GET', KEYS[i]) == ARGV[i] then
		n = n + redis.call('DEL', KEYS[i])
	end
end
return n
