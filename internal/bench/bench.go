package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/cli"
	"github.com/erpsync/erpsync/internal/loadtest"
	"github.com/erpsync/erpsync/internal/redisproc"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
)

// Defaults of Config.
const (
	DefaultMySQLDSN  = "root@tcp(127.0.0.1:3306)/erpsync_bench?parseTime=true"
	DefaultRedisAddr = "127.0.0.1:6379"
	DefaultRecords   = 200_000
	DefaultBig       = 1_000_000
	DefaultSmall     = 100_000
)

// Measurement names, for Config.Only.
const (
	Ceiling  = "ceiling"
	Seed     = "seed"
	Backfill = "backfill"
	Rerun    = "rerun"
	Memory   = "memory"
	// Redlock and Cluster are the backfill with its locks on a Redlock of
	// RedlockNodes masters and on a Redis Cluster of ClusterMasters, each
	// started by the bench (redis-server and redis-cli in PATH).
	Redlock = "redlock"
	Cluster = "cluster"
	// Typed is the backfill of a 12-column entity of a config file
	// (TypedEntity) and the raw insert of its rows, in the same rounds as
	// Backfill.
	Typed = "typed"
)

// The lock topologies of the Redlock and Cluster measurements.
const (
	RedlockNodes   = 5
	ClusterMasters = 3
)

// Config says what to measure. Zero fields take their defaults.
type Config struct {
	// Bin is the erpsync binary of the backfills. Required when a backfill
	// is measured.
	Bin string
	// MySQLDSN names the database; it is created and migrated, and its
	// memberships table emptied before each measurement. Its name must
	// contain "bench". Defaults to DefaultMySQLDSN.
	MySQLDSN string
	// RedisAddr is the Redis of the locks. Defaults to DefaultRedisAddr.
	RedisAddr string
	// Records is the size of the feed of the ceiling, the seed pipeline,
	// the backfill and the re-run. Defaults to 200,000.
	Records int
	// SeedRecords is how many of them the seed pipeline writes (it is
	// slow). Defaults to Records.
	SeedRecords int
	// Small and Big are the feed sizes of the memory comparison. Big 0
	// skips it. Default to 100,000 and 1,000,000.
	Small, Big int
	// SlowFetchers is the --fetchers the slow ERP's row sets against one.
	// Defaults to SlowFetchers.
	SlowFetchers int
	// ChildArgs are added to every backfill's command line, to try other
	// settings: "--chunk-size", "500".
	ChildArgs []string
	// Only, when not empty, lists the measurements to make.
	Only []string
	// Repeat is how many rounds of the ceiling, the backfill and the re-run
	// are made; each keeps its best round. Defaults to 1.
	Repeat int
	// Log receives one line per step. Defaults to io.Discard.
	Log io.Writer
	// NATSURL is the NATS JetStream server of the relay row. Defaults to
	// DefaultNATSURL.
	NATSURL string
	// PostgresDSN names the PostgreSQL database of the PostgreSQL rows
	// (PGBackfill, PGTyped, PGDocuments), a postgres:// URL; it is created
	// and migrated, and its tables emptied before each measurement. Its
	// name must contain "bench". Empty: no PostgreSQL rows.
	PostgresDSN string
	// DatabaseCPUs, when not empty, are the CPUs the database servers run
	// on for the whole run, and the only ones they run on; this process,
	// its erpsync processes and the Redis servers of the locks run on the
	// others (see pin). It needs the right to set the servers' affinity.
	DatabaseCPUs []int
}

