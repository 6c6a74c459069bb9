package cli

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/secret"
	"github.com/erpsync/erpsync/internal/syncer"
	"github.com/erpsync/erpsync/internal/tlsconf"
)

// settings are erpsync's common settings: each a flag and an environment
// variable, the flag winning.
type settings struct {
	MySQLDSN      string
	PostgresDSN   string
	MigrateDSN    string
	MySQLTLS      tlsconf.Files
	RedisTLSFiles tlsconf.Files
	ERPTLSCA      string
	RedisAddr     string
	RedisAddrs    string
	RedisCluster  bool
	RedisUsername string
	RedisPassword string
	RedisDB       int
	RedisTLS      bool
	LockPrefix    string
	ERPURL        string
	ERPToken      string
	ERP           erpSettings
	ERPTimeout    time.Duration
	ERPRetries    int
	ERPRate       string
	ERPRateKey    string
	REST          restSettings
	Job           string
	Workers       int
	Fetchers      int
	LockTTL       time.Duration
	PageSize      int
	ChunkSize     int
	DBWriters     int
	Overlap       time.Duration
	MaxAttempts   int
	Grace         time.Duration
	MaxDuration   time.Duration
	MaxInvalid    syncer.Limit
	LogFormat     string
	LogLevel      string
	Report        string
	TakeTable     bool
	// dsnFrom names where the DSN came from when the config file's
	// database block gave it (database.dsn (FILE:LINE)); "" when a flag
	// or variable did.
	dsnFrom string
	// ConfigFile is --config; Entities is --entity; targets what they
	// select (loadTargets), nil for a command without them; file the
	// config file loadTargets read, nil without one.
	ConfigFile string
	Entities   []string
	targets    []*target
	file       *entity.File
	// ownership says what the command does about the owner of the table
	// it writes: syncFlags sets claimsTable.
	ownership ownership
	// live is the terminal line of the progress bar, set by newLogger
	// when console logs go to a terminal.
	live *liveLine
}

// envPrefix is the prefix of every environment variable: --lock-ttl is
// ERPSYNC_LOCK_TTL.
const envPrefix = "ERPSYNC_"

func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// EnvWithoutSettings returns this process's environment without any
// ERPSYNC_ setting: the environment of a child erpsync that only its flags
// should configure.
func EnvWithoutSettings() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envPrefix) {
			env = append(env, kv)
		}
	}
	return env
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// connection flags: every command that talks to the database, Redis or
// the ERP.
func (s *settings) connFlags(fs *flag.FlagSet) {
	s.databaseFlags(fs)
	s.redisFlags(fs)
	fs.StringVar(&s.ERPURL, "erp-url", "http://127.0.0.1:8090", "the ERP's URL: rest, the API's base URL; odata, with --config the service root (its sources name the entity sets), without it the entity set's URL")
	s.ERP.flags(fs)
	s.erpRequestFlags(fs, 10*time.Second)
	fs.StringVar(&s.ERPRate, "erp-rate", "", "cap on ERP requests of ALL instances together, like 50/s or 600/m (kept in Redis; empty: no cap)")
	fs.StringVar(&s.ERPRateKey, "erp-rate-key", "", "Redis key of the shared rate (default: erpsync:rate:{<erp host>})")
	s.REST.flags(fs)
	nameVar(fs, &s.Job, "job", "membership-sync", "job name: its lock, checkpoint and run history")
	s.entityFlags(fs)
	s.logFlags(fs)
}

// redisFlags: the Redis of the locks (and of the shared ERP rate).
func (s *settings) redisFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.RedisAddr, "redis-addr", "127.0.0.1:6379", "Redis address host:port (with --redis-cluster: seed nodes, comma-separated)")
	fs.StringVar(&s.RedisAddrs, "redis-addrs", "", "Redlock: comma-separated addresses of N independent Redis masters (quorum N/2+1); overrides --redis-addr for locks")
	fs.BoolVar(&s.RedisCluster, "redis-cluster", false, "--redis-addr is a Redis Cluster (lock keys are hash-tagged per record)")
	fs.StringVar(&s.RedisUsername, "redis-username", "", "Redis ACL user name")
	secretVar(fs, &s.RedisPassword, "redis-password", "", "Redis password (never logged)")
	intVar(fs, &s.RedisDB, "redis-db", 0, 0, math.MaxInt, "Redis database number")
	fs.BoolVar(&s.RedisTLS, "redis-tls", false, "connect to Redis over TLS (also on with a rediss:// address or a --redis-tls-* file)")
	fs.StringVar(&s.RedisTLSFiles.CA, "redis-tls-ca", "", "PEM CA bundle that Redis's certificate must chain to (default: the system's); turns TLS on")
	fs.StringVar(&s.RedisTLSFiles.Cert, "redis-tls-cert", "", "PEM client certificate for Redis (with --redis-tls-key); turns TLS on")
	fs.StringVar(&s.RedisTLSFiles.Key, "redis-tls-key", "", "PEM private key of --redis-tls-cert")
	fs.StringVar(&s.LockPrefix, "lock-prefix", "erpsync:lock:", "prefix of every lock key in Redis (instances that write the same table must share it)")
}

