package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/redisproc"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
	"github.com/erpsync/erpsync/lock"
)

// Profile runs one backfill of cfg.Records records in this process, with
// the syncer wired as `erpsync backfill` wires it, into an emptied table
// (or, with rerun, once to fill it and again over the unchanged rows), and
// writes a CPU profile of the measured run to cpuProfile, and the
// allocations it made (go tool pprof -sample_index=alloc_space) to
// cpuProfile + ".allocs". The erpmock
// serving the feed runs in this process too, and shows in the profile.
// locks is where the record locks live: "redis" (or "") the Redis of cfg,
// "redlock" RedlockNodes redis-servers of its own, "cluster" a Redis
// Cluster of ClusterMasters of its own, as the backfill rows have them.
// With cfg.PostgresDSN, the backfill writes to that PostgreSQL database.
// With sc.Entity TypedEntity, the backfill is the typed one's: the
// TypedFeed of cfg.Records records, served from this process too, into
// the entity's table, and with events its change events into the
// outbox (emptied first), as the events row's backfill with events on.
func Profile(ctx context.Context, cfg Config, sc syncer.Config, rerun, events bool, cpuProfile, locks string) (*Result, error) {
	ip, err := startInProcess(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer ip.close()
	b, st, rdb := ip.bench, ip.store, ip.rdb
	var e syncer.Source = ip.erp
	tg := b.memberships("")
	if sc.Entity == TypedEntity {
		config := typedConfig
		if events {
			config = eventsConfig
			if err := b.emptyOutbox(ctx); err != nil {
				return nil, err
			}
		}
		ty, err := b.startEntity(ctx, TypedEntity, config, NewTypedFeed(cfg.Records))
		if err != nil {
			return nil, err
		}
		defer ty.close()
		sch, err := TypedSchema()
		if err != nil {
			return nil, err
		}
		if e, err = erp.New(erp.Config{BaseURL: ty.url, Schema: sch, Shape: TypedShape()}); err != nil {
			return nil, err
		}
		st, tg = ty.st, ty.target()
	}
	if err := b.empty(ctx, tg); err != nil {
		return nil, err
	}
	lk, stop, err := profileLocker(ctx, rdb, locks)
	if err != nil {
		return nil, err
	}
	defer stop()
	sc.Job, sc.Mode, sc.Since = tg.owner, syncer.ModeBackfill, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	sy, err := syncer.New(sc, e, st, lk, zerolog.Nop())
	if err != nil {
		return nil, err
	}
	if rerun {
		b.logf("profile: filling the table first")
		if _, err := sy.Run(ctx); err != nil {
			return nil, err
		}
	}
	f, err := os.Create(cpuProfile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, err
	}
	rep, err := sy.Run(ctx)
	pprof.StopCPUProfile()
	if err != nil {
		return nil, fmt.Errorf("backfill: %w", err)
	}
	if err := writeAllocs(cpuProfile + ".allocs"); err != nil {
		return nil, err
	}
	name := "in-process backfill"
	if sc.Entity == TypedEntity {
		name = "in-process typed backfill"
		if events {
			name += " with events"
		}
	}
	if rerun {
		name = "in-process re-run, unchanged"
	}
	if locks != "" {
		name += ", locks on " + locks
	}
	r := result(name, rep.Fetched, rep.FinishedAt.Sub(rep.StartedAt))
	r.Report = rep
	r.Note = fmt.Sprintf("workers %d, chunk %d, page %d; inserted %d, unchanged %d", sy.Config().Workers, sy.Config().ChunkSize, sy.Config().PageSize, rep.Inserted, rep.Unchanged)
	return r, nil
}

// profileLocker returns the locker of a profiled backfill (see Profile)
// and what stops the servers it started.
func profileLocker(ctx context.Context, rdb *redis.Client, locks string) (syncer.Locker, func(), error) {
	var servers []*redisproc.Server
	var err error
	switch locks {
	case "", "redis":
		return lock.New(rdb, nil), func() {}, nil
	case "redlock":
		servers, err = redisproc.StartN(RedlockNodes)
	case "cluster":
		servers, err = redisproc.StartCluster(ClusterMasters)
	default:
		return nil, nil, fmt.Errorf("--profile-locks %q: want redis, redlock or cluster", locks)
	}
	if err != nil {
		return nil, nil, err
	}
	stop := func() { redisproc.StopAll(servers) }
	addrs := redisproc.Addrs(servers)
	if locks == "cluster" {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
		if err := cc.Ping(ctx).Err(); err != nil {
			stop()
			return nil, nil, err
		}
		return lock.New(cc, nil), func() { cc.Close(); stop() }, nil
	}
	nodes := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		nodes[i] = redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true, MaxRetries: -1})
	}
	return lock.NewRedlock(nodes, nil), func() {
		for _, n := range nodes {
			n.Close()
		}
		stop()
	}, nil
}

// writeAllocs writes the allocation profile of the process since it began
// (the fill of a re-run included; the profiles are cumulative).
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("write allocation profile: %w", err)
	}
	return f.Close()
}

// inProcess is what the in-process measurements share: the bench, an
// erpmock serving cfg.Records records from this process, and the store,
// Redis client and ERP client wired as internal/cli wires a sync command.
type inProcess struct {
	bench *bench
	mock  *erpmock.Mock
	srv   *http.Server
	store *store.Store
	rdb   *redis.Client
	erp   *erp.Client
}

func startInProcess(ctx context.Context, cfg Config) (ip *inProcess, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ip = &inProcess{}
	defer func() {
		if err != nil {
			ip.close()
		}
	}()
	if ip.bench, err = newBench(ctx, cfg); err != nil {
		return nil, err
	}
	dsn := cfg.MySQLDSN
	if cfg.PostgresDSN != "" {
		my := ip.bench
		ip.bench, err = newPostgresBench(ctx, cfg, my)
		my.close()
		if err != nil {
			return nil, err
		}
		dsn = cfg.PostgresDSN
	}
	ip.mock = erpmock.New(erpmock.Options{Records: cfg.Records, Seed: 1})
	var url string
	if ip.srv, url, err = serve(ip.mock); err != nil {
		return nil, err
	}
	if ip.store, err = store.Open(ctx, dsn, nil); err != nil {
		return nil, err
	}
	ip.rdb = redis.NewClient(&redis.Options{
		Addr: cfg.RedisAddr, DialTimeout: 3 * time.Second, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second,
		PoolSize: 64, MaxRetries: -1, ContextTimeoutEnabled: true,
	})
	if ip.erp, err = erp.New(erp.Config{BaseURL: url}); err != nil {
		return nil, err
	}
	return ip, nil
}

func (ip *inProcess) close() {
	if ip.rdb != nil {
		ip.rdb.Close()
	}
	if ip.store != nil {
		ip.store.Close()
	}
	if ip.srv != nil {
		ip.srv.Close()
	}
	if ip.bench != nil {
		ip.bench.close()
	}
}