func (c Config) withDefaults() (Config, error) {
	if c.MySQLDSN == "" {
		c.MySQLDSN = DefaultMySQLDSN
	}
	if c.RedisAddr == "" {
		c.RedisAddr = DefaultRedisAddr
	}
	if c.Records == 0 {
		c.Records = DefaultRecords
	}
	if c.SeedRecords == 0 || c.SeedRecords > c.Records {
		c.SeedRecords = c.Records
	}
	if c.Small == 0 {
		c.Small = DefaultSmall
	}
	if c.Repeat < 1 {
		c.Repeat = 1
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	c.NATSURL = cmp.Or(c.NATSURL, DefaultNATSURL)
	c.SlowFetchers = cmp.Or(c.SlowFetchers, SlowFetchers)
	var errs []error
	if c.Records < 1 || c.Small < 1 || c.Big < 0 {
		errs = append(errs, errors.New("records and small must be positive, big not negative"))
	}
	if c.SlowFetchers < 2 || c.SlowFetchers > 256 {
		errs = append(errs, fmt.Errorf("slow fetchers %d: want 2 to 256", c.SlowFetchers))
	}
	cfg, err := store.ParseDSN(c.MySQLDSN)
	if err != nil {
		errs = append(errs, err)
	} else if !strings.Contains(strings.ToLower(cfg.DBName), "bench") {
		errs = append(errs, fmt.Errorf("refusing to empty memberships in database %q: use a database whose name contains \"bench\"", cfg.DBName))
	}
	if c.PostgresDSN != "" {
		if pc, err := store.ParsePostgresDSN(c.PostgresDSN); err != nil {
			errs = append(errs, err)
		} else if !strings.Contains(strings.ToLower(pc.Database), "bench") {
			errs = append(errs, fmt.Errorf("refusing to empty memberships in PostgreSQL database %q: use a database whose name contains \"bench\"", pc.Database))
		}
	}
	for _, m := range c.Only {
		switch m {
		case Ceiling, Seed, Backfill, Rerun, Memory, Redlock, Cluster, Typed, Documents, Slow, Events, Relay:
		case PGBackfill, PGTyped, PGDocuments:
			if c.PostgresDSN == "" {
				errs = append(errs, fmt.Errorf("measurement %q: no PostgreSQL DSN (--postgres-dsn)", m))
			}
		default:
			errs = append(errs, fmt.Errorf("unknown measurement %q: want %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s or %s", m, Ceiling, Seed, Backfill, Rerun, Memory, Redlock, Cluster, Typed, Documents, Slow, Events, Relay, PGBackfill, PGTyped, PGDocuments))
		}
	}
	if c.Bin == "" && (c.wants(Backfill) || c.wants(Rerun) || c.wants(Memory) || c.wants(Redlock) || c.wants(Cluster) || c.wants(Typed) || c.wants(Documents) || c.wants(Slow) || c.wants(Events) || c.wants(Relay) || c.wantsPostgres()) {
		errs = append(errs, errors.New("no erpsync binary for the backfills"))
	}
	return c, errors.Join(errs...)
}

func (c Config) wants(m string) bool {
	if c.PostgresDSN == "" && (m == PGBackfill || m == PGTyped || m == PGDocuments) {
		return false
	}
	if len(c.Only) == 0 {
		return m != Memory || c.Big > 0
	}
	for _, o := range c.Only {
		if o == m {
			return true
		}
	}
	return false
}

// Result is one measurement.
type Result struct {
	Name    string  `json:"name"`
	Records int64   `json:"records"`
	Seconds float64 `json:"seconds"`
	// PerSecond is Records over Seconds.
	PerSecond float64 `json:"records_per_second"`
	// PeakRSSKiB is the peak resident set (VmHWM) of the erpsync process
	// (0 when the measurement ran in this process).
	PeakRSSKiB int64 `json:"peak_rss_kib,omitempty"`
	// Rounds are the records/s of every round, when there were several.
	Rounds []float64 `json:"rounds,omitempty"`
	// CPU is the processor time each party spent.
	CPU    CPU            `json:"cpu_seconds"`
	Report *syncer.Report `json:"report,omitempty"`
	Note   string         `json:"note,omitempty"`
}

// Results are the measurements of one bench run, by name.
type Results struct {
	Config struct {
		Records     int      `json:"records"`
		SeedRecords int      `json:"seed_records"`
		Small       int      `json:"small"`
		Big         int      `json:"big"`
		ChildArgs   []string `json:"child_args,omitempty"`
		Database    string   `json:"database"`
		// CPUs says where the processes ran, with DatabaseCPUs.
		CPUs string `json:"cpus,omitempty"`
	} `json:"config"`
	Ceiling *Result `json:"ceiling,omitempty"`
	// CeilingLiteral is the ceiling's best round with its values written
	// in, as TypedRaw writes its rows.
	CeilingLiteral *Result `json:"ceiling_literal,omitempty"`
	Seed           *Result `json:"seed16,omitempty"`
	Backfill       *Result `json:"backfill,omitempty"`
	// Redlock and Cluster are the backfill on the other lock topologies,
	// measured in the same rounds as Backfill.
	Redlock *Result `json:"backfill_redlock,omitempty"`
	Cluster *Result `json:"backfill_cluster,omitempty"`
	// Typed is the backfill of TypedEntity, TypedRaw the raw insert of
	// its rows, measured in the same rounds as Backfill.
	Typed    *Result `json:"backfill_typed,omitempty"`
	TypedRaw *Result `json:"raw_insert_typed,omitempty"`
	Rerun    *Result `json:"rerun,omitempty"`
	Small    *Result `json:"memory_small,omitempty"`
	Big      *Result `json:"memory_big,omitempty"`
	// Stages are the stages of the write path timed alone (see Stages).
	Stages []*Result `json:"stages,omitempty"`

	// Documents is the documents backfill against its raw insert,
	// measured in the same rounds as Backfill.
	Documents *DocumentsResult `json:"documents,omitempty"`
	// Slow is the backfill and the verify scan against a slow ERP at one
	// fetcher and at SlowFetchers, measured in the same rounds as
	// Backfill.
	Slow *SlowResult `json:"slow_erp,omitempty"`
	// Events are the change events' rows (see Events and Relay).
	Events *EventResults `json:"events,omitempty"`
	// Postgres are the rows on PostgreSQL (see PGBackfill).
	Postgres *PostgresResults `json:"postgresql,omitempty"`
}

// Run makes the measurements, one after the other, on the same MariaDB and
// Redis.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	b, err := newBench(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer b.close()
	res := &Results{}
	res.Config.Records, res.Config.SeedRecords, res.Config.Small, res.Config.Big = cfg.Records, cfg.SeedRecords, cfg.Small, cfg.Big
	res.Config.ChildArgs, res.Config.Database = cfg.ChildArgs, b.dbName

	feed := erpmock.New(erpmock.Options{Records: cfg.Records, Seed: 1})
	truth := feed.Truth()
	var url string
	if cfg.wants(Backfill) || cfg.wants(Rerun) || cfg.wants(Redlock) || cfg.wants(Cluster) {
		var srv *http.Server
		if srv, url, err = serve(feed); err != nil {
			return res, err
		}
		defer srv.Close()
	}
	var ty *typed
	if cfg.wants(Typed) {
		if ty, err = b.startTyped(ctx, cfg.Records); err != nil {
			return res, err
		}
		defer ty.close()
	}
	var docs *documents
	if cfg.wants(Documents) {
		if docs, err = b.startDocuments(ctx, cfg.Records); err != nil {
			return res, err
		}
		defer docs.close()
	}
	var slowERP *slow
	if cfg.wants(Slow) {
		if slowERP, err = b.startSlow(cfg.Records); err != nil {
			return res, err
		}
		defer slowERP.close()
	}
	var pg *pgRun
	if cfg.wantsPostgres() {
		if pg, err = b.startPostgres(ctx, cfg, feed); err != nil {
			return res, err
		}
		defer pg.close()
		res.Postgres = &PostgresResults{Database: pg.b.dbName}
	}
	if len(cfg.DatabaseCPUs) > 0 {
		ports := b.ports
		if pg != nil {
			ports.postgres = pg.b.ports.postgres
		}
		pinned, err := pin(cfg.DatabaseCPUs, ports)
		if err != nil {
			return res, err
		}
		defer pinned.restore()
		res.Config.CPUs = pinned.note
		b.logf("%s", pinned.note)
	}
	topologies, stop, err := startTopologies(cfg, res)
	if err != nil {
		return res, err
	}
	defer stop()
	var failed error
	// Rounds interleave the measurements, so that a load that comes and
	// goes on the machine weighs on each alike; each keeps its best round.
	for round := range cfg.Repeat {
		if cfg.wants(Ceiling) {
			for _, literal := range []bool{false, true} {
				r, err := b.ceiling(ctx, truth, literal)
				if err != nil {
					return res, err
				}
				if literal {
					c := *r // best keeps the rounds in the result it returns
					res.CeilingLiteral = best(res.CeilingLiteral, &c)
				}
				res.Ceiling = best(res.Ceiling, r)
			}
		}
		// A re-run alone first fills the table.
		if cfg.wants(Backfill) || cfg.wants(Rerun) && b.rows(ctx) != int64(cfg.Records) {
			r, err := b.backfill(ctx, "backfill, one Redis", b.memberships(url), true)
			if err != nil {
				return res, err
			}
			if cfg.wants(Backfill) {
				res.Backfill = best(res.Backfill, r)
			}
		}
		if ty != nil {
			r, err := b.backfill(ctx, fmt.Sprintf("typed backfill (%d columns)", TypedColumns), ty.target(), true)
			if err != nil {
				return res, err
			}
			res.Typed = best(res.Typed, r)
			if r, err = b.typedRaw(ctx, ty); err != nil {
				return res, err
			}
			res.TypedRaw = best(res.TypedRaw, r)
		}
		if docs != nil {
			if err := b.documentsRound(ctx, docs, &res.Documents); err != nil {
				return res, err
			}
		}
		if slowERP != nil {
			if err := b.slowRound(ctx, slowERP, round, &res.Slow); err != nil {
				return res, err
			}
		}
		for _, t := range topologies {
			// A round that fails on one topology (on a loaded machine, a
			// Redlock's nodes may all answer late) leaves the others'
			// rounds standing; Run still returns the first failure.
			r, err := b.backfillOn(ctx, t.name, b.memberships(url), true, t.locks)
			if err != nil {
				b.logf("%v", err)
				failed = cmp.Or(failed, err)
				continue
			}
			*t.out = best(*t.out, r)
		}
		if cfg.wants(Rerun) {
			r, err := b.backfill(ctx, "re-run, unchanged", b.memberships(url), false)
			if err != nil {
				return res, err
			}
			res.Rerun = best(res.Rerun, r)
		}
		if pg != nil {
			if err := pg.round(ctx, res.Postgres); err != nil {
				return res, err
			}
		}
	}
	if cfg.wants(Seed) {
		if res.Seed, err = b.seed(ctx, truth[:cfg.SeedRecords]); err != nil {
			return res, errors.Join(failed, err)
		}
	}
	truth = nil
	feed = nil
	if cfg.wants(Memory) && cfg.Big > 0 {
		for _, m := range []struct {
			n   int
			out **Result
		}{{cfg.Small, &res.Small}, {cfg.Big, &res.Big}} {
			mock := erpmock.New(erpmock.Options{Records: m.n, Seed: 2})
			srv, url, err := serve(mock)
			if err != nil {
				return res, err
			}
			r, err := b.backfill(ctx, fmt.Sprintf("backfill %d (memory)", m.n), b.memberships(url), true)
			srv.Close()
			if err != nil {
				return res, err
			}
			*m.out = r
		}
	}
	// Last: the relay needs a NATS server besides.
	if cfg.wants(Events) || cfg.wants(Relay) {
		if res.Events, err = b.events(ctx); err != nil {
			return res, errors.Join(failed, err)
		}
	}
	return res, failed
}

