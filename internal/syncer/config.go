package syncer

import (
	"errors"
	"fmt"
	"time"

	"github.com/erpsync/erpsync/internal/store"
)

// DefaultFetchers is the cli's --fetchers: four parts of the feed paged at
// once, the connections a browser opens to one host and within what most
// ERPs allow a client (SAP's and NetSuite's concurrency limits start at
// 5-10 per user); enough to overlap a slow ERP's latency several times
// over, few enough that a run against an ERP that answers fast costs it
// little more than one fetcher would.
const DefaultFetchers = 4

// Modes of a run.
const (
	ModeRun      = "run"      // incremental, from the job checkpoint, under the job lock
	ModeBackfill = "backfill" // a bounded window; never moves the job checkpoint
)

// Config says what one run does. Zero fields take their defaults.
type Config struct {
	// Job names the job: its lock, checkpoint and run history. Defaults to "membership-sync".
	Job string
	// Entity names the entity the run writes (the store's table): the
	// namespace of its record locks (EntityLockKey) and its label in
	// reports and metrics. Defaults to "memberships", the built-in entity.
	Entity string
	// Mode is ModeRun or ModeBackfill. Defaults to ModeRun.
	Mode string
	// Since and Until bound a backfill window (Until exclusive, zero = open).
	Since, Until time.Time
	// Shard and Shards select the records whose erp_id hashes to Shard
	// modulo Shards. Shards 0 or 1 means every record.
	Shard, Shards int
	// Fetchers is how many parts of the window are paged at once (see
	// Plan): the window split by updated_at into parts sized with the
	// feed's count, each paged on its own, the workers writing records of
	// all of them; the checkpoint never passes a part not yet written
	// whole. 1 pages the window as one part, one page at a time. Defaults
	// to 1 (the cli's --fetchers defaults to DefaultFetchers).
	Fetchers int
	// Workers bounds how many chunks are written at once. Defaults to 16.
	Workers int
	// PageSize is the ERP page size (1..1000). Defaults to 500.
	PageSize int
	// ChunkSize is how many records share one lock round trip and one
	// statement, and how many rows they fill at most (a document and each
	// of its lines one; a chunk holds one document at least). 1 gives the
	// per-record path. Defaults to 500 (chosen by
	// measurement: fewer, larger statements cost MariaDB and erpsync less
	// CPU per record than 100).
	ChunkSize int
	// DBWriters bounds the write statements (multi-row INSERT, guarded
	// upsert or update) in flight at once; reads and locks are not
	// bounded by it. Defaults to 4: on a 2-core MariaDB, 16 concurrent
	// multi-row INSERTs into one index cost it two to three times the CPU
	// a row of 4 do (bin/erpsync-bench --stages --workers 4 vs 16).
	DBWriters int
	// LockTTL is the lease of the job lock and of each record lock. Defaults to 30s.
	LockTTL time.Duration
	// LockWait bounds how long a record waits for a lock held by another
	// holder, per attempt. Defaults to LockTTL plus 5s, so a lock left by a
	// killed process is always outlived.
	LockWait time.Duration
	// MaxInvalid, when set, fails a run whose invalid items exceed it: a
	// count, or a percentage of the items the run fetched (never fewer
	// than MinInvalidAllowance, unless that is more than half of them).
	// The invalid items are quarantined and the
	// valid ones written either way; the run ends failed. Defaults to no
	// limit (the cli's --max-invalid defaults to 10%).
	MaxInvalid *Limit
	// MaxAttempts bounds the attempts to write one record (stale refusals,
	// database or Redis errors). Defaults to 8.
	MaxAttempts int
	// Overlap is how far before the checkpoint each run starts reading.
	// Defaults to 1m.
	Overlap time.Duration
	// Grace bounds how long records in hand may still be written after the
	// run is cancelled (SIGTERM, lost job lock). Defaults to 25s.
	Grace time.Duration
	// MaxDuration, when positive, ends a run that has not finished this long
	// after it started, as a SIGTERM would: fetching stops, the records in
	// hand are still written for up to Grace, every lock is released, the
	// checkpoint keeps what was done, and the run ends failed with
	// ErrMaxDuration. The next run continues from there.
	MaxDuration time.Duration
	// CheckpointEvery is how often the checkpoint is saved while running. Defaults to 1s.
	CheckpointEvery time.Duration
	// HoldUntil, when later than the end of a run, keeps the job lock held
	// until then instead of releasing it (lock-at-least-for): replicas
	// whose ticks fire a little later skip the tick instead of running it
	// again. Ignored when the run is cancelled.
	HoldUntil time.Time
	// Progress, when set, is called every ProgressEvery with the live
	// counters of the run.
	Progress      func(store.Counters)
	ProgressEvery time.Duration
	// HeartbeatEvery is how often the run writes its heartbeat and its
	// counters so far to its row of the run history (store.Beat), by
	// which `erpsync runs` tells a killed run from a running one.
	// Defaults to store.HeartbeatEvery.
	HeartbeatEvery time.Duration
	// Host and PID identify the process in the run history. Default to the
	// hostname and os.Getpid().
	Host string
	PID  int
}

