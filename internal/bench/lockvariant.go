package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// The lock variant below is not used by erpsync: it prices the leases
// alone, the floor under any design with a lease per record, against
// ObtainMany and ReleaseMany. (It also priced one fence counter per call
// before lock adopted it.)

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

// leasesOnly obtains and releases the leases of keys, one script call each.
func leasesOnly(ctx context.Context, rdb redis.UniversalClient, keys []string) error {
	args := make([]any, 0, len(keys)+1)
	args = append(args, int64(30000))
	raw := make([]byte, 24)
	toks := make([]any, len(keys))
	for i := range keys {
		if _, err := rand.Read(raw); err != nil {
			return err
		}
		toks[i] = base64.RawURLEncoding.EncodeToString(raw)
		args = append(args, toks[i])
	}
	got, err := obtainNoFence.Run(ctx, rdb, keys, args...).Int64Slice()
	if err != nil {
		return fmt.Errorf("obtain: %w", err)
	}
	var rk []string
	var ra []any
	for i, g := range got {
		if g > 0 {
			rk = append(rk, keys[i])
			ra = append(ra, toks[i])
		}
	}
	if len(rk) == 0 {
		return nil
	}
	return releaseMany.Run(ctx, rdb, rk, ra...).Err()
}
