-- release_many.lua deletes each lock that still carries its token.
--
-- KEYS[i]  lock key i
-- ARGV     the token of each lock, in KEYS order, run-length coded (see
--          tokens.lua)
--
-- Returns one integer per lock, as release.lua does: 1 when deleted, 0
-- when the lock carries another token, -1 when the key is gone (a key
-- named twice is deleted once, and is gone for its second entry).
--
-- It reads the keys with one MGET and deletes the released ones with one
-- DEL, per 1,000 keys, instead of a GET and a DEL a key: a call of a
-- script costs Redis more than the lookup it makes (measured with 500
-- keys a call: about a fifth of the Redis CPU of a grant and its release).
local n = #KEYS
local token = tokens(1, n)
local out, del, deleted = {}, {}, {}
for s = 1, n, 1000 do
	local e = math.min(s + 999, n)
	local vs = redis.call('MGET', unpack(KEYS, s, e))
	for i = s, e do
		local k, v = KEYS[i], vs[i - s + 1]
		if deleted[k] then
			out[i] = -1
		elseif v == token[i] then
			out[i] = 1
			deleted[k] = true
			del[#del + 1] = k
		elseif v then
			out[i] = 0
		else
			out[i] = -1
		end
	end
end
for s = 1, #del, 1000 do
	redis.call('DEL', unpack(del, s, math.min(s + 999, #del)))
end
return out
