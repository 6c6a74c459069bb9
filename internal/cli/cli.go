// Package cli is erpsync's command line: it parses the settings of
// docs/configuration.md (flags and ERPSYNC_* environment variables), wires the
// store, the locks and the ERP client, runs a command and maps the outcome to
// the exit codes of the contract.
package cli

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/metrics"
	"github.com/erpsync/erpsync/internal/odata"
	"github.com/erpsync/erpsync/internal/ratelimit"
	"github.com/erpsync/erpsync/internal/secret"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
	"github.com/erpsync/erpsync/internal/tlsconf"
	"github.com/erpsync/erpsync/lock"
)

// Exit codes of the contract.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

const usage = `erpsync copies an ERP's records into MySQL or PostgreSQL (--postgres-dsn), exactly
once per change: the built-in memberships, or any entity a config file declares
(--config FILE, docs/entities.md).

Usage: erpsync <command> [flags]

Commands:
  migrate    apply the SQL migrations (creates the database when missing)
  run        one incremental pass from the job checkpoint, under the job lock
  backfill   one bounded window: --since T [--until T] [--shard i/n]
  schedule   a run every D (--every 1m) or by --cron; serves /metrics, /healthz, /readyz
  verify     compare the whole ERP feed with the database (exit 1 on any difference)
  reconcile  soft-delete rows the ERP no longer has, restore and repair the rest (--dry-run, --max-delete, --force)
  runs       the run history, newest first, skipped runs included
  state      each job's checkpoint; state reset --yes: the next run reads the whole feed (a full refresh)
  config     check a config file (check --config FILE) or print its JSON Schema (schema)
  relay      deliver the outbox's change events to a webhook, NATS or RabbitMQ, until SIGTERM (--once: one pass)
  events     the outbox: pending and delivered events and the oldest pending age, per entity
  discover   print a config file for an OData service, from its $metadata (--erp-url, -o FILE)
  version    the module version and the VCS commit it was built from
{{extra}}
Every flag is also an environment variable: --lock-ttl is ERPSYNC_LOCK_TTL.
A secret (--mysql-dsn, --postgres-dsn, --migrate-dsn, --redis-password, --erp-token,
--erp-password, --erp-oauth-client-secret) may come from a file instead: --erp-token-file or ERPSYNC_ERP_TOKEN_FILE.
Run "erpsync <command> -h" for a command's flags.

Exit codes: 0 succeeded or skipped; 1 failed; 2 bad usage, or a dependency
unreachable at start (nothing written); 130 (SIGINT, Ctrl-C) or 143
(SIGTERM): stopped before it finished, the records in hand written, one line
says how to resume. docs/troubleshooting.md explains each error line.
`

// Command is a command that main adds to the built-in ones (demo and
// loadtest live in their own packages so that their dependencies stay out of
// the others' builds).
type Command struct {
	Name    string
	Summary string
	// Run returns nil for exit 0, an error from UsageError for exit 2, and
	// any other error for exit 1 (printed unless it wraps ErrFailed).
	Run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// UsageError marks err as bad usage or configuration: exit code 2.
func UsageError(err error) error { return usageError{err} }

// ErrFailed marks a failure whose details were already reported: exit 1,
// nothing more printed.
var ErrFailed = errFailed

// Main runs erpsync with args (without the program name) and returns the
// exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, extra ...Command) int {
	// Every secret a command's settings hold is masked in its log lines
	// and errors (parse tells the redactor); the code never formats one
	// anyway. Not in stdout: that is the commands' results (tables, JSON,
	// reports), which carry no setting, and a short secret that happens to
	// be a word of them ("status", a job name) must not corrupt them.
	// go-sql-driver/mysql prints its own lines ("[mysql] ... packets.go")
	// on the standard logger; every failure they tell of comes back as an
	// error that erpsync reports in one line.
	_ = mysql.SetLogger(nopLogger{})
	red := new(secret.Redactor)
	stderr = red.Writer(stderr)
	var more strings.Builder
	for _, c := range extra {
		fmt.Fprintf(&more, "  %-10s %s\n", c.Name, c.Summary)
		red.Keep("erpsync " + c.Name)
	}
	keepProgramWords(red)
	help := strings.Replace(usage, "{{extra}}", more.String(), 1)
	if len(args) == 0 {
		fmt.Fprint(stderr, help)
		return ExitUsage
	}
	cmd, rest := args[0], args[1:]
	for _, c := range extra {
		if c.Name == cmd {
			return exitCodeOf(c.Run(ctx, rest, stdout, stderr), stdout, stderr)
		}
	}
	var err error
	switch cmd {
	case "migrate":
		err = cmdMigrate(ctx, rest, stdout, stderr)
	case "run":
		err = cmdSync(ctx, syncer.ModeRun, rest, stdout, stderr)
	case "backfill":
		err = cmdSync(ctx, syncer.ModeBackfill, rest, stdout, stderr)
	case "schedule":
		err = cmdSchedule(ctx, rest, stdout, stderr)
	case "verify":
		err = cmdVerify(ctx, rest, stdout, stderr)
	case "reconcile":
		err = cmdReconcile(ctx, rest, stdout, stderr)
	case "runs":
		err = cmdRuns(ctx, rest, stdout, stderr)
	case "config":
		err = cmdConfig(ctx, rest, stdout, stderr)
	case "discover":
		err = cmdDiscover(ctx, rest, stdout, stderr)
	case "relay":
		err = cmdRelay(ctx, rest, stdout, stderr)
	case "events":
		err = cmdEvents(ctx, rest, stdout, stderr)
	case "state":
		err = cmdState(ctx, rest, stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, version())
		return ExitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, help)
		return ExitOK
	default:
		fmt.Fprintf(stderr, "erpsync: unknown command %q\n\n%s", cmd, help)
		return ExitUsage
	}
	return exitCodeOf(err, stdout, stderr)
}

