package proctest

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/internal/redistest"
)

// Redis is a redis-server without persistence on its own port, which a test
// can kill and start again empty on the same address.
type Redis = redistest.Server

// StartRedis starts a redis-server (--save "" --appendonly no) on a free
// port; it is killed when the test ends.
func StartRedis(t testing.TB) *Redis { return redistest.Start(t) }

// dropKeys deletes every key under prefix on the Redis at addr: the lock
// keys and fence counters a scenario left on the shared server.
func dropKeys(addr, prefix string) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	_ = redistest.DeletePrefix(c, prefix)
}
