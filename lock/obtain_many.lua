-- obtain_many.lua tries once to grant each of several lease locks, like
-- obtain.lua, in one round trip, reading and writing each fence counter
-- once per call. All keys must live in one hash slot when the server is a
-- cluster node.
--
-- KEYS[i]    lock key i, for i = 1..n
-- KEYS[n+1]  the fence counter of every lock, or
-- KEYS[n+i]  the fence counter of lock i (locks may share one)
-- KEYS[n+2]  with ARGV[2] = -1: the epoch counter of KEYS[n+1]
-- ARGV[1]    lease TTL in ms
-- ARGV[2]    fence counter TTL in ms, or 0 to keep counters without expiry,
--            or -1 for one counter without expiry and its epoch counter
-- ARGV[3]    a step in microseconds to round the clock up to, or 0
-- ARGV[3+i]  token of lock i
-- ARGV[3+n+i] with a step: the floor proposed for lock i (see obtain.lua)
--
-- Returns one integer per lock: its fencing token, 0 when it is held, or
-- -1 when its counter is not an integer (nothing is granted on it). Each
-- token is max(counter + 1, floor), the floor being the server TIME in
-- microseconds, or with a step as obtain.lua computes it; the counter
-- moves on with every grant and is written once, at the last token it
-- handed out. So the tokens of one counter strictly increase in key order,
-- and a counter shared by all keys of a call is read and written once,
-- whatever their number.
--
-- With an epoch counter, the tokens come from it as obtain.lua's do: one
-- INCRBY by the number of grants, or a new epoch when it is gone or would
-- cross a multiple of 500; the tokens of the call are consecutive.

local step = tonumber(ARGV[3])
local n = #ARGV - 3
if step > 0 then
	n = n / 2
end
local shared = #KEYS == n + 1

if ARGV[2] == '-1' then
	local out, granted = {}, {}
	for i = 1, n do
		out[i] = 0
		if redis.call('SET', KEYS[i], ARGV[3 + i], 'NX', 'PX', ARGV[1]) then
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
end

-- Read every counter before writing anything: last[k] is its value (0 for
-- none), or false when it is not an integer.
local last = {}
for i = 1, shared and 1 or n do
	local k = KEYS[n + i]
	if last[k] == nil then
		local v = redis.pcall('GET', k)
		if type(v) == 'table' or (v and not string.find(v, '^%d+$')) then
			last[k] = false
		else
			last[k] = tonumber(v) or 0
		end
	end
end

local out = {}
local moved = {}
for i = 1, n do
	local k = shared and KEYS[n + 1] or KEYS[n + i]
	local cur = last[k]
	if cur == false then
		out[i] = -1
	elseif redis.call('SET', KEYS[i], ARGV[3 + i], 'NX', 'PX', ARGV[1]) then
		local fence = clock
		if step > 0 then
			local p = tonumber(ARGV[3 + n + i])
			if p > fence and p <= fence + 2 * step then
				fence = p
			end
		end
		if cur >= fence then
			fence = cur + 1
		end
		if moved[k] == nil then
			moved[k] = true
			moved[#moved + 1] = k
		end
		last[k] = fence
		out[i] = fence
	else
		out[i] = 0
	end
end
for _, k in ipairs(moved) do
	if ARGV[2] ~= '0' then
		redis.call('SET', k, string.format('%.0f', last[k]), 'PX', ARGV[2])
	else
		redis.call('SET', k, string.format('%.0f', last[k]))
	end
end
return out