// commands are the built-in commands' names.
var commands = []string{"migrate", "run", "backfill", "schedule", "verify", "reconcile", "runs", "state", "config", "discover", "relay", "events", "version", "help"}

// keepProgramWords tells red the program's own texts that hold its name: a
// secret that happens to be "erpsync" (the docs' example password) stays
// masked in values but leaves "erpsync: ..." and "run erpsync migrate"
// readable (see package secret).
func keepProgramWords(red *secret.Redactor) {
	red.Keep("^erpsync: ", "Usage: erpsync", "erpsync <command>", "erpsync_")
	for _, c := range commands {
		red.Keep("erpsync " + c)
	}
}

// exitCodeOf is exitCode, with -h's help printed to stdout.
func exitCodeOf(err error, stdout, stderr io.Writer) int {
	var h helpRequest
	if errors.As(err, &h) {
		if _, ok := about[h.fs.Name()]; ok || h.usage == nil {
			printHelp(stdout, h.fs)
		} else {
			h.fs.SetOutput(stdout)
			h.usage()
		}
		return ExitOK
	}
	return exitCode(err, stderr)
}

// nopLogger silences go-sql-driver/mysql's own log.
type nopLogger struct{}

func (nopLogger) Print(...any) {}

// errFailed marks a run that ended with status failed; its details are in the
// logs and the report.
var errFailed = errors.New("run failed")

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return ExitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	var ue usageError
	var de depError
	var ie interruptedError
	switch {
	case errors.As(err, &ie):
		fmt.Fprintf(stderr, "erpsync: %v\n", err)
		return ie.code()
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "erpsync: %v\n", err)
		return ExitUsage
	case errors.As(err, &de):
		fmt.Fprintf(stderr, "erpsync: %v\n", err)
		return ExitUsage
	case errors.Is(err, errFailed):
		return ExitFailed
	default:
		fmt.Fprintf(stderr, "erpsync: %v\n", err)
		return ExitFailed
	}
}

func newLogger(s *settings, stderr io.Writer) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(strings.ToLower(s.LogLevel))
	if err != nil || s.LogLevel == "" {
		return zerolog.Nop(), usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", s.LogLevel)}
	}
	format := s.LogFormat
	tty := IsTerminal(stderr)
	if format == "" {
		format = "json"
		if tty {
			format = "console"
		}
	}
	var w io.Writer
	switch format {
	case "json":
		w = stderr
	case "console":
		if tty {
			s.live = &liveLine{w: stderr}
			stderr = s.live
		}
		w = zerolog.ConsoleWriter{Out: stderr, TimeFormat: time.RFC3339, NoColor: !Colour(stderr)}
	default:
		return zerolog.Nop(), usageError{fmt.Errorf("--log-format %q: want json or console", s.LogFormat)}
	}
	log := zerolog.New(w).Level(level).With().Timestamp().Logger()
	// go-redis prints its pool's dial failures to stderr on its own; they
	// repeat what erpsync reports in one line (exit 2 at start, or the
	// lock errors it logs), so they go to the debug level of this log.
	redis.SetLogger(redisLogger{log.With().Str("component", "go-redis").Logger()})
	return log, nil
}

