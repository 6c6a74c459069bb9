package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// The lock variants below exist to price a change to internal/lock before
// making it: they are not used by erpsync. Each obtains (and then
// releases) the locks of a chunk in one script call, like ObtainMany and
// ReleaseMany.

// obtainOneFence is obtain_many.lua with one fence counter per call
// instead of one per key: tokens still increase for every key (they
// increase across all keys), there is one counter read and one write per
// chunk instead of one of each per record, and no fence key is left per
// record.
//
// KEYS: lock keys..., then the fence counter. ARGV: lease ms, counter ms,
// tokens...
var obtainOneFence = redis.NewScript(`
local n = #KEYS - 1
local fk = KEYS[#KEYS]
local last = tonumber(redis.call('GET', fk))
local t = redis.call('TIME')
local floor = tonumber(t[1]) * 1000000 + tonumber(t[2])
if last and last >= floor then floor = last + 1 end
local out = {}
local granted = false
for i = 1, n do
	if redis.call('SET', KEYS[i], ARGV[2 + i], 'NX', 'PX', ARGV[1]) then
		out[i] = floor
		floor = floor + 1
		granted = true
	else
		out[i] = 0
	end
end
if granted then
	redis.call('SET', fk, string.format('%.0f', floor - 1), 'PX', ARGV[2])
end
return out
`)

// obtainNoFence grants the leases only: the floor of any design with a
// lease per record.
var obtainNoFence = redis.NewScript(`
local out = {}
for i = 1, #KEYS do
	if redis.call('SET', KEYS[i], ARGV[1 + i], 'NX', 'PX', ARGV[1]) then
		out[i] = 1
	else
		out[i] = 0
	end
end
return out
`)

// releaseMany is release_many.lua.
var releaseMany = redis.NewScript(`
local n = 0
for i = 1, #KEYS do
	if redis.call('GET', KEYS[i]) == ARGV[i] then
		n = n + redis.call('DEL', KEYS[i])
	end
end
return n
`)

// lockVariant obtains and releases the locks of keys with script obtain;
// fence is the fence counter key, or "" for none.
func lockVariant(ctx context.Context, rdb redis.UniversalClient, obtain *redis.Script, fence string, keys []string) error {
	rk, ra, err := obtainVariant(ctx, rdb, obtain, fence, keys)
	if err != nil {
		return err
	}
	return releaseVariant(ctx, rdb, rk, ra)
}

// obtainVariant obtains the locks of keys with script obtain and returns
// the keys granted and their tokens.
func obtainVariant(ctx context.Context, rdb redis.UniversalClient, obtain *redis.Script, fence string, keys []string) ([]string, []any, error) {
	args := make([]any, 0, len(keys)+2)
	args = append(args, int64(30000))
	if fence != "" {
		args = append(args, int64(3600000))
	}
	raw := make([]byte, 24)
	toks := make([]string, len(keys))
	for i := range keys {
		if _, err := rand.Read(raw); err != nil {
			return nil, nil, err
		}
		toks[i] = base64.RawURLEncoding.EncodeToString(raw)
		args = append(args, toks[i])
	}
	k := keys
	if fence != "" {
		k = append(append(make([]string, 0, len(keys)+1), keys...), fence)
	}
	got, err := obtain.Run(ctx, rdb, k, args...).Int64Slice()
	if err != nil {
		return nil, nil, fmt.Errorf("obtain: %w", err)
	}
	var rk []string
	var ra []any
	for i, g := range got {
		if g > 0 {
			rk = append(rk, keys[i])
			ra = append(ra, toks[i])
		}
	}
	return rk, ra, nil
}

// releaseVariant releases what obtainVariant granted.
func releaseVariant(ctx context.Context, rdb redis.UniversalClient, keys []string, tokens []any) error {
	if len(keys) == 0 {
		return nil
	}
	return releaseMany.Run(ctx, rdb, keys, tokens...).Err()
}