// topology is a lock topology of its own servers, and the result its
// backfill goes to.
type topology struct {
	name  string
	locks locks
	out   **Result
}

// startTopologies starts the servers of the Redlock and Cluster
// measurements that cfg wants, and returns them with a func that stops
// them.
func startTopologies(cfg Config, res *Results) ([]topology, func(), error) {
	var ts []topology
	var all []*redisproc.Server
	stop := func() { redisproc.StopAll(all) }
	if cfg.wants(Redlock) {
		nodes, err := redisproc.StartN(RedlockNodes)
		if err != nil {
			return nil, stop, fmt.Errorf("redlock nodes: %w", err)
		}
		all = append(all, nodes...)
		ts = append(ts, topology{fmt.Sprintf("backfill, Redlock %d masters", RedlockNodes),
			locks{[]string{"--redis-addrs", strings.Join(redisproc.Addrs(nodes), ",")}, redisproc.Ports(nodes)}, &res.Redlock})
	}
	if cfg.wants(Cluster) {
		masters, err := redisproc.StartCluster(ClusterMasters)
		if err != nil {
			return nil, stop, fmt.Errorf("redis cluster: %w", err)
		}
		all = append(all, masters...)
		ts = append(ts, topology{fmt.Sprintf("backfill, Redis Cluster %d masters", ClusterMasters),
			locks{[]string{"--redis-cluster", "--redis-addr", strings.Join(redisproc.Addrs(masters), ",")}, redisproc.Ports(masters)}, &res.Cluster})
	}
	return ts, stop, nil
}