// redisLogger puts go-redis' own messages into erpsync's log, at debug.
type redisLogger struct{ log zerolog.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Debug().Msgf(format, v...)
}

// redisOptions are the options of a client of the Redis at addr: host:port,
// or a redis:// or rediss:// URL (user, password and database number in
// the URL apply unless their flags are set). TLS is on for rediss://,
// --redis-tls or tlsCfg (from the --redis-tls-* files); the server name
// checked is addr's host.
func redisOptions(s *settings, addr string, tlsCfg *tls.Config) (*redis.Options, error) {
	opt := &redis.Options{Addr: addr}
	if strings.Contains(addr, "://") {
		u, err := redis.ParseURL(addr)
		if err != nil {
			return nil, usageError{fmt.Errorf("redis address %s: %v", redisHost(addr), err)}
		}
		opt = u
	}
	if s.RedisUsername != "" {
		opt.Username = s.RedisUsername
	}
	if s.RedisPassword != "" {
		opt.Password = s.RedisPassword
	}
	if s.RedisDB != 0 {
		opt.DB = s.RedisDB
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = 3*time.Second, 3*time.Second, 3*time.Second
	opt.PoolSize = 64
	opt.MaxRetries = -1 // the callers retry with their own bounds
	// A call's ctx deadline interrupts it in flight.
	opt.ContextTimeoutEnabled = true
	if opt.TLSConfig != nil || s.RedisTLS || tlsCfg != nil {
		c := &tls.Config{MinVersion: tls.VersionTLS12}
		if tlsCfg != nil {
			c = tlsCfg.Clone()
		}
		c.ServerName, _, _ = net.SplitHostPort(opt.Addr)
		opt.TLSConfig = c
	}
	return opt, nil
}

// redisHost returns the comma-separated addresses of v without user
// names, passwords or database numbers: what messages may show.
func redisHost(v string) string {
	var out []string
	for _, a := range splitAddrs(v) {
		if u, err := url.Parse(a); err == nil && u.Host != "" && strings.Contains(a, "://") {
			a = u.Host
		} else if strings.Contains(a, "@") {
			a = a[strings.LastIndex(a, "@")+1:]
		}
		out = append(out, a)
	}
	return strings.Join(out, ",")
}

func splitAddrs(v string) []string {
	var out []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// connectRedis returns the client for pings and the shared rate, the
// lock service, and the clients to close. One Redis, a Redis Cluster, or
// Redlock over independent masters, of which a quorum must answer. When
// the servers do not answer (a depError), the clients and the lock
// service are returned with it, for a command that waits for them (a
// relay that runs until SIGTERM).
func connectRedis(ctx context.Context, s *settings, lopt *lock.Options) (redis.UniversalClient, syncer.Locker, []redis.UniversalClient, error) {
	tlsCfg, err := loadTLS("--redis-tls-*", s.RedisTLSFiles)
	if err != nil {
		return nil, nil, nil, err
	}
	switch {
	case s.RedisAddrs != "":
		addrs := splitAddrs(s.RedisAddrs)
		if len(addrs) < 3 {
			return nil, nil, nil, usageError{fmt.Errorf("--redis-addrs: Redlock needs at least 3 independent masters, got %d", len(addrs))}
		}
		opts := make([]*redis.Options, len(addrs))
		for i, a := range addrs {
			if opts[i], err = redisOptions(s, a, tlsCfg); err != nil {
				return nil, nil, nil, err
			}
		}
		// Ping the masters at once: a hung one costs the start its read
		// timeout once, not once per hung master.
		nodes := make([]redis.UniversalClient, len(addrs))
		answered := make([]bool, len(addrs))
		var wg sync.WaitGroup
		for i := range addrs {
			nodes[i] = redis.NewClient(opts[i])
			wg.Go(func() { answered[i] = nodes[i].Ping(ctx).Err() == nil })
		}
		wg.Wait()
		up := 0
		var downs []string
		for i, a := range addrs {
			if !answered[i] {
				downs = append(downs, redisHost(a))
				continue
			}
			up++
		}
		if q := len(addrs)/2 + 1; up < q {
			return nodes[0], lock.NewRedlock(nodes, lopt), nodes, depError{fmt.Errorf("redis: %d of %d Redlock masters answer, %d needed (down: %s)", up, len(addrs), q, strings.Join(downs, ", "))}
		}
		return nodes[0], lock.NewRedlock(nodes, lopt), nodes, nil
	case s.RedisCluster:
		seeds := splitAddrs(s.RedisAddr)
		if len(seeds) == 0 {
			return nil, nil, nil, usageError{errors.New("--redis-addr: no Redis Cluster seed node")}
		}
		o, err := redisOptions(s, seeds[0], tlsCfg)
		if err != nil {
			return nil, nil, nil, err
		}
		rdb := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: splitAddrs(redisHost(s.RedisAddr)), Username: o.Username, Password: o.Password,
			DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
			PoolSize: o.PoolSize, MaxRetries: 2, ContextTimeoutEnabled: true, TLSConfig: o.TLSConfig,
		})
		if err := rdb.Ping(ctx).Err(); err != nil {
			return rdb, lock.New(rdb, lopt), []redis.UniversalClient{rdb}, depError{fmt.Errorf("redis cluster unavailable at %s: %w", redisHost(s.RedisAddr), err)}
		}
		return rdb, lock.New(rdb, lopt), []redis.UniversalClient{rdb}, nil
	default:
		o, err := redisOptions(s, s.RedisAddr, tlsCfg)
		if err != nil {
			return nil, nil, nil, err
		}
		rdb := redis.NewClient(o)
		if err := rdb.Ping(ctx).Err(); err != nil {
			return rdb, lock.New(rdb, lopt), []redis.UniversalClient{rdb}, depError{fmt.Errorf("redis unavailable at %s: %w", redisHost(s.RedisAddr), err)}
		}
		return rdb, lock.New(rdb, lopt), []redis.UniversalClient{rdb}, nil
	}
}

