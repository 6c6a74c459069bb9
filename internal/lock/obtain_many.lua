-- obtain_many.lua tries once to grant each of several lease locks, like
-- obtain.lua per pair of keys, in one round trip. All keys must live in one
-- hash slot when the server is a cluster node.
--
-- KEYS     lock key 1, fence key 1, lock key 2, fence key 2, ...
-- ARGV[1]  lease TTL in ms     ARGV[2]  fence counter TTL in ms
-- ARGV[2+i] token of lock i
--
-- Returns one integer per lock: its fencing token, or 0 when it is held.
-- Tokens granted by one call are distinct and increase in key order: the
-- time floor moves one microsecond past each token it hands out.

local n = #KEYS / 2

-- Read every counter before writing anything, so that a WRONGTYPE error
-- leaves no lock behind.
local last = {}
for i = 1, n do
	last[i] = tonumber(redis.call('GET', KEYS[2 * i]))
end

local t = redis.call('TIME')
local floor = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out = {}
for i = 1, n do
	if redis.call('SET', KEYS[2 * i - 1], ARGV[2 + i], 'NX', 'PX', ARGV[1]) then
		local fence = floor
		if last[i] and last[i] >= fence then
			fence = last[i] + 1
		end
		redis.call('SET', KEYS[2 * i], string.format('%.0f', fence), 'PX', ARGV[2])
		out[i] = fence
		floor = fence + 1
	else
		out[i] = 0
	end
end
return out