// bench holds the connections of a bench run.
type bench struct {
	cfg    Config
	dsn    string // with the driver settings of store.ParseDSN
	dbName string
	db     *sql.DB
	rdb    *redis.Client
	job    string
	ports  serverPorts
	logf   func(string, ...any)
	// st writes the ceiling's statements with their values written in, as
	// the sync writes its own.
	st *store.Store
	// d is the database's dialect, and dsnEnv the variable, with its
	// value, that gives a child erpsync the database.
	d      store.Dialect
	dsnEnv string
	// pgcfg is the PostgreSQL database's connection settings (nil on
	// MySQL), and label the prefix of the rows' names ("PostgreSQL: ").
	pgcfg *pgx.ConnConfig
	label string
}

func newBench(ctx context.Context, cfg Config) (*bench, error) {
	if _, err := store.Migrate(ctx, cfg.MySQLDSN); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	mc, err := store.ParseDSN(cfg.MySQLDSN)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("mysql: %w", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: cfg.RedisAddr, PoolSize: 32})
	if err := rdb.Ping(ctx).Err(); err != nil {
		db.Close()
		rdb.Close()
		return nil, fmt.Errorf("redis at %s: %w", cfg.RedisAddr, err)
	}
	st, err := store.Open(ctx, cfg.MySQLDSN, nil)
	if err != nil {
		db.Close()
		rdb.Close()
		return nil, err
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	b := &bench{st: st, cfg: cfg, dsn: mc.FormatDSN(), dbName: mc.DBName, db: db, rdb: rdb, job: "bench-" + hex.EncodeToString(r[:]),
		d: store.MySQL, dsnEnv: "ERPSYNC_MYSQL_DSN=" + cfg.MySQLDSN,
		ports: serverPorts{mysql: portOf(mc.Addr, "3306"), redis: []string{portOf(cfg.RedisAddr, "6379")}},
		logf:  func(format string, args ...any) { fmt.Fprintf(cfg.Log, "bench: "+format+"\n", args...) }}
	return b, nil
}