// source is what the commands need of an ERP feed: its pages (the
// syncer's and verify's), a count for the progress bar and the connect
// probe, and request counts for the report.
type source interface {
	Page(ctx context.Context, q erp.Query) (*erp.Page, error)
	Count(ctx context.Context, since, until time.Time) (int64, error)
	Stats() erp.Stats
}

// deps are the wired dependencies of a sync command.
type deps struct {
	store   *store.Store
	rdb     redis.UniversalClient // pings and the shared ERP rate
	locks   syncer.Locker
	erp     source // the first target's
	closers []redis.UniversalClient
	// targets are the entity sources the command works on, each with its
	// store (bound to the entity's table) and its ERP source.
	targets []*target
}

// Close closes the connections. A Redlock first sends what its calls to
// slower nodes still owe (releases, token write-backs; each call bounded
// by its node timeout), so that an exiting process leaves no released
// lock on a slow master until its lease ends.
func (d *deps) Close() {
	if rl, ok := d.locks.(*lock.Redlock); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_ = rl.Wait(ctx)
		cancel()
	}
	if d.store != nil {
		d.store.Close()
	}
	for _, c := range d.closers {
		c.Close()
	}
}

// connect opens the database, Redis and the ERP client and checks that each
// answers, then applies the table's ownership (claimTable). Any failure is
// a depError or a usageError: exit 2, nothing written.
func connect(ctx context.Context, s *settings, probeERP bool, m *metrics.Metrics, log zerolog.Logger) (*deps, error) {
	shape, err := s.REST.shape(s.ERP.Kind)
	if err != nil {
		return nil, err
	}
	d := &deps{}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The ERP settings are checked before anything connects.
	if _, err := s.ERP.source(erp.Config{BaseURL: s.ERPURL, Token: s.ERPToken, Shape: shape}); err != nil {
		return nil, usageError{err}
	}
	st, err := s.openStore(cctx)
	if err != nil {
		return nil, err
	}
	d.store = st
	lopt := &lock.Options{Prefix: s.LockPrefix}
	ecfg := erp.Config{BaseURL: s.ERPURL, Token: s.ERPToken, Timeout: s.ERPTimeout, MaxRetries: s.ERPRetries, Shape: shape}
	if s.ERPRetries == 0 {
		ecfg.MaxRetries = -1 // erp.Config's 0 is its default, 6
	}
	if ecfg.TLS, err = loadTLS("--erp-tls-ca", tlsconf.Files{CA: s.ERPTLSCA}); err != nil {
		d.Close()
		return nil, err
	}
	if m != nil {
		lopt.Hooks = m.LockHooks()
		ecfg.Hooks = m.ERPHooks()
	}
	d.rdb, d.locks, d.closers, err = connectRedis(cctx, s, lopt)
	if err != nil {
		d.Close()
		return nil, err
	}
	if s.ERPRate != "" {
		rate, err := ratelimit.ParseRate(s.ERPRate)
		if err != nil {
			d.Close()
			return nil, usageError{fmt.Errorf("--erp-rate: %w", err)}
		}
		key := s.ERPRateKey
		if key == "" {
			host := s.ERPURL
			if u, err := url.Parse(s.ERPURL); err == nil && u.Host != "" {
				host = u.Host
			}
			key = "erpsync:rate:{" + host + "}"
		}
		ecfg.Limiter = ratelimit.New(d.rdb, key, rate, 1)
	}
	targets := s.targets
	if targets == nil { // a command without --config: the built-in entity
		ent := entity.Memberships()
		targets = []*target{{ent: ent, src: ent.Sources[0], job: s.Job, table: store.Memberships()}}
	}
	for _, t := range targets {
		// verify and reconcile compare a source with its own rows: those
		// holding the constants it sets, a lone source's too (a file that
		// reads one company of a table that holds several).
		t.st = d.store.For(t.table).Scoped(t.src.Set)
		if s.ConfigFile == "" {
			t.erp, err = s.ERP.source(ecfg)
		} else {
			t.erp, err = s.ERP.typedSource(ecfg, s.REST, t)
		}
		if err != nil {
			d.Close()
			return nil, usageError{err}
		}
	}
	d.targets = targets
	d.erp = targets[0].erp
	if probeERP {
		for _, t := range targets {
			if err := probe(cctx, s, t); err != nil {
				d.Close()
				return nil, err
			}
		}
	}
	for _, t := range targets {
		if err := claimTable(cctx, s, t.st, t.owner(), log); err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

// probe reads one count or page of t's source: the start-up check that the
// ERP answers, with the credentials and at the path it was given.
func probe(ctx context.Context, s *settings, t *target) error {
	if err := entitySetAsRoot(s); err != nil {
		return err
	}
	_, err := t.erp.Count(ctx, time.Time{}, time.Time{})
	if errors.Is(err, erp.ErrNoCount) {
		_, err = t.erp.Page(ctx, erp.Query{Limit: 1})
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, odata.ErrUnfilterable) {
		return usageError{fmt.Errorf("%s:%d: entity %s: %w", s.ConfigFile, t.src.Line, t.ent.Name, err)}
	}
	var refused *erp.RefusedError
	if errors.As(err, &refused) && refused.Code == http.StatusForbidden &&
		(s.ERP.Username != "" || s.ERP.OAuthClientID != "" || s.ERPToken != "") {
		// Forbidden with credentials: who asked is known; what is missing
		// is an authorization (SAP: the user's role for the service).
		return depError{fmt.Errorf("erp at %s refused access (403 Forbidden): check that the user is authorized for the service (SAP: a role that grants it): %w", erpHost(s.ERPURL), err)}
	}
	if errors.Is(err, erp.ErrUnauthorized) {
		return depError{fmt.Errorf("erp at %s refused the %s: %w", erpHost(s.ERPURL), s.ERP.credentials(s.ERPToken != ""), err)}
	}
	if errors.Is(err, erp.ErrBadRequest) {
		// It answered: the request named what the service does not know.
		return depError{fmt.Errorf("erp at %s answered 400 Bad Request%s: a property, filter or value the service does not accept (erpsync config check --online checks the file against $metadata): %w", erpHost(s.ERPURL), entityNote(s, t), err)}
	}
	which := entityNote(s, t)
	var se *erp.StatusError
	switch {
	case errors.As(err, &se) && se.Code == http.StatusNotFound && s.ERP.Kind == kindREST && s.ConfigFile == "":
		return depError{fmt.Errorf("erp at %s: GET %s: status 404 (not found): --erp-url is the base URL, like http://host:8090, and --erp-path the path of the records", erpHost(s.ERPURL), se.URL)}
	case errors.As(err, &se) && se.Code == http.StatusNotFound:
		// The ERP answered: it is reachable, the path is wrong. Its 404
		// page (HTML, often) tells nothing more.
		return depError{fmt.Errorf("erp at %s: 404 Not Found from %s: check the service path (%s)%s", erpHost(s.ERPURL), se.URL, urlMeans(s), which)}
	}
	what := "erp unreachable at " + erpHost(s.ERPURL)
	if errors.Is(err, erp.ErrNotJSON) {
		what = "erp at " + erpHost(s.ERPURL) + " answered, but not with the feed (check --erp-url and that no proxy or login page stands in front)"
	} else if errors.As(err, &se) {
		what = "erp at " + erpHost(s.ERPURL) + " answered with an error"
	}
	return depError{fmt.Errorf("%s%s: %w", what, which, err)}
}

// entityNote names t's entity and source in messages, with a config file.
func entityNote(s *settings, t *target) string {
	if s.ConfigFile == "" {
		return ""
	}
	return fmt.Sprintf(" (entity %s, source %s)", t.ent.Name, t.src.Name)
}

// urlMeans says what --erp-url is for s's kind of source, for messages.
func urlMeans(s *settings) string {
	switch {
	case s.ERP.Kind == kindOData && s.ConfigFile != "":
		return "--erp-url or the config's erp.url is the OData service root, like https://host/odata/v4/sales/; the sources name its entity sets"
	case s.ERP.Kind == kindOData:
		return "--erp-url is the entity set's URL, like https://host/odata/v4/erp/Memberships"
	}
	return "--erp-url or the config's erp.url is the API's base URL, like http://host:8090; each source is a path under it"
}

// entitySetAsRoot refuses, with a config file's OData sources, a service
// root that ends in one of their entity sets: each source's URL is the
// root and the set's name, so ".../sales/Customers" would be read as
// ".../sales/Customers/Customers", which the server takes for a key.
func entitySetAsRoot(s *settings) error {
	if s.ERP.Kind != kindOData || s.ConfigFile == "" {
		return nil
	}
	u, err := url.Parse(s.ERPURL)
	if err != nil {
		return nil
	}
	last := path.Base(strings.TrimSuffix(u.Path, "/"))
	for _, t := range s.targets {
		if t.src.Name == last {
			root := *u
			root.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), last)
			return usageError{fmt.Errorf("erp url %s ends in the entity set %s: give the service root, %s (the sources name the entity sets)", erpHost(s.ERPURL), last, erpHost(root.String()))}
		}
	}
	return nil
}