func (c Config) withDefaults() (Config, error) {
	if c.Job == "" {
		c.Job = "membership-sync"
	}
	if c.Mode == "" {
		c.Mode = ModeRun
	}
	if c.Entity == "" {
		c.Entity = MembershipsEntity
	}
	if c.Workers == 0 {
		c.Workers = 16
	}
	if c.Fetchers == 0 {
		c.Fetchers = 1
	}
	if c.PageSize == 0 {
		c.PageSize = 500
	}
	if c.ChunkSize == 0 {
		c.ChunkSize = 500
	}
	if c.DBWriters == 0 {
		c.DBWriters = 4
	}
	if c.LockTTL == 0 {
		c.LockTTL = 30 * time.Second
	}
	if c.LockWait == 0 {
		c.LockWait = c.LockTTL + 5*time.Second
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 8
	}
	if c.Overlap == 0 {
		c.Overlap = time.Minute
	}
	if c.Grace == 0 {
		c.Grace = 25 * time.Second
	}
	if c.ProgressEvery == 0 {
		c.ProgressEvery = 2 * time.Second
	}
	if c.CheckpointEvery == 0 {
		c.CheckpointEvery = time.Second
	}
	return c, c.validate()
}

func (c Config) validate() error {
	var errs []error
	if c.Mode != ModeRun && c.Mode != ModeBackfill {
		errs = append(errs, fmt.Errorf("mode %q: want %q or %q", c.Mode, ModeRun, ModeBackfill))
	}
	if c.Workers < 1 || c.Workers > 4096 {
		errs = append(errs, fmt.Errorf("workers %d: want 1..4096", c.Workers))
	}
	if c.Fetchers < 1 || c.Fetchers > 256 {
		errs = append(errs, fmt.Errorf("fetchers %d: want 1..256", c.Fetchers))
	}
	if c.PageSize < 1 || c.PageSize > 1000 {
		errs = append(errs, fmt.Errorf("page size %d: want 1..1000", c.PageSize))
	}
	if c.DBWriters < 1 || c.DBWriters > 4096 {
		errs = append(errs, fmt.Errorf("db writers %d: want 1..4096", c.DBWriters))
	}
	if c.ChunkSize < 1 || c.ChunkSize > 5000 {
		errs = append(errs, fmt.Errorf("chunk size %d: want 1..5000", c.ChunkSize))
	}
	if c.LockTTL < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("lock ttl %s: want at least 10ms", c.LockTTL))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("max attempts %d: want at least 1", c.MaxAttempts))
	}
	if c.Overlap < 0 {
		errs = append(errs, fmt.Errorf("overlap %s: must not be negative", c.Overlap))
	}
	if c.MaxDuration < 0 {
		errs = append(errs, fmt.Errorf("max duration %s: must not be negative (0: no limit)", c.MaxDuration))
	}
	if c.Shards < 0 || (c.Shards > 1 && (c.Shard < 0 || c.Shard >= c.Shards)) {
		errs = append(errs, fmt.Errorf("shard %d/%d: want 0 <= i < n", c.Shard, c.Shards))
	}
	if !c.Until.IsZero() && !c.Since.IsZero() && !c.Until.After(c.Since) {
		errs = append(errs, fmt.Errorf("window: until %s is not after since %s", c.Until.Format(time.RFC3339), c.Since.Format(time.RFC3339)))
	}
	if len(c.Job) > 150 || c.Job == "" {
		errs = append(errs, fmt.Errorf("job name %q: want 1..150 characters", c.Job))
	}
	return errors.Join(errs...)
}
