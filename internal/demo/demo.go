package demo

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
	"github.com/erpsync/erpsync/internal/verify"
	"github.com/erpsync/erpsync/lock"
)

// Defaults of Config.
const (
	// DefaultRecords is the default of Config.Records on real servers.
	DefaultRecords = 20000
	// DefaultEmbeddedRecords is the default of Config.Records on the
	// embedded MySQL, whose cost grows with the square of the records (see
	// embeddedMySQL).
	DefaultEmbeddedRecords = 5000
	DefaultChanges         = 200
	// Job is the job name of the demo's runs.
	Job = "demo"
	// embeddedDB is the database the demo creates on the embedded server.
	embeddedDB = "erpsync_demo"
)

// feedStart is where erpmock's feed begins (see the erpmock package doc):
// the backfills' window starts there and stays open.
var feedStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Config says what the demo does. Zero fields take their defaults.
type Config struct {
	// Records is the number of records in the mock ERP. Defaults to
	// DefaultEmbeddedRecords on the embedded MySQL, DefaultRecords on a
	// real one.
	Records int
	// Seed selects the mock's records and fault decisions. Defaults to 0.
	Seed int64
	// Changes is how many ERP records change while the instances page.
	// Defaults to 200; negative means none.
	Changes int
	// InvalidRate is the share of records the mock serves invalid.
	// Defaults to 0.005; negative means none.
	InvalidRate float64
	// MySQLDSN names a real MySQL database to use instead of the embedded
	// server. It is created when missing and must hold no memberships.
	// Defaults to empty: the embedded server.
	MySQLDSN string
	// PostgresDSN names a real PostgreSQL database (a postgres:// URL or a
	// libpq key=value string) to use instead of the embedded MySQL, as
	// MySQLDSN does; at most one of the two is given.
	PostgresDSN string
	// RedisAddr is a real Redis to use instead of the embedded server.
	// Defaults to empty: the embedded server.
	RedisAddr string
	// Log receives the instances' logs. Defaults to zerolog.Nop().
	Log *zerolog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Records == 0 {
		c.Records = DefaultRecords
		if c.dsn() == "" {
			c.Records = DefaultEmbeddedRecords
		}
	}
	if c.Changes == 0 {
		c.Changes = DefaultChanges
	}
	c.Changes = max(c.Changes, 0)
	if c.InvalidRate == 0 {
		c.InvalidRate = 0.005
	}
	c.InvalidRate = max(c.InvalidRate, 0)
	if c.Log == nil {
		nop := zerolog.Nop()
		c.Log = &nop
	}
	var errs []error
	if c.Records < 1 || c.Records > 5_000_000 {
		errs = append(errs, fmt.Errorf("records %d: want 1..5000000", c.Records))
	}
	if c.InvalidRate > 1 {
		errs = append(errs, fmt.Errorf("invalid rate %v: want 0..1", c.InvalidRate))
	}
	switch {
	case c.MySQLDSN != "" && c.PostgresDSN != "":
		errs = append(errs, errors.New("--mysql-dsn and --postgres-dsn both given: want one (the database is MySQL's or PostgreSQL's)"))
	case c.PostgresDSN != "":
		if _, err := store.ParsePostgresDSN(c.PostgresDSN); err != nil {
			errs = append(errs, fmt.Errorf("postgres dsn: %w", err))
		}
	case store.DialectOf(c.MySQLDSN) == store.Postgres:
		errs = append(errs, errors.New("mysql dsn: that is a PostgreSQL DSN: give it as --postgres-dsn"))
	case c.MySQLDSN != "":
		if _, err := store.ParseDSN(c.MySQLDSN); err != nil {
			errs = append(errs, fmt.Errorf("mysql dsn: %w", err))
		}
	}
	return c, errors.Join(errs...)
}

// dsn is the DSN of the real database the demo writes to, either
// dialect's; empty for the embedded MySQL.
func (c Config) dsn() string { return cmp.Or(c.PostgresDSN, c.MySQLDSN) }

// database names the demo's database server as the output calls it.
func (c Config) database() string {
	if c.PostgresDSN != "" {
		return "PostgreSQL"
	}
	return "MySQL"
}

