-- obtain_many.lua tries once to grant each of several lease locks, like
-- obtain.lua, in one round trip, reading and writing each fence counter
-- once per call. All keys must live in one hash slot when the server is a
-- cluster node.
--
-- KEYS[i]     lock key i, for i = 1..n
-- KEYS[n+j]   fence counter j, for j = 1..m: each counter named once, the
--             locks of counter 1 first, then those of counter 2, and so on
-- KEYS[n+2]   with ARGV[2] = -1: the epoch counter of KEYS[n+1] (m = 1)
-- ARGV[1]     lease TTL in ms
-- ARGV[2]     fence counter TTL in ms, or 0 to keep counters without expiry,
--             or -1 for one counter without expiry and its epoch counter
-- ARGV[3]     a step in microseconds to round the clock up to, or 0
-- ARGV[4]     with a step: the floor proposed for every lock (see
--             obtain.lua), else 0
-- ARGV[5]     n
-- ARGV[6]...  the tokens of the n locks, in KEYS order, run-length coded
--             (see tokens.lua): a token, then '*' and a count when the
--             next locks carry it too
-- then        how many locks, in KEYS order, counter j serves, for j =
--             1..m (not with ARGV[2] = -1)
--
-- A call names each key once, a token once for each run of locks that
-- carry it, and each counter once, whatever the number of locks that
-- share it: a Redlock's batch spreads its keys over 64 counters, and one
-- proposed floor serves the whole call.
--
-- Returns one integer per lock: its fencing token, 0 when it is held, or
-- -1 when its counter is not an integer (nothing is granted on it). Each
-- token is max(counter + 1, floor), the floor being the server TIME in
-- microseconds, or with a step as obtain.lua computes it; the counter
-- moves on with every grant and is written once, at the last token it
-- handed out. So the tokens of one counter strictly increase in key order.
--
-- With an epoch counter, the tokens come from it as obtain.lua's do: one
-- INCRBY by the number of grants, or a new epoch when it is gone or would
-- cross a multiple of 500; the tokens of the call are consecutive.

local step = tonumber(ARGV[3])
local n = tonumber(ARGV[5])
local token, after = tokens(6, n)

if ARGV[2] == '-1' then
	local out, granted = {}, {}
	for i = 1, n do
		out[i] = 0
		if redis.call('SET', KEYS[i], token[i], 'NX', 'PX', ARGV[1]) then
			granted[#granted + 1] = i
		end
	end
	local g = #granted
	if g == 0 then
		return out
	end
	local c = redis.pcall('INCRBY', KEYS[n + 2], g)
	local first
	if type(c) == 'number' and c - g > 1e12 then
		local prev = c - g
		if c <= prev + (500 - prev % 500) % 500 then
			first = prev + 1
		end
	end
	if not first then
		local t = redis.call('TIME')
		local b = redis.pcall('GET', KEYS[n + 1])
		if type(b) == 'table' or (b and not string.find(b, '^%d+$')) then
			for _, i in ipairs(granted) do
				redis.call('DEL', KEYS[i])
				out[i] = -1
			end
			return out
		end
		first = math.max(tonumber(t[1]) * 1000000 + tonumber(t[2]), tonumber(b) or 0) + 1
		local last = first + g - 1
		redis.call('SET', KEYS[n + 2], string.format('%.0f', last), 'PX', 10)
		redis.call('SET', KEYS[n + 1], string.format('%.0f', last + (500 - last % 500) % 500))
	end
	for j, i in ipairs(granted) do
		out[i] = first + j - 1
	end
	return out
end

local t = redis.call('TIME')
local clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
if step > 0 then
	clock = math.ceil(clock / step) * step
	local p = tonumber(ARGV[4])
	if p > clock and p <= clock + 2 * step then
		clock = p
	end
end

local out = {}
local i = 0
for j = n + 1, #KEYS do
	local k = KEYS[j]
	local last = redis.pcall('GET', k)
	local bad = type(last) == 'table' or (last and not string.find(last, '^%d+$'))
	last = tonumber(last) or 0
	local moved = false
	for _ = 1, tonumber(ARGV[after + j - n - 1]) do
		i = i + 1
		if bad then
			out[i] = -1
		elseif redis.call('SET', KEYS[i], token[i], 'NX', 'PX', ARGV[1]) then
			local fence = clock
			if last >= fence then
				fence = last + 1
			end
			last = fence
			moved = true
			out[i] = fence
		else
			out[i] = 0
		end
	end
	if moved then
		if ARGV[2] ~= '0' then
			redis.call('SET', k, string.format('%.0f', last), 'PX', ARGV[2])
		else
			redis.call('SET', k, string.format('%.0f', last))
		end
	end
end
return out