// erpRequestFlags: how each ERP request is sent (the token, the CA, the
// attempt timeout, default timeout, and the retries).
func (s *settings) erpRequestFlags(fs *flag.FlagSet, timeout time.Duration) {
	secretVar(fs, &s.ERPToken, "erp-token", "", "ERP bearer token (never logged)")
	fs.StringVar(&s.ERPTLSCA, "erp-tls-ca", "", "PEM CA bundle that an https ERP's certificate must chain to (default: the system's)")
	durationVar(fs, &s.ERPTimeout, "erp-timeout", timeout, time.Millisecond, "", "timeout of one ERP request attempt")
	intVar(fs, &s.ERPRetries, "erp-retries", 6, 0, 100, "retries of one ERP request (5xx, 429, network, truncated body); 0: none")
}

// loadTLS loads the TLS files of flags; nil when none is given. A bad file
// is a usage error.
func loadTLS(flags string, f tlsconf.Files) (*tls.Config, error) {
	if f.Empty() {
		return nil, nil
	}
	c, err := tlsconf.Load(f)
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: %w", flags, err)}
	}
	return c, nil
}

// secretVar defines a secret string setting: --name (ERPSYNC_NAME), or
// --name-file (ERPSYNC_NAME_FILE), a file that holds the value (trailing
// newlines trimmed). parse reads the file; giving both is a usage error.
func secretVar(fs *flag.FlagSet, p *string, name, value, usage string) {
	fs.StringVar(p, name, value, usage)
	fs.String(name+"-file", "", "read --"+name+" from this file (trailing newlines trimmed)")
}

// secretParts maps each setting that is or may embed a secret to the parts
// of its value that the output redactor masks.
var secretParts = map[string]func(string) []string{
	"mysql-dsn":               dsnPassword,
	"postgres-dsn":            dsnPassword,
	"migrate-dsn":             dsnPassword,
	"redis-password":          whole,
	"erp-token":               whole,
	"erp-password":            whole,
	"erp-oauth-client-secret": whole,
	"redis-addr":              urlPasswords,
	"redis-addrs":             urlPasswords,
	"erp-url":                 urlPasswords,
	"events-secret":           whole,
	"events-url":              urlPasswords,
}

func whole(v string) []string { return []string{v} }

// redact tells the redactor of fs's output, when it has one, secrets that
// did not come from a flag's value (a config file's).
func redact(fs *flag.FlagSet, secrets ...string) {
	if w, ok := fs.Output().(*secret.Writer); ok {
		w.Redactor().Add(secrets...)
	}
}

// urlPasswords returns the passwords of the comma-separated URLs in v.
func urlPasswords(v string) []string {
	var out []string
	for _, a := range strings.Split(v, ",") {
		if u, err := url.Parse(strings.TrimSpace(a)); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok {
				out = append(out, p)
			}
		}
	}
	return out
}

// resolveSecrets reads the --x-file settings given into their --x, and
// tells the redactor of fs's output (when it has one) every secret.
func resolveSecrets(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		name, ok := strings.CutSuffix(f.Name, "-file")
		if !ok || !given[f.Name] || fs.Lookup(name) == nil {
			return
		}
		if given[name] {
			errs = append(errs, fmt.Errorf("--%s (%s) and --%s (%s) both given: want one", name, envName(name), f.Name, envName(f.Name)))
			return
		}
		v, err := secret.ReadFile(f.Value.String())
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s (%s): %w", f.Name, envName(f.Name), err))
			return
		}
		if err := fs.Set(name, v); err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", f.Name, err))
		}
	})
	fs.VisitAll(func(f *flag.Flag) {
		if parts := secretParts[f.Name]; parts != nil {
			redact(fs, parts(f.Value.String())...)
		}
	})
	if len(errs) > 0 {
		return usageError{errors.Join(errs...)}
	}
	return nil
}

