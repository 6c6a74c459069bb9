package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/erpsync/erpsync/internal/syncer"
)

// settings are erpsync's common settings: each a flag and an environment
// variable, the flag winning.
type settings struct {
	MySQLDSN      string
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
	ERPTimeout    time.Duration
	ERPRetries    int
	ERPRate       string
	ERPRateKey    string
	Job           string
	Workers       int
	LockTTL       time.Duration
	PageSize      int
	ChunkSize     int
	Overlap       time.Duration
	MaxAttempts   int
	Grace         time.Duration
	MaxDuration   time.Duration
	LogFormat     string
	LogLevel      string
	Report        string
}

// envPrefix is the prefix of every environment variable: --lock-ttl is
// ERPSYNC_LOCK_TTL.
const envPrefix = "ERPSYNC_"

func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// connection flags: every command that talks to MySQL, Redis or the ERP.
func (s *settings) connFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.MySQLDSN, "mysql-dsn", "root@tcp(127.0.0.1:3306)/erpsync?parseTime=true", "MySQL DSN (go-sql-driver format); the database is created by migrate")
	fs.StringVar(&s.RedisAddr, "redis-addr", "127.0.0.1:6379", "Redis address host:port (with --redis-cluster: seed nodes, comma-separated)")
	fs.StringVar(&s.RedisAddrs, "redis-addrs", "", "Redlock: comma-separated addresses of N independent Redis masters (quorum N/2+1); overrides --redis-addr for locks")
	fs.BoolVar(&s.RedisCluster, "redis-cluster", false, "--redis-addr is a Redis Cluster (lock keys are hash-tagged per record)")
	fs.StringVar(&s.RedisUsername, "redis-username", "", "Redis ACL user name")
	fs.StringVar(&s.RedisPassword, "redis-password", "", "Redis password (never logged)")
	fs.IntVar(&s.RedisDB, "redis-db", 0, "Redis database number")
	fs.BoolVar(&s.RedisTLS, "redis-tls", false, "connect to Redis over TLS")
	fs.StringVar(&s.LockPrefix, "lock-prefix", "erpsync:lock:", "prefix of every lock key in Redis (instances that write the same table must share it)")
	fs.StringVar(&s.ERPURL, "erp-url", "http://127.0.0.1:8090", "ERP API base URL")
	fs.StringVar(&s.ERPToken, "erp-token", "", "ERP bearer token (never logged)")
	fs.DurationVar(&s.ERPTimeout, "erp-timeout", 10*time.Second, "timeout of one ERP request attempt")
	fs.IntVar(&s.ERPRetries, "erp-retries", 6, "retries of one ERP request (5xx, 429, network, truncated body)")
	fs.StringVar(&s.ERPRate, "erp-rate", "", "cap on ERP requests of ALL instances together, like 50/s or 600/m (kept in Redis; empty: no cap)")
	fs.StringVar(&s.ERPRateKey, "erp-rate-key", "", "Redis key of the shared rate (default: erpsync:rate:{<erp host>})")
	fs.StringVar(&s.Job, "job", "membership-sync", "job name: its lock, checkpoint and run history")
	s.logFlags(fs)
}

func (s *settings) logFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.LogFormat, "log-format", "", "json or console (default json; console when stderr is a terminal)")
	fs.StringVar(&s.LogLevel, "log-level", "info", "debug, info, warn or error")
}

// syncFlags: the commands that write memberships.
func (s *settings) syncFlags(fs *flag.FlagSet) {
	fs.IntVar(&s.Workers, "workers", 16, "chunks written at once (worker pool size)")
	fs.DurationVar(&s.LockTTL, "lock-ttl", 30*time.Second, "lease of the job lock and of each record lock (renewed while held)")
	fs.IntVar(&s.PageSize, "page-size", 500, "ERP page size (1..1000)")
	fs.IntVar(&s.ChunkSize, "chunk-size", 500, "records locked and written together (1 = one by one)")
	fs.DurationVar(&s.Overlap, "overlap", time.Minute, "how far before the checkpoint each run re-reads")
	fs.IntVar(&s.MaxAttempts, "max-attempts", 8, "attempts to write one record before it fails the run")
	fs.DurationVar(&s.Grace, "grace", 25*time.Second, "after SIGTERM/SIGINT, how long records in hand may still be written")
	fs.DurationVar(&s.MaxDuration, "max-duration", 0, "end a run still going after this long, cleanly (records in hand written, locks released, status failed, exit 1); 0: no limit")
	fs.StringVar(&s.Report, "report", "", "write the run report as JSON to this file")
}

// syncConfig is the syncer configuration the sync flags describe.
func (s *settings) syncConfig(mode string) syncer.Config {
	return syncer.Config{
		Job: s.Job, Mode: mode, Workers: s.Workers, PageSize: s.PageSize, ChunkSize: s.ChunkSize,
		LockTTL: s.LockTTL, Overlap: s.Overlap, MaxAttempts: s.MaxAttempts, Grace: s.Grace,
		MaxDuration: s.MaxDuration,
	}
}

// parse parses args, then fills every flag not given from its environment
// variable. A bad value names the flag or variable it came from. Errors are
// usage errors, except flag.ErrHelp for -h.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %v", envName(f.Name), v, err))
			}
		}
	})
	if len(errs) > 0 {
		return usageError{errors.Join(errs...)}
	}
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
