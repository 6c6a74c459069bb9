// Package redisproc starts redis-server processes: single servers
// without persistence on free loopback ports (the nodes of a Redlock) and
// Redis Clusters of several masters, for the benchmarks, and through
// internal/redistest, which ties each server to a test, for the tests. It
// needs redis-server, and for a cluster redis-cli, in PATH, and nothing of
// erpsync but internal/freeport.
package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/internal/freeport"
)

// Server is one redis-server process.
type Server struct {
	// Addr is its host:port.
	Addr   string
	cmd    *exec.Cmd
	dir    string
	ownDir bool          // Stop removes dir: Start made it
	exited chan struct{} // closed once the process has exited
}

// Start starts a redis-server (--save "" --appendonly no) with extra
// args on a free loopback port, in a directory of its own, and waits until
// it answers. The port, and the one 10,000 above that a cluster node also
// binds, are drawn outside the ephemeral range (internal/freeport), yet
// another process's server may take one before this one binds it: a
// server that exits before it answers is started again on another port,
// five times at most.
func Start(args ...string) (*Server, error) {
	var err error
	for range 5 {
		var s *Server
		if s, err = start(args); err == nil {
			return s, nil
		}
		if !errors.Is(err, ErrExited) {
			return nil, err
		}
	}
	return nil, err
}

// ErrExited says a server exited before it answered: most often, another
// process had taken its port.
var ErrExited = errors.New("exited before it answered")

// start is one attempt of Start.
func start(args []string) (*Server, error) {
	port, err := freeport.TCP()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redisproc-")
	if err != nil {
		return nil, err
	}
	s, err := Launch("127.0.0.1:"+strconv.Itoa(port), dir, args...)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s.ownDir = true
	return s, nil
}

// Launch starts a redis-server (--save "" --appendonly no) with extra
// args on addr, a loopback host:port, its files in dir, and waits until it
// answers (30 s at most); ErrExited (wrapped) when it exits first. Stop
// leaves dir, so that the server can be launched again on the same
// address and directory.
func Launch(addr, dir string, args ...string) (*Server, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("redis-server", append([]string{"--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir}, args...)...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	s := &Server{Addr: addr, cmd: cmd, dir: dir, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	if err := s.wait(); err != nil {
		s.Kill()
		return nil, err
	}
	return s, nil
}

// StartN starts n servers with Start; on an error it stops those started.
func StartN(n int, args ...string) ([]*Server, error) {
	var out []*Server
	for range n {
		s, err := Start(args...)
		if err != nil {
			StopAll(out)
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// StartCluster starts a Redis Cluster of n masters (n >= 3), the slots
// split evenly between them by redis-cli, and waits until every master
// reports cluster_state:ok.
func StartCluster(n int) ([]*Server, error) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return nil, fmt.Errorf("a cluster needs redis-cli: %w", err)
	}
	servers, err := StartN(n, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
	if err != nil {
		return nil, err
	}
	args := []string{"--cluster", "create"}
	args = append(args, Addrs(servers)...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		StopAll(servers)
		return nil, fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, s := range servers {
		if err := s.clusterOK(ctx); err != nil {
			StopAll(servers)
			return nil, err
		}
	}
	return servers, nil
}

// Addrs returns the addresses of servers.
func Addrs(servers []*Server) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.Addr
	}
	return out
}

// Ports returns the ports of servers.
func Ports(servers []*Server) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		_, out[i], _ = net.SplitHostPort(s.Addr)
	}
	return out
}

// Kill kills the server with SIGKILL (it forgets every key; a paused one
// too) and waits for it to exit.
func (s *Server) Kill() {
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// Stop kills the server and removes the directory Start made for it.
func (s *Server) Stop() {
	s.Kill()
	if s.ownDir {
		_ = os.RemoveAll(s.dir)
	}
}

// Pause stops the server (SIGSTOP): it keeps its connections and answers
// nothing until Resume.
func (s *Server) Pause() { _ = s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume lets a paused server go on (SIGCONT).
func (s *Server) Resume() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }

// StopAll stops every server.
func StopAll(servers []*Server) {
	for _, s := range servers {
		s.Stop()
	}
}

func (s *Server) wait() error {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer func() { _ = rdb.Close() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("redis-server on %s %w", s.Addr, ErrExited)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer: %w", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Server) clusterOK(ctx context.Context) error {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer func() { _ = rdb.Close() }()
	for {
		info, err := rdb.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return nil
		}
		if ctx.Err() != nil {
			return errors.Join(fmt.Errorf("cluster node %s not ok: %q", s.Addr, info), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