func (b *bench) close() {
	b.db.Close()
	if b.rdb != nil {
		b.rdb.Close()
	}
	b.st.Close()
}

// ident quotes a table's name in the bench's dialect.
func (b *bench) ident(name string) string {
	if b.d == store.Postgres {
		return `"` + name + `"`
	}
	return "`" + name + "`"
}

// target is what a backfill reads and writes: the feed at url (with the
// flags that name a typed entity's, args), the table it fills and the job
// that owns that table.
type target struct {
	url   string
	args  []string
	table string
	owner string
}

// memberships is the target of the built-in entity's backfills: the feed
// of the erpmock at url, memberships, this bench's job.
func (b *bench) memberships(url string) target {
	return target{url: url, table: store.MembershipsTable, owner: b.job}
}

// empty empties t's table and forgets the checkpoints: a backfill of the
// same window whose earlier round failed would otherwise resume from its
// checkpoint, past the rows this truncation took away. The emptied table
// is t's owner's: an earlier bench's job owned it.
func (b *bench) empty(ctx context.Context, t target) error {
	for _, table := range []string{t.table, "sync_checkpoints"} {
		if _, err := b.db.ExecContext(ctx, "TRUNCATE TABLE "+b.ident(table)); err != nil {
			return fmt.Errorf("empty %s: %w", table, err)
		}
	}
	_, _, err := b.st.TakeTable(ctx, t.table, t.owner)
	return err
}

