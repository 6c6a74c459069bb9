-- obtain.lua grants one lease lock and its fencing token in one step.
--
-- KEYS[1]  lock key            KEYS[2]  fence counter key (same hash slot)
-- KEYS[3]  optional: the epoch counter of KEYS[2] (same hash slot)
-- ARGV[1]  token               ARGV[2]  lease TTL in ms, or 0 (below)
-- ARGV[3]  fence counter TTL in ms, or 0 to keep the counter without expiry
-- ARGV[4]  optional: a step in microseconds to round the clock up to
-- ARGV[5]  optional, with ARGV[4]: a floor the caller proposes
--
-- Returns the fencing token of the grant, or 0 when the lock is held.
--
-- With a lease TTL of 0 it grants nothing: it hands out a fencing token to
-- a lock granted without one (Lock.FetchFence), only while KEYS[1] still
-- carries the token ARGV[1], and returns 0 when another token holds it, -1
-- when it is gone. Tokens are handed out in the order of the holds, then,
-- since holds of one key do not overlap: a holder that lost its lock can
-- no longer get one. A failure then leaves the lock as it was.
--
-- With an epoch counter (a Client's counter shared by all keys of a server
-- or a slot): the token is one INCR of the epoch counter, which lives
-- EPOCH_MS; only when that counter is gone (it expired, or was lost) or
-- would cross a multiple of SPAN does the grant read the clock, and then
-- it starts a new epoch at max(clock, bound) + 1, where the bound, KEYS[2],
-- kept without expiry, is the multiple of SPAN at or above the new epoch's
-- token. So every token handed out lies at or below the bound, and a new
-- epoch starts above it: tokens strictly increase while the bound lives,
-- whatever the clock does, and from the clock when it is gone. A grant
-- costs two Redis calls (the SET and an INCR) instead of the three of the
-- other way, below, and reads the clock and writes the bound about once
-- per EPOCH_MS. SPAN is 500 and EPOCH_MS 10 (the same in
-- obtain_many.lua): an epoch starts at the clock unless grants came faster
-- than one per microsecond, so a token is never more than SPAN ahead of the
-- clock unless they did (the other way's run ahead only then too), and it
-- may lag the clock by up to EPOCH_MS. EPOCH_MS was 2 until a
-- one-goroutine loop (about 7,000 grants a second) was measured starting a
-- new epoch every 12 grants; with 10, pairs ran 4-8% faster in interleaved
-- runs, and 50 gained no more.
--
-- Without one: the token is max(counter + 1, server TIME in microseconds),
-- and the counter is left at the token: the counter makes tokens strictly
-- increasing while it lives, the clock keeps them above every earlier token
-- after the counter expired or the server restarted empty. The counter may
-- be one key's own (with a TTL) or shared by many keys (see Client); either
-- way every token it hands out is larger than the last.
--
-- One SET ... GET reads and moves the counter: it writes the clock and
-- returns the value it replaced, and only a counter at or ahead of the
-- clock (more than one grant in a microsecond, or a clock stepped back)
-- costs a second write. Lua numbers are doubles, exact up to 2^53 (about
-- the year 2255 in microseconds); the clock is written as TIME's digits,
-- and a computed token with string.format('%.0f'), never with an exponent.
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

local granting = ARGV[2] ~= '0'
if granting then
	if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
		return 0
	end
else
	local v = redis.call('GET', KEYS[1])
	if v ~= ARGV[1] then
		return v and 0 or -1
	end
end

if KEYS[3] then
	-- An epoch counter below 1e12 is one INCR made anew: it was gone.
	local c = redis.pcall('INCR', KEYS[3])
	if type(c) == 'number' and c > 1e12 and (c - 1) % 500 ~= 0 then
		return c
	end
	local t = redis.call('TIME')
	local b = redis.pcall('GET', KEYS[2])
	if type(b) == 'table' then
		if granting then redis.call('DEL', KEYS[1]) end
		return b
	end
	if b and not string.find(b, '^%d+$') then
		if granting then redis.call('DEL', KEYS[1]) end
		return redis.error_reply('fence counter ' .. KEYS[2] .. ' is not an integer')
	end
	local fence = math.max(tonumber(t[1]) * 1000000 + tonumber(t[2]), tonumber(b) or 0) + 1
	redis.call('SET', KEYS[3], string.format('%.0f', fence), 'PX', 10)
	redis.call('SET', KEYS[2], string.format('%.0f', fence + (500 - fence % 500) % 500))
	return fence
end

local t = redis.call('TIME')
local floor, digits
local step = tonumber(ARGV[4])
if step and step > 1 then
	floor = math.ceil((tonumber(t[1]) * 1000000 + tonumber(t[2])) / step) * step
	local proposed = tonumber(ARGV[5])
	if proposed and proposed > floor and proposed <= floor + 2 * step then
		floor, digits = proposed, ARGV[5]
	else
		digits = string.format('%.0f', floor)
	end
else
	local us = t[2]
	if #us < 6 then
		us = string.rep('0', 6 - #us) .. us
	end
	digits = t[1] .. us
	floor = tonumber(digits)
end

local old
if ARGV[3] ~= '0' then
	old = redis.pcall('SET', KEYS[2], digits, 'PX', ARGV[3], 'GET')
else
	old = redis.pcall('SET', KEYS[2], digits, 'GET')
end
-- A counter that is not a string (WRONGTYPE: nothing was written) or not
-- an integer undoes the grant and fails the call; a foreign string is put
-- back.
if type(old) == 'table' then
	if granting then redis.call('DEL', KEYS[1]) end
	return old
end
if old then
	if not string.find(old, '^%d+$') then
		redis.call('SET', KEYS[2], old)
		if granting then redis.call('DEL', KEYS[1]) end
		return redis.error_reply('fence counter ' .. KEYS[2] .. ' is not an integer')
	end
	local last = tonumber(old)
	if last >= floor then
		floor = last + 1
		if ARGV[3] ~= '0' then
			redis.call('SET', KEYS[2], string.format('%.0f', floor), 'PX', ARGV[3])
		else
			redis.call('SET', KEYS[2], string.format('%.0f', floor))
		end
	end
end
return floor
