-- obtain_many.lua tries once to grant each of several lease locks, like
-- obtain.lua, in one round trip, with one fence counter for all of them.
-- All keys must live in one hash slot when the server is a cluster node.
--
-- KEYS[1]  fence counter key   KEYS[1+i] lock key i
-- ARGV[1]  lease TTL in ms     ARGV[2]  fence counter TTL in ms, or 0 to
--                                       keep the counter without expiry
-- ARGV[2+i] token of lock i
--
-- Returns one integer per lock: its fencing token, or 0 when it is held.
-- Tokens granted by one call are distinct and increase in key order: the
-- first is max(counter + 1, server TIME in microseconds), each next one is
-- one more, and the counter is left at the last. The counter is read and
-- written once per call, whatever the number of keys.

-- Read the counter before writing anything, so that a WRONGTYPE error
-- leaves no lock behind.
local last = tonumber(redis.call('GET', KEYS[1]))

local out = {}
local granted = 0
for i = 2, #KEYS do
	if redis.call('SET', KEYS[i], ARGV[1 + i], 'NX', 'PX', ARGV[1]) then
		granted = granted + 1
		out[i - 1] = granted
	else
		out[i - 1] = 0
	end
end
if granted == 0 then
	return out
end

local t = redis.call('TIME')
local first = tonumber(t[1]) * 1000000 + tonumber(t[2])
if last and last >= first then
	first = last + 1
end
for i = 1, #out do
	if out[i] > 0 then
		out[i] = first + out[i] - 1
	end
end
local fence = string.format('%.0f', first + granted - 1)
if ARGV[2] ~= '0' then
	redis.call('SET', KEYS[1], fence, 'PX', ARGV[2])
else
	redis.call('SET', KEYS[1], fence)
end
return out