func (s *settings) logFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.LogFormat, "log-format", "", "json or console (default json; console when stderr is a terminal)")
	fs.StringVar(&s.LogLevel, "log-level", "info", "debug, info, warn or error")
}

// syncFlags: the commands that write the entities' tables.
func (s *settings) syncFlags(fs *flag.FlagSet) {
	intVar(fs, &s.Workers, "workers", 16, 1, 4096, "chunks written at once (worker pool size)")
	s.fetchersFlag(fs)
	durationVar(fs, &s.LockTTL, "lock-ttl", 30*time.Second, 10*time.Millisecond, "", "lease of the job lock and of each record lock (renewed while held)")
	intVar(fs, &s.PageSize, "page-size", 500, 1, 1000, "ERP page size (1..1000)")
	intVar(fs, &s.ChunkSize, "chunk-size", 500, 1, 5000, "records locked and written together (1 = one by one)")
	intVar(fs, &s.DBWriters, "db-writers", 4, 1, 4096, "write statements in flight at once (reads and locks are not bounded by it)")
	durationVar(fs, &s.Overlap, "overlap", time.Minute, 0, "none", "how far before the checkpoint each run re-reads (0: none)")
	intVar(fs, &s.MaxAttempts, "max-attempts", 8, 1, math.MaxInt, "attempts to write one record before it fails the run")
	s.MaxInvalid = defaultMaxInvalid
	fs.Var((*limitValue)(&s.MaxInvalid), "max-invalid", "most invalid items a run may quarantine and still succeed: a count N, or P% of the items it fetched (at least 10, but never more than half of them); more ends the run failed, exit 1")
	durationVar(fs, &s.Grace, "grace", 25*time.Second, 0, "none", "after SIGTERM/SIGINT, how long records in hand may still be written (0: none, stop at once)")
	durationVar(fs, &s.MaxDuration, "max-duration", 0, 0, "no limit", "end a run still going after this long, cleanly (records in hand written, locks released, status failed, exit 1); 0: no limit")
	fs.StringVar(&s.Report, "report", "", "write the run report as JSON to this file")
	fs.BoolVar(&s.TakeTable, "take-table", false, "hand the table to this job whichever job owns it (one table, one job: the owner's commands are refused from then on); once, by hand")
	s.ownership = claimsTable
}

// fetchersFlag: how many parts of the feed are read at once (run,
// backfill, reconcile, schedule and verify).
func (s *settings) fetchersFlag(fs *flag.FlagSet) {
	intVar(fs, &s.Fetchers, "fetchers", syncer.DefaultFetchers, 1, 256, "parts of the feed read at once: the window split by updated_at, each part paged on its own (1: one page at a time)")
}

// orNone passes a duration whose 0 means none (--overlap, --grace) to the
// syncer, whose Config reads 0 as its default: 1ns is none at the
// millisecond precision of every time the syncer keeps.
func orNone(d time.Duration) time.Duration {
	if d == 0 {
		return time.Nanosecond
	}
	return d
}

// syncConfig is the syncer configuration the sync flags describe.
func (s *settings) syncConfig(mode string) syncer.Config {
	return syncer.Config{
		Job: s.Job, Mode: mode, Workers: s.Workers, Fetchers: s.Fetchers, PageSize: s.PageSize, ChunkSize: s.ChunkSize, DBWriters: s.DBWriters,
		LockTTL: s.LockTTL, Overlap: orNone(s.Overlap), MaxAttempts: s.MaxAttempts, Grace: orNone(s.Grace),
		MaxDuration: s.MaxDuration, MaxInvalid: &s.MaxInvalid,
	}
}

// defaultMaxInvalid is --max-invalid's default: a share that a feed with a
// few bad records stays under, and a wrong map or a broken feed (most
// items invalid) is far above.
var defaultMaxInvalid = syncer.Limit{Percent: 10, IsPercent: true}

// limitValue is a syncer.Limit as a flag: N or P%.
type limitValue syncer.Limit

func (v *limitValue) String() string { return syncer.Limit(*v).String() }

func (v *limitValue) Set(s string) error {
	l, err := syncer.ParseLimit(s)
	if err != nil {
		return err
	}
	*v = limitValue(l)
	return nil
}

// usageError is bad usage or configuration: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// depError is a dependency unreachable at start: exit code 2, nothing written.
type depError struct{ err error }

func (e depError) Error() string { return e.err.Error() }
func (e depError) Unwrap() error { return e.err }
