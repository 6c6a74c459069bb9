package proctest

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a redis-server without persistence on its own port, which a test
// can kill and start again empty on the same address.
type Redis struct {
	Addr string
	t    testing.TB
	dir  string
	cmd  *exec.Cmd
}

// StartRedis starts a redis-server (--save "" --appendonly no) on a free
// port; it is killed when the test ends.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	r := &Redis{Addr: FreeAddr(t), t: t, dir: t.TempDir()}
	r.Start()
	t.Cleanup(r.Kill)
	return r
}

// Start starts the server on r.Addr, empty, and waits until it answers.
func (r *Redis) Start() {
	r.t.Helper()
	port := r.Addr[strings.LastIndexByte(r.Addr, ':')+1:]
	r.cmd = exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.dir)
	if err := r.cmd.Start(); err != nil {
		r.t.Fatalf("start redis-server: %v", err)
	}
	if !Eventually(30*time.Second, r.Up) {
		r.t.Fatalf("redis-server on %s never answered", r.Addr)
	}
}

// Up reports whether the server answers PING.
func (r *Redis) Up() bool {
	c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	return c.Ping(context.Background()).Err() == nil
}

// Kill kills the server with SIGKILL (it forgets every key) and waits for
// it to exit.
func (r *Redis) Kill() {
	if r.cmd == nil {
		return
	}
	r.cmd.Process.Kill()
	r.cmd.Wait()
	r.cmd = nil
}

// dropKeys deletes every key under prefix on the Redis at addr: the lock
// keys and fence counters a scenario left on the shared server.
func dropKeys(addr, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		if keys = append(keys, iter.Val()); len(keys) == 1000 {
			c.Unlink(ctx, keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		c.Unlink(ctx, keys...)
	}
}
