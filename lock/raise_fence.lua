-- raise_fence.lua raises fence counters to tokens granted elsewhere: the
-- largest token of a Redlock quorum is written back to the counters of the
-- nodes that granted less, so that every later quorum, which shares a node
-- with this one, hands out a larger token. ObtainMany raises the counters
-- of a whole batch in one call per node (per slot on a cluster node).
--
-- KEYS[i]    fence counter i
-- ARGV[1]    fence counter TTL in ms, or 0 to keep the counters without
--            expiry
-- ARGV[1+i]  token for counter i (decimal digits)
--
-- Sets each counter to max(counter, token) and returns the counters, one
-- integer each, in order. A counter already at or above its token is left
-- alone, TTL included. A counter named twice ends at the larger token.
local out = {}
for i = 1, #KEYS do
	local cur = tonumber(redis.call('GET', KEYS[i]))
	local want = tonumber(ARGV[1 + i])
	if cur and cur >= want then
		out[i] = cur
	else
		if ARGV[1] ~= '0' then
			redis.call('SET', KEYS[i], ARGV[1 + i], 'PX', ARGV[1])
		else
			redis.call('SET', KEYS[i], ARGV[1 + i])
		end
		out[i] = want
	end
end
return out
