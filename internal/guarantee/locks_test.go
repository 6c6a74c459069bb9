package guarantee

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/internal/redisproc"
	"github.com/erpsync/erpsync/internal/redistest"
	"github.com/erpsync/erpsync/internal/syncer"
	"github.com/erpsync/erpsync/lock"
)

// Lock services a feed's executions take their locks from.
const (
	lockRedis   = "" // the one Redis of the test environment
	lockRedlock = "redlock"
	lockCluster = "cluster"
)

// locker is what a feed needs of its lock service: what the syncer uses,
// batches included. *lock.Client and *lock.Redlock provide it.
type locker interface {
	syncer.Locker
	ObtainMany(ctx context.Context, keys []string, ttl time.Duration) ([]*lock.Lock, error)
	ReleaseMany(ctx context.Context, locks []*lock.Lock) (notHeld int, err error)
}

// genLocks picks the feed's lock service: Redlock over three masters in
// one feed of four, a Redis Cluster of three masters in another.
func genLocks(s *source) string {
	switch s.intn(4) {
	case 0:
		return lockRedlock
	case 1:
		return lockCluster
	}
	return lockRedis
}

// topology is the Redlock masters and the Redis Cluster that feeds share,
// each feed under its own key prefix: started once per test binary, on
// first use, and stopped by TestMain.
var topology struct {
	once    sync.Once
	err     error
	masters []*redisproc.Server // independent: Redlock's nodes
	cluster []*redisproc.Server
	nodes   []redis.UniversalClient
	clu     *redis.ClusterClient
}

// nodeOptions are the options erpsync gives each Redlock master's client.
func nodeOptions(addr string) *redis.Options {
	return &redis.Options{Addr: addr, DialTimeout: 3 * time.Second, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second,
		PoolSize: 64, MaxRetries: -1, ContextTimeoutEnabled: true}
}

func startTopology() error {
	topology.once.Do(func() {
		t := &topology
		if t.masters, t.err = redisproc.StartN(3); t.err != nil {
			return
		}
		if t.cluster, t.err = redisproc.StartCluster(3); t.err != nil {
			return
		}
		for _, m := range t.masters {
			t.nodes = append(t.nodes, redis.NewClient(nodeOptions(m.Addr)))
		}
		t.clu = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: redisproc.Addrs(t.cluster), DialTimeout: 3 * time.Second, ReadTimeout: 3 * time.Second,
			WriteTimeout: 3 * time.Second, PoolSize: 64, MaxRetries: 2, ContextTimeoutEnabled: true,
		})
	})
	return topology.err
}

// stopTopology stops what startTopology started.
func stopTopology() {
	t := &topology
	for _, c := range t.nodes {
		c.Close()
	}
	if t.clu != nil {
		t.clu.Close()
	}
	redisproc.StopAll(t.masters)
	redisproc.StopAll(t.cluster)
}

// newLocks returns the lock service of the feed's scenario as erpsync
// wires it for --redis-addrs or --redis-cluster.
func (f *feed) newLocks() locker {
	opt := &lock.Options{Prefix: f.prefix}
	if f.sc.Locks == lockRedis {
		return lock.New(f.w.rdb, opt)
	}
	if err := startTopology(); err != nil {
		f.t.Fatalf("start the Redlock masters and the Redis Cluster: %v", err)
	}
	if f.sc.Locks == lockRedlock {
		return lock.NewRedlock(topology.nodes, opt)
	}
	return lock.New(topology.clu, opt)
}

// lockFlags are the flags of an erpsync process on the feed's lock
// service.
func (f *feed) lockFlags() []string {
	switch f.sc.Locks {
	case lockRedlock:
		return []string{"--redis-addrs", strings.Join(redisproc.Addrs(topology.masters), ",")}
	case lockCluster:
		return []string{"--redis-cluster", "--redis-addr", strings.Join(redisproc.Addrs(topology.cluster), ",")}
	}
	return nil
}

// dropLocks deletes what the feed left under its prefix on its lock
// service, after a Redlock has sent what its calls to slower masters
// still owed.
func (f *feed) dropLocks(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	switch l := f.locks.(type) {
	case *lock.Redlock:
		_ = l.Wait(ctx)
		for _, n := range topology.nodes {
			err = errors.Join(err, redistest.DeletePrefix(n, f.prefix))
		}
	default:
		if f.sc.Locks == lockCluster {
			// Key by key: one UNLINK of keys in several slots is refused.
			err = topology.clu.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
				p := c.Pipeline()
				iter := c.Scan(ctx, 0, f.prefix+"*", 1000).Iterator()
				for iter.Next(ctx) {
					p.Unlink(ctx, iter.Val())
				}
				if err := iter.Err(); err != nil {
					return err
				}
				_, err := p.Exec(ctx)
				return err
			})
		} else {
			err = redistest.DeletePrefix(f.w.rdb, f.prefix)
		}
	}
	if err != nil {
		t.Logf("delete the feed's lock keys: %v", err)
	}
}

// services names the feed's lock service and ERP source.
func (sc *scenario) services() string {
	s := map[string]string{lockRedis: "locks: one Redis", lockRedlock: "locks: Redlock over 3 masters", lockCluster: "locks: a Redis Cluster of 3 masters"}[sc.Locks]
	if sc.OData != nil {
		return s + "; " + sc.OData.String()
	}
	if sc.Typed != nil && sc.Typed.DocsOData != nil {
		return s + "; the documents' OData V2 face"
	}
	return s + "; the REST API"
}