// Instance is one sync instance of the demo and how it ended.
type Instance struct {
	// Name is how the output calls it: "run #1", "backfill A", ...
	Name   string
	Config syncer.Config
	Report *syncer.Report
	Err    error
}

// Result is what the demo did.
type Result struct {
	// Servers says which servers were used, for the output.
	ERPURL, RedisAddr string
	// DatabaseServer is MySQL or PostgreSQL; DatabaseAddr its host:port;
	// Database the database's name.
	DatabaseServer, DatabaseAddr, Database string
	Embedded                               bool
	// Feed is the mock's record counts.
	Feed erpmock.Stats
	// Instances are the sync instances in the order they were started.
	Instances []*Instance
	// Changed is how many ERP records changed while the instances paged,
	// and ChangedAt what run #1 had fetched by then.
	Changed, ChangedAt int
	Verify             *verify.Result
	// Events is what the relay delivered to the demo's webhook.
	Events *Events
	Took   time.Duration
}

// OK reports whether the database matched the feed in the end and the
// webhook took one event for each row inserted or updated.
func (r *Result) OK() bool { return r.Verify != nil && r.Verify.OK() && r.Events.OK() }

// Run runs the demo and writes its story to out as it goes; the final
// tables are written by Print. The error is for a demo that could not run;
// a mismatch is in the Result.
func Run(ctx context.Context, cfg Config, out io.Writer) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res := &Result{Embedded: cfg.dsn() == "" || cfg.RedisAddr == "", DatabaseServer: cfg.database()}
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	// The ERP.
	mock := erpmock.New(erpmock.Options{
		Records: cfg.Records,
		Seed:    cfg.Seed,
		Faults: erpmock.Faults{
			InvalidRate:   cfg.InvalidRate,
			DuplicateRate: 0.3,
			StaleRate:     0.3,
		},
	})
	es, err := serveHTTP(mock, "erpmock")
	if err != nil {
		return nil, err
	}
	defer es.Close()
	res.ERPURL = es.url
	res.Feed = mock.Stats()
	say("ERP    erpmock at %s: %d records (seed %d), %d of them invalid; duplicates and stale replays in 30%% of pages",
		es.url, res.Feed.Records, cfg.Seed, res.Feed.Invalid)

	// Redis.
	redisAddr, redisNote := cfg.RedisAddr, "given"
	if redisAddr == "" {
		r, err := startRedis()
		if err != nil {
			return nil, err
		}
		defer r.Close()
		redisAddr, redisNote = r.Addr(), "embedded (miniredis)"
	}
	res.RedisAddr = redisAddr
	say("Redis  %s at %s", redisNote, redisAddr)

	// The database: MySQL, embedded unless given, or PostgreSQL.
	dsn, relayDSN, dbNote := cfg.dsn(), cfg.dsn(), "given"
	if dsn == "" {
		m, err := startMySQL()
		if err != nil {
			return nil, err
		}
		defer m.Close()
		dsn, relayDSN, dbNote = m.DSN(embeddedDB), m.FirstDSN(embeddedDB), "embedded (go-mysql-server, in memory)"
	}
	res.DatabaseAddr, res.Database, err = store.Target(dsn)
	if err != nil {
		return nil, err
	}
	say("%-6s %s at %s, database %s", res.DatabaseServer, dbNote, res.DatabaseAddr, res.Database)

	t := time.Now()
	mctx, cancel := context.WithTimeout(ctx, time.Minute)
	mres, err := store.Migrate(mctx, dsn)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("migrate %s: %w", res.Database, err)
	}
	say("\nmigrated %s: %d migrations applied, schema version %d (%s)", res.Database, len(mres.Applied), mres.Current, since(t))

	// One set of clients per instance, as separate processes would have.
	prefix := "erpsync:demo:" + randomHex(4) + ":"
	newDeps := func() (*deps, error) {
		return connect(ctx, dsn, cfg.dsn() == "", redisAddr, prefix, es.url, *cfg.Log)
	}
	check, err := newDeps()
	if err != nil {
		return nil, err
	}
	defer check.Close()
	if cfg.RedisAddr != "" {
		// The fence counters outlive the demo by FenceTTL; on a real Redis
		// remove them, and any lock a failed instance left, at the end.
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := deleteKeys(cctx, check.rdb, prefix); err != nil {
				cfg.Log.Warn().Err(err).Str("prefix", prefix).Msg("delete the demo's Redis keys (they expire within 15 minutes)")
			}
		}()
	}
	if n, err := memberships(ctx, check.store); err != nil {
		return nil, err
	} else if n > 0 {
		return nil, fmt.Errorf("%w: database %s already holds %d memberships; the demo needs a database of its own (name a new one: it is created)", errNotEmpty, res.Database, n)
	}

	ev, err := startEvents(ctx, relayDSN, check.locks, cfg.Log.With().Str("component", "relay").Logger())
	if err != nil {
		return nil, err
	}
	defer ev.close()
	say("events: each change the instances make goes to an outbox; while they run, a relay delivers them, HMAC-signed, to a webhook at %s and the delivered ones are pruned", ev.hook.ev.URL)

	base := syncer.Config{
		Job:             Job,
		Workers:         2, // the embedded MySQL runs one statement at a time: more workers only contend
		PageSize:        500,
		ChunkSize:       100,
		CheckpointEvery: 200 * time.Millisecond,
		ProgressEvery:   50 * time.Millisecond,
		Grace:           5 * time.Second,
		Host:            hostname(),
	}
	newInstance := func(name string, mutate func(*syncer.Config)) *Instance {
		c := base
		c.PID = len(res.Instances) + 1 // the instance's number in the run history
		mutate(&c)
		in := &Instance{Name: name, Config: c}
		res.Instances = append(res.Instances, in)
		return in
	}
	run1 := newInstance("run #1", func(c *syncer.Config) { c.Mode = syncer.ModeRun })
	run2 := newInstance("run #2", func(c *syncer.Config) { c.Mode = syncer.ModeRun })
	bfA := newInstance("backfill A", func(c *syncer.Config) {
		c.Mode, c.Since, c.ChunkSize = syncer.ModeBackfill, feedStart, 50
	})
	bfB := newInstance("backfill B", func(c *syncer.Config) {
		c.Mode, c.Since, c.ChunkSize = syncer.ModeBackfill, feedStart, 250
	})

	// run #1 tells when it holds the job lock (its first progress tick) and
	// how far it has read, so that run #2 starts while the lock is held and
	// the ERP changes while the instances page.
	var (
		started   = make(chan struct{})
		halfway   = make(chan int, 1)
		startOnce sync.Once
		halfOnce  sync.Once
	)
	run1.Config.Progress = func(c store.Counters) {
		startOnce.Do(func() { close(started) })
		if c.Fetched >= int64(cfg.Records/2) {
			halfOnce.Do(func() { halfway <- int(c.Fetched) })
		}
	}

	say("\nstarting %s, %s (chunks of %d) and %s (chunks of %d) at once, over the whole feed;",
		run1.Name, bfA.Name, bfA.Config.ChunkSize, bfB.Name, bfB.Config.ChunkSize)
	if cfg.Changes > 0 {
		say("%s starts once %s holds the job lock; %d ERP records change when %s is halfway",
			run2.Name, run1.Name, cfg.Changes, run1.Name)
	} else {
		say("%s starts once %s holds the job lock", run2.Name, run1.Name)
	}
	t = time.Now()
	var wg sync.WaitGroup
	launch := func(in *Instance) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in.Report, in.Err = runInstance(ctx, in, newDeps)
		}()
	}
	run1done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(run1done)
		run1.Report, run1.Err = runInstance(ctx, run1, newDeps)
	}()
	launch(bfA)
	launch(bfB)
	select {
	case <-started:
	case <-run1done:
	case <-ctx.Done():
	}
	launch(run2)

	changed := false
	change := func(at int) {
		if !changed && cfg.Changes > 0 {
			res.Changed, res.ChangedAt = len(mock.Change(cfg.Changes)), at
			changed = true
		}
	}
	select {
	case at := <-halfway:
		change(at)
		say("changed %d ERP records while the instances were paging (%s had fetched %d)", res.Changed, run1.Name, at)
	case <-run1done:
	case <-ctx.Done():
	}
	wg.Wait()
	if !changed && cfg.Changes > 0 {
		change(-1)
		say("changed %d ERP records after the instances finished (%s ended before halfway)", res.Changed, run1.Name)
	}
	say("the four instances finished in %s", since(t))

	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	final := newInstance("run #3", func(c *syncer.Config) { c.Mode = syncer.ModeRun })
	t = time.Now()
	final.Report, final.Err = runInstance(ctx, final, newDeps)
	say("%s, alone, from the job checkpoint, finished in %s", final.Name, since(t))

	t = time.Now()
	vctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	res.Verify, err = verify.Verify(vctx, check.erp, check.store, 1000)
	cancel()
	if err != nil {
		return res, err
	}
	say("verify paged the whole feed and compared it with every row in %s", since(t))

	var inserted, updated int64
	for _, in := range res.Instances {
		if in.Report != nil {
			inserted += in.Report.Inserted
			updated += in.Report.Updated
		}
	}
	t = time.Now()
	ectx, cancel := context.WithTimeout(ctx, time.Minute)
	res.Events = ev.finish(ectx, inserted, updated)
	cancel()
	say("the relay's last pass delivered what the outbox still held in %s", since(t))
	res.Took = time.Since(start)
	return res, nil
}

