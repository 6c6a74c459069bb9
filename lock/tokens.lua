-- tokens.lua heads obtain_many.lua and release_many.lua: it decodes the
-- lock tokens of their calls, which come run-length coded. The locks of
-- one ObtainMany share its token, so a call names a token once for the
-- locks in a row that carry it: the token, then, when the next locks
-- carry it too, '*' and how many of them. A token is base64url and never
-- starts with '*'. A call of 500 locks with one token sends 2 arguments
-- for them instead of 500.

-- tokens returns the n tokens coded from ARGV[first] on, as a table, and
-- the index of the first argument after them.
local function tokens(first, n)
	local out, a, k = {}, first, 0
	while k < n do
		local v = ARGV[a]
		a = a + 1
		if string.byte(v, 1) == 42 then
			local t = out[k]
			for _ = 1, tonumber(string.sub(v, 2)) do
				k = k + 1
				out[k] = t
			end
		else
			k = k + 1
			out[k] = v
		end
	end
	return out, a
end