func (b *bench) rows(ctx context.Context) int64 {
	var n int64
	_ = b.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM memberships").Scan(&n)
	return n
}

const insertColumns = "erp_id, member_id, product_code, status, starts_at, ends_at, erp_version, erp_updated_at, fence_token, created_at, updated_at"

func rowArgs(args []any, r erpmock.Record) []any {
	var ends any
	if r.EndsAt != nil {
		ends = r.EndsAt.UTC()
	}
	return append(args, r.ErpID, r.MemberID, r.ProductCode, r.Status, r.StartsAt.UTC(), ends, r.Version, r.UpdatedAt.UTC(), int64(1))
}

// membershipOf is r as a row written under fencing token 1, as the
// measurements without locks write it.
func membershipOf(r erpmock.Record) store.Membership {
	return store.Membership{ErpID: r.ErpID, MemberID: r.MemberID, ProductCode: r.ProductCode, Status: r.Status,
		StartsAt: r.StartsAt, EndsAt: r.EndsAt, Version: r.Version, UpdatedAt: r.UpdatedAt, Fence: 1}
}

const rowPlaceholders = "(?,?,?,?,?,?,?,?,?,UTC_TIMESTAMP(3),UTC_TIMESTAMP(3))"

// ceiling writes recs into an empty table with multi-row INSERT IGNORE
// statements of 1,000 rows on 4 connections, without locks: as fast as
// the database takes these rows. With literal, the statements carry their
// values written in, as the sync's do (store.InsertIgnore); else as
// placeholders that the driver interpolates. Run keeps the faster.
func (b *bench) ceiling(ctx context.Context, recs []erpmock.Record, literal bool) (*Result, error) {
	const batch, conns = 1000, 4
	if err := b.empty(ctx, b.memberships("")); err != nil {
		return nil, err
	}
	how := "placeholders"
	if literal {
		how = "literal values"
	}
	b.logf("ceiling: %d rows, INSERT IGNORE of %d rows, %d connections, %s", len(recs), batch, conns, how)
	r, err := b.parallel(ctx, len(recs), batch, conns, func() func(from, to int) error {
		var sb strings.Builder
		args := make([]any, 0, batch*9)
		ms := make([]store.Membership, 0, batch)
		return func(from, to int) error {
			if literal {
				ms = ms[:0]
				for _, r := range recs[from:to] {
					ms = append(ms, membershipOf(r))
				}
				if err := b.st.InsertIgnore(ctx, ms); err != nil {
					return fmt.Errorf("ceiling insert: %w", err)
				}
				return nil
			}
			sb.Reset()
			sb.WriteString("INSERT IGNORE INTO memberships (" + insertColumns + ") VALUES ")
			args = args[:0]
			for i, r := range recs[from:to] {
				if i > 0 {
					sb.WriteByte(',')
				}
				sb.WriteString(rowPlaceholders)
				args = rowArgs(args, r)
			}
			if _, err := b.db.ExecContext(ctx, sb.String(), args...); err != nil {
				return fmt.Errorf("ceiling insert: %w", err)
			}
			return nil
		}
	})
	if err != nil {
		return nil, err
	}
	r.Name = "ceiling: INSERT IGNORE, 1,000 rows a statement, 4 connections, no locks, " + how
	return r, nil
}

