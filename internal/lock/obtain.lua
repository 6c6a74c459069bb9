-- obtain.lua grants one lease lock and its fencing token in one step.
--
-- KEYS[1]  lock key            KEYS[2]  fence counter key (same hash slot)
-- ARGV[1]  token               ARGV[2]  lease TTL in ms
-- ARGV[3]  fence counter TTL in ms
-- ARGV[4]  optional: a step in microseconds to round the clock up to
--
-- Returns the fencing token of the grant, or 0 when the lock is held.
-- The token is max(counter + 1, server TIME in microseconds): the counter
-- makes it strictly increasing while it lives, the clock keeps it above
-- every earlier token after the counter expired or the server restarted
-- empty. Lua numbers are doubles, exact up to 2^53 (about the year 2255 in
-- microseconds); string.format('%.0f') stores them without an exponent.
--
-- With a step, the clock is rounded up to a multiple of it: a Redlock
-- passes 1000, so that nodes whose clocks agree within a millisecond hand
-- out the same token and the quorum need not write it back. Rounding up
-- keeps the token at or above the clock.

-- Read first: a WRONGTYPE error must come before anything is written.
local last = tonumber(redis.call('GET', KEYS[2]))

if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
	return 0
end

local t = redis.call('TIME')
local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
local step = tonumber(ARGV[4])
if step and step > 1 then
	fence = math.ceil(fence / step) * step
end
if last and last >= fence then
	fence = last + 1
end
redis.call('SET', KEYS[2], string.format('%.0f', fence), 'PX', ARGV[3])
return fence
