-- obtain.lua grants one lease lock and its fencing token in one step.
--
-- KEYS[1]  lock key            KEYS[2]  fence counter key (same hash slot)
-- ARGV[1]  token               ARGV[2]  lease TTL in ms
-- ARGV[3]  fence counter TTL in ms, or 0 to keep the counter without expiry
-- ARGV[4]  optional: a step in microseconds to round the clock up to
-- ARGV[5]  optional, with ARGV[4]: a floor the caller proposes
--
-- Returns the fencing token of the grant, or 0 when the lock is held.
-- The token is max(counter + 1, server TIME in microseconds), and the
-- counter is left at the token: the counter makes tokens strictly
-- increasing while it lives, the clock keeps them above every earlier token
-- after the counter expired or the server restarted empty. The counter may
-- be one key's own (with a TTL) or shared by many keys (without one, see
-- Client); either way every token it hands out is larger than the last.
--
-- INCR and INCRBY move a counter that exists in place, which costs the
-- server less than writing a new string. Lua numbers are doubles, exact up
-- to 2^53 (about the year 2255 in microseconds); string.format('%.0f')
-- stores them without an exponent.
--
-- With a step, the clock is rounded up to a multiple of it: a Redlock
-- passes 1000, so that nodes whose clocks agree within a millisecond hand
-- out the same token and the quorum need not write it back. Rounding up
-- keeps the token at or above the clock. A Redlock also proposes a floor,
-- its own clock rounded up plus one step, which every node whose rounded
-- clock lies at most two steps below it takes instead of its own: the
-- nodes then agree even when a millisecond boundary falls between their
-- calls, and a token stays less than two steps ahead of the clock of each
-- node that hands it out (or less than three when the two clocks differ).

if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
	return 0
end

local t = redis.call('TIME')
local floor = tonumber(t[1]) * 1000000 + tonumber(t[2])
local step = tonumber(ARGV[4])
if step and step > 1 then
	floor = math.ceil(floor / step) * step
	local proposed = tonumber(ARGV[5])
	if proposed and proposed > floor and proposed <= floor + 2 * step then
		floor = proposed
	end
end

-- A counter that is not an integer (WRONGTYPE, or a foreign value) undoes
-- the grant and fails the call.
local counted = redis.pcall('INCR', KEYS[2])
if type(counted) == 'table' then
	redis.call('DEL', KEYS[1])
	return counted
end

local fence = counted
if floor > fence then
	fence = floor
end
if ARGV[3] ~= '0' then
	redis.call('SET', KEYS[2], string.format('%.0f', fence), 'PX', ARGV[3])
elseif fence > counted then
	redis.call('INCRBY', KEYS[2], string.format('%.0f', fence - counted))
end
return fence