// erpHost is the ERP URL without a password, for messages.
func erpHost(v string) string {
	if u, err := url.Parse(v); err == nil {
		return u.Redacted()
	}
	return v
}

// checkRun validates, before anything connects, what a command that runs
// the job needs: the sync settings cfg and the database's DSN. Bad usage then
// writes nothing.
func checkRun(s *settings, cfg syncer.Config, log zerolog.Logger) error {
	if _, err := syncer.New(cfg, nil, nil, nil, log); err != nil {
		return usageError{err}
	}
	_, _, err := s.database()
	return err
}

// open ties ctx to SIGTERM and SIGINT and connects (see connect); done
// closes the connections, then lets the signals go.
func open(ctx context.Context, s *settings, probeERP bool, m *metrics.Metrics, log zerolog.Logger) (_ context.Context, _ *deps, done func(), _ error) {
	ctx, stop := withSignals(ctx)
	d, err := connect(ctx, s, probeERP, m, log)
	if err != nil {
		err = interrupted(ctx, err, "stopped while connecting, nothing written; run the same command again")
		stop()
		return nil, nil, nil, err
	}
	return ctx, d, func() { d.Close(); stop() }, nil
}

// saveReport writes rep to path (--report) and returns runErr, or the
// write's error when the run had none.
func saveReport(log zerolog.Logger, path string, rep any, runErr error) error {
	if err := writeReport(path, rep); err != nil {
		log.Error().Err(err).Msg("write report")
		return cmp.Or(runErr, err)
	}
	return runErr
}

// writeReport writes rep (a run's or a reconcile's report) as JSON to
// path, when path is set.
func writeReport(path string, rep any) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// version is the module version and the VCS commit of this build, from its
// build info: "(devel)" with vcs.revision and vcs.modified when built from a
// checkout.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "erpsync (no build info)"
	}
	v := "erpsync " + bi.Main.Version
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if r := settings["vcs.revision"]; r != "" {
		v += " commit " + r
		if settings["vcs.modified"] == "true" {
			v += " (modified)"
		}
	}
	return v + " " + bi.GoVersion
}
