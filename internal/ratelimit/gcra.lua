-- GCRA reservation. KEYS[1]: the limiter's key. ARGV[1]: emission interval
-- in microseconds (1e6 / rate). ARGV[2]: burst tolerance in microseconds.
-- Reserves the next slot and returns how many microseconds the caller must
-- wait before using it (0: go now). Times come from the server's clock so
-- every client shares one.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then
  tat = now
end
local wait = tat - tolerance - now
if wait < 0 then
  wait = 0
end
local new_tat = tat + interval
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.floor((new_tat - now) / 1000) + 1000)
return math.floor(wait)