var errNotEmpty = errors.New("demo: database not empty")

// runInstance runs one instance with clients of its own.
func runInstance(ctx context.Context, in *Instance, newDeps func() (*deps, error)) (*syncer.Report, error) {
	d, err := newDeps()
	if err != nil {
		return nil, err
	}
	defer d.Close()
	s, err := syncer.New(in.Config, d.erp, d.store, d.locks, d.log(in))
	if err != nil {
		return nil, err
	}
	return s.Run(ctx)
}

// deps are the clients of one instance.
type deps struct {
	store  *store.Store
	rdb    *redis.Client
	locks  *lock.Client
	erp    *erp.Client
	logger zerolog.Logger
}

func connect(ctx context.Context, dsn string, noLoadData bool, redisAddr, prefix, erpURL string, log zerolog.Logger) (*deps, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := store.Open(cctx, dsn, &store.Options{MaxOpenConns: 8, NoLoadData: noLoadData})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", store.DialectOf(dsn), err)
	}
	st = st.For(eventsTable)
	rdb := redis.NewClient(&redis.Options{
		Addr:                  redisAddr,
		DialTimeout:           3 * time.Second,
		ReadTimeout:           3 * time.Second,
		WriteTimeout:          3 * time.Second,
		PoolSize:              16,
		MaxRetries:            -1, // the lock package retries with its own bounds
		ContextTimeoutEnabled: true,
	})
	if err := rdb.Ping(cctx).Err(); err != nil {
		st.Close()
		rdb.Close()
		return nil, fmt.Errorf("redis at %s: %w", redisAddr, err)
	}
	e, err := erp.New(erp.Config{BaseURL: erpURL, MinBackoff: 10 * time.Millisecond, MaxBackoff: time.Second})
	if err != nil {
		st.Close()
		rdb.Close()
		return nil, err
	}
	return &deps{
		store:  st,
		rdb:    rdb,
		locks:  lock.New(rdb, &lock.Options{Prefix: prefix, FenceTTL: 15 * time.Minute}),
		erp:    e,
		logger: log,
	}, nil
}

func (d *deps) log(in *Instance) zerolog.Logger {
	return d.logger.With().Str("instance", in.Name).Logger()
}

func (d *deps) Close() {
	d.store.Close()
	d.rdb.Close()
}

// deleteKeys deletes the keys under prefix.
func deleteKeys(ctx context.Context, rdb *redis.Client, prefix string) error {
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	batch := make([]string, 0, 1000)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := rdb.Unlink(ctx, batch...).Err()
		batch = batch[:0]
		return err
	}
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == cap(batch) {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	return flush()
}

func memberships(ctx context.Context, st *store.Store) (int64, error) {
	var n int64
	if err := st.DB().WithContext(ctx).Raw("SELECT COUNT(*) FROM memberships").Scan(&n).Error; err != nil {
		return 0, fmt.Errorf("count memberships: %w", err)
	}
	return n, nil
}

func since(t time.Time) string { return time.Since(t).Round(10 * time.Millisecond).String() }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func hostname() string {
	h, _ := os.Hostname()
	if h == "" {
		h = "localhost"
	}
	return h + "/demo"
}
