-- raise_fence.lua raises a fence counter to a token granted elsewhere: the
-- largest token of a Redlock quorum is written back to the counters of the
-- nodes that granted less, so that every later quorum, which shares a node
-- with this one, hands out a larger token.
--
-- KEYS[1]  fence counter key   ARGV[1]  token (decimal digits)
-- ARGV[2]  fence counter TTL in ms, or 0 to keep the counter without expiry
--
-- Sets the counter to max(counter, token) and returns the counter. A
-- counter already at or above the token is left alone, TTL included.
local cur = tonumber(redis.call('GET', KEYS[1]))
local want = tonumber(ARGV[1])
if cur and cur >= want then
	return cur
end
if ARGV[2] ~= '0' then
	redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
	redis.call('SET', KEYS[1], ARGV[1])
end
return want
