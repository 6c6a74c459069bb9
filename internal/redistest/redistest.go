// Package redistest starts redis-server processes (internal/redisproc)
// for tests that kill, pause or restart their Redis: each without
// persistence, on a free loopback port of its own, and killed when the
// test ends; and it deletes what tests left on a shared Redis
// (DeletePrefix). It needs redis-server in PATH and nothing of erpsync
// but internal/redisproc and internal/freeport, so that lock's tests can
// use it as well as the process harness (internal/proctest).
package redistest

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/internal/freeport"
	"github.com/erpsync/erpsync/internal/redisproc"
)

// Server is a redis-server (--save "" --appendonly no) that a test can
// kill, pause, and start again empty on the same address.
type Server struct {
	// Addr is the server's host:port.
	Addr string
	t    testing.TB
	dir  string
	args []string
	p    *redisproc.Server // nil while killed
}

// Start starts a redis-server with extra args on a free port and waits
// until it answers; it is killed when the test ends. A port found free may
// be taken before the server binds it (an outgoing connection of another
// process draws from the same range): a server that exits before it
// answers is started on another port, five times at most.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is needed in PATH for this test: %v", err)
	}
	s := &Server{t: t, dir: t.TempDir(), args: args}
	t.Cleanup(s.Kill)
	for try := 1; ; try++ {
		addr, err := freeport.Addr()
		if err != nil {
			t.Fatal(err)
		}
		s.Addr = addr
		if s.launch() {
			return s
		}
		if try == 5 {
			t.Fatalf("redis-server exited before it answered, on five ports, the last %s", s.Addr)
		}
	}
}

// Start starts the server on s.Addr, empty, and waits until it answers.
func (s *Server) Start() {
	s.t.Helper()
	if !s.launch() {
		s.t.Fatalf("redis-server on %s exited before it answered", s.Addr)
	}
}

// launch starts the server on s.Addr and waits until it answers, or
// reports false when it exits first.
func (s *Server) launch() bool {
	s.t.Helper()
	p, err := redisproc.Launch(s.Addr, s.dir, s.args...)
	switch {
	case errors.Is(err, redisproc.ErrExited):
		return false
	case err != nil:
		s.t.Fatal(err)
	}
	s.p = p
	return true
}

// Up reports whether the server answers PING within 200 ms.
func (s *Server) Up() bool {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	return c.Ping(ctx).Err() == nil
}

// Kill kills the server with SIGKILL (it forgets every key; a paused one
// too) and waits for it to exit.
func (s *Server) Kill() {
	if s.p == nil {
		return
	}
	s.p.Kill()
	s.p = nil
}

// Pause stops the server (SIGSTOP) until Resume: it keeps its connections
// open and answers nothing.
func (s *Server) Pause() { s.p.Pause() }

// Resume lets a paused server go on (SIGCONT).
func (s *Server) Resume() { s.p.Resume() }

// DeletePrefix deletes every key under prefix (lock keys and fence
// counters alike), within 30 s: what tests left on a shared Redis.
func DeletePrefix(rdb redis.UniversalClient, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, prefix+"*", 10_000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return err
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		if err := rdb.Unlink(ctx, keys[:n]...).Err(); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}