// parallel writes the ranges [from, to) of n items, batch items each, on
// conns goroutines, each with the writer that newWriter returns it, and
// returns the time and CPU they took; it stops at the first error.
func (b *bench) parallel(ctx context.Context, n, batch, conns int, newWriter func() func(from, to int) error) (*Result, error) {
	work := make(chan int)
	errc := make(chan error, conns)
	var wg sync.WaitGroup
	meter := startCPU(b.ports)
	start := time.Now()
	for range conns {
		wg.Add(1)
		write := newWriter()
		go func() {
			defer wg.Done()
			for from := range work {
				if err := write(from, min(from+batch, n)); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := 0; i < n; i += batch {
		select {
		case work <- i:
		case err = <-errc:
			break feed
		}
	}
	close(work)
	wg.Wait()
	el := time.Since(start)
	cpu := meter.stop()
	if err == nil {
		select {
		case err = <-errc:
		default:
		}
	}
	if err != nil {
		return nil, err
	}
	r := result("", int64(n), el)
	r.CPU = cpu
	return r, nil
}

// seed writes recs the way the first version of the sync did, per record:
// SETNX the record's lock, SELECT EXISTS, a single-row INSERT when absent,
// DEL the lock; with 16 goroutines.
func (b *bench) seed(ctx context.Context, recs []erpmock.Record) (*Result, error) {
	const goroutines = 16
	if err := b.empty(ctx, b.memberships("")); err != nil {
		return nil, err
	}
	b.logf("seed pipeline: %d records, %d goroutines", len(recs), goroutines)
	prefix := "erpsync-bench:" + b.job + ":"
	var next atomic.Int64
	var contended atomic.Int64
	errc := make(chan error, goroutines)
	var wg sync.WaitGroup
	meter := startCPU(b.ports)
	start := time.Now()
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(recs) || ctx.Err() != nil {
					return
				}
				r := recs[i]
				key := prefix + r.ErpID
				ok, err := b.rdb.SetNX(ctx, key, "1", 30*time.Second).Result()
				if err != nil {
					errc <- fmt.Errorf("seed setnx: %w", err)
					return
				}
				if !ok {
					contended.Add(1)
					continue
				}
				var exists bool
				if err := b.db.QueryRowContext(ctx, "SELECT EXISTS(SELECT 1 FROM memberships WHERE erp_id = ?)", r.ErpID).Scan(&exists); err != nil {
					errc <- fmt.Errorf("seed select: %w", err)
					return
				}
				if !exists {
					if _, err := b.db.ExecContext(ctx, "INSERT INTO memberships ("+insertColumns+") VALUES "+rowPlaceholders, rowArgs(nil, r)...); err != nil {
						errc <- fmt.Errorf("seed insert: %w", err)
						return
					}
				}
				if err := b.rdb.Del(ctx, key).Err(); err != nil {
					errc <- fmt.Errorf("seed del: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	cpu := meter.stop()
	select {
	case err := <-errc:
		return nil, err
	default:
	}
	r := result("seed pipeline: SETNX, SELECT EXISTS, INSERT, DEL per record, 16 goroutines", int64(len(recs)), el)
	r.CPU = cpu
	if n := contended.Load(); n > 0 {
		r.Note = fmt.Sprintf("%d records found locked", n)
	}
	return r, nil
}

// backfill runs `erpsync backfill` over the whole feed of t as a child
// process, into an emptied table when empty is set, with its locks on the
// bench's Redis.
func (b *bench) backfill(ctx context.Context, name string, t target, empty bool) (*Result, error) {
	return b.backfillOn(ctx, name, t, empty, locks{args: []string{"--redis-addr", b.cfg.RedisAddr}, ports: b.ports.redis})
}

// locks are where a backfill takes its locks: the erpsync flags that say
// so, and the ports of those Redis servers, whose CPU the result counts.
type locks struct {
	args  []string
	ports []string
}

// backfillOn is backfill with its locks where l says.
func (b *bench) backfillOn(ctx context.Context, name string, t target, empty bool, l locks) (*Result, error) {
	if empty {
		if err := b.empty(ctx, t); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "erpsync-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	report := filepath.Join(dir, "report.json")
	args := append(append([]string{"backfill", "--since", "2000-01-01T00:00:00Z"}, l.args...),
		"--erp-url", t.url, "--job", b.job, "--report", report, "--log-format", "json", "--log-level", "warn")
	args = append(append(args, t.args...), b.cfg.ChildArgs...)
	b.logf("%s: %s %s", name, b.cfg.Bin, strings.Join(args[:3], " ")+" ... "+strings.Join(b.cfg.ChildArgs, " "))
	c, err := b.child(ctx, name, args, serverPorts{mysql: b.ports.mysql, postgres: b.ports.postgres, redis: l.ports})
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(report)
	if err != nil {
		return nil, fmt.Errorf("%s: read report: %w", name, err)
	}
	var rep syncer.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		return nil, fmt.Errorf("%s: decode report: %w", name, err)
	}
	el := c.wall
	if rep.FinishedAt != nil {
		el = rep.FinishedAt.Sub(rep.StartedAt)
	}
	r := result(name, rep.Fetched, el)
	r.Report = &rep
	r.PeakRSSKiB = c.peakRSSKiB
	r.CPU = c.cpu
	r.Note = fmt.Sprintf("inserted %d, unchanged %d, updated %d; process wall %.1f s", rep.Inserted, rep.Unchanged, rep.Updated, c.wall.Seconds())
	b.logf("%s: %.0f records/s, peak RSS %.1f MiB", name, r.PerSecond, float64(r.PeakRSSKiB)/1024)
	return r, nil
}

// childRun is what a child erpsync process took.
type childRun struct {
	wall       time.Duration
	cpu        CPU
	peakRSSKiB int64
}

// child runs erpsync with args to its exit, with the bench's database in
// its environment, and returns its wall time, its peak RSS and the CPU of
// it, of the servers on ports and of this process.
func (b *bench) child(ctx context.Context, name string, args []string, ports serverPorts) (childRun, error) {
	cmd := exec.CommandContext(ctx, b.cfg.Bin, args...)
	// The DSN in the environment: a command line is public on the machine.
	cmd.Env = append(cli.EnvWithoutSettings(), b.dsnEnv)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.Stdout = io.Discard
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	meter := startCPU(ports)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return childRun{}, fmt.Errorf("%s: start erpsync: %w", name, err)
	}
	// Not the rusage maxrss: it carries this process's RSS (see
	// loadtest.RSSWatch).
	rss := loadtest.WatchRSS(cmd.Process.Pid, 50*time.Millisecond)
	err := cmd.Wait()
	c := childRun{wall: time.Since(start), peakRSSKiB: rss.Stop(), cpu: meter.stop()}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		c.cpu.Erpsync = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	if err != nil {
		return c, fmt.Errorf("%s: erpsync: %w\n%s", name, err, tail(stderr.String(), 2000))
	}
	return c, nil
}

// best returns the faster of two results, with the rounds of both.
func best(a, b *Result) *Result {
	if a == nil {
		return b
	}
	rounds := a.Rounds
	if len(rounds) == 0 {
		rounds = []float64{a.PerSecond}
	}
	rounds = append(rounds, b.PerSecond)
	out := a
	if b.PerSecond > a.PerSecond {
		out = b
	}
	out.Rounds = rounds
	return out
}

// portOf returns the port of a host:port address, or def.
func portOf(addr, def string) string {
	if _, port, err := net.SplitHostPort(addr); err == nil && port != "" {
		return port
	}
	return def
}

func result(name string, n int64, d time.Duration) *Result {
	r := &Result{Name: name, Records: n, Seconds: d.Seconds()}
	if d > 0 {
		r.PerSecond = float64(n) / d.Seconds()
	}
	return r
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// serve serves h on a loopback port.
func serve(h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, "http://" + ln.Addr().String(), nil
}
