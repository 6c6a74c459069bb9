package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
	"github.com/erpsync/erpsync/internal/verify"
)

// Defaults of Config.
const (
	DefaultRecords   = 100_000
	DefaultProcesses = 4
	DefaultMySQLDSN  = "root@tcp(127.0.0.1:3306)/erpsync_loadtest?parseTime=true"
	DefaultRedisAddr = "127.0.0.1:6379"
)

// backfillSince is the window start of the backfills: before every record
// of the mock, so that each backfill reads the whole feed. Backfill i starts
// i seconds later, which changes nothing it reads but gives each its own
// resume checkpoint (the checkpoint is named by job and window).
var backfillSince = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Config says what one load test does. Zero fields take their defaults.
type Config struct {
	// Bin is the erpsync binary the processes run. Required.
	Bin string
	// Records is the number of records in the mock feed. Defaults to 100,000.
	Records int
	// Seed selects the records and the fault decisions. Defaults to 0.
	Seed int64
	// Faults are the mock's fault switches. They are switched off for the
	// final verification. Defaults to none.
	Faults erpmock.Faults
	// Processes is the number of erpsync processes: one `run` and
	// Processes-1 `backfill`s over the whole feed, all at once. Defaults to 4.
	Processes int
	// Workers, ChunkSize and PageSize are passed to every process as
	// --workers, --chunk-size and --page-size. Zero leaves erpsync's default.
	Workers, ChunkSize, PageSize int
	// ERPRetries, when set, is passed to every process as --erp-retries
	// (0: none). Nil leaves erpsync's default.
	ERPRetries *int
	// MySQLDSN names the database. It is created and migrated when missing.
	// Defaults to DefaultMySQLDSN. A postgres:// URL or a libpq key=value
	// string names a PostgreSQL database (store.DialectOf), which the
	// processes get as ERPSYNC_POSTGRES_DSN.
	MySQLDSN string
	// RedisAddr is the Redis of the locks. Defaults to DefaultRedisAddr.
	RedisAddr string
	// Keep keeps the rows already in memberships. By default the table is
	// emptied first, which is refused unless the database name contains
	// "loadtest", and handed to Job (one table, one job); kept, it must
	// belong to Job or to no job.
	Keep bool
	// Job is the job name of the processes. Defaults to "loadtest-" and a
	// random suffix, so that no job lock or checkpoint is shared with
	// anything else.
	Job string
	// OutDir receives report.json, report.html and one log per process.
	// Empty writes no file (the logs go to a temporary directory).
	OutDir string
	// SampleEvery is how often the table is counted. Defaults to 500ms.
	SampleEvery time.Duration
	// Log receives one line per step. Defaults to io.Discard.
	Log io.Writer
}

func (c Config) withDefaults() (Config, error) {
	if c.Bin == "" {
		return c, errors.New("loadtest: no erpsync binary")
	}
	if c.Records == 0 {
		c.Records = DefaultRecords
	}
	if c.Processes == 0 {
		c.Processes = DefaultProcesses
	}
	if c.MySQLDSN == "" {
		c.MySQLDSN = DefaultMySQLDSN
	}
	if c.RedisAddr == "" {
		c.RedisAddr = DefaultRedisAddr
	}
	if c.Job == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.Job = "loadtest-" + hex.EncodeToString(b[:])
	}
	if c.SampleEvery <= 0 {
		c.SampleEvery = 500 * time.Millisecond
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	var errs []error
	if c.Records < 0 {
		errs = append(errs, fmt.Errorf("records %d: want at least 0", c.Records))
	}
	if c.Processes < 1 || c.Processes > 64 {
		errs = append(errs, fmt.Errorf("processes %d: want 1..64", c.Processes))
	}
	if c.Workers < 0 || c.ChunkSize < 0 || c.PageSize < 0 {
		errs = append(errs, errors.New("workers, chunk size and page size must not be negative"))
	}
	if r := c.ERPRetries; r != nil && (*r < 0 || *r > 100) {
		errs = append(errs, fmt.Errorf("erp retries %d: want 0..100", *r))
	}
	if err := c.Faults.Validate(); err != nil {
		errs = append(errs, err)
	}
	name, err := databaseName(c.MySQLDSN)
	if err != nil {
		errs = append(errs, err)
	} else if !c.Keep && !strings.Contains(strings.ToLower(name), "loadtest") {
		errs = append(errs, fmt.Errorf("refusing to empty memberships in database %q: use a database whose name contains \"loadtest\", or keep its rows", name))
	}
	return c, errors.Join(errs...)
}

// Report is what a load test measured. It is report.json.
type Report struct {
	OK       bool     `json:"ok"`
	Failures []string `json:"failures,omitempty"`

	Config     ReportConfig `json:"config"`
	StartedAt  time.Time    `json:"started_at"`
	FinishedAt time.Time    `json:"finished_at"`
	// Seconds is the wall time of the processes: from starting the first
	// to the end of the last.
	Seconds float64 `json:"duration_seconds"`
	// FeedRecords is the number of valid records in the feed.
	FeedRecords int64 `json:"feed_records"`
	// RecordsPerSecond is FeedRecords over Seconds: how fast the fleet
	// brought the table in line with the feed.
	RecordsPerSecond float64 `json:"records_per_second"`
	// ProcessedPerSecond is every record every process handled (inserted,
	// updated, unchanged, duplicate, invalid or failed) over Seconds.
	ProcessedPerSecond float64 `json:"processed_per_second"`

	Processes []ProcessResult `json:"processes"`
	Totals    store.Counters  `json:"totals"`

	// Latency is the serve-to-write latency of every row; see
	// LatencyDefinition.
	Latency           Distribution `json:"latency"`
	LatencyName       string       `json:"latency_name"`
	LatencyDefinition string       `json:"latency_definition"`
	// LatencyUnmatched counts rows whose version was never served whole
	// during this test (rows kept from before).
	LatencyUnmatched int64 `json:"latency_unmatched"`
	// DBClockOffsetMS is the database clock minus the load test's clock,
	// measured at start and taken out of every latency.
	DBClockOffsetMS float64 `json:"db_clock_offset_ms"`
	// DBClockUncertaintyMS bounds the error of that offset: half the
	// shortest round trip it was measured with.
	DBClockUncertaintyMS float64 `json:"db_clock_uncertainty_ms"`
	// ERPRequestLatency is the time erpmock spent on each API request of
	// the processes, injected latency and faults included.
	ERPRequestLatency Distribution `json:"erp_request_latency"`

	Timeline []Sample       `json:"timeline"`
	Verify   *verify.Result `json:"verify"`
	Mock     erpmock.Stats  `json:"mock"`
}

// ReportConfig is the configuration a report was made with.
type ReportConfig struct {
	Records   int   `json:"records"`
	Seed      int64 `json:"seed"`
	Processes int   `json:"processes"`
	Workers   int   `json:"workers,omitempty"`
	ChunkSize int   `json:"chunk_size,omitempty"`
	PageSize  int   `json:"page_size,omitempty"`
	// ERPRetries is nil when the processes ran with erpsync's default.
	ERPRetries *int           `json:"erp_retries,omitempty"`
	Faults     erpmock.Faults `json:"faults"`
	Database   string         `json:"database"`
	RedisAddr  string         `json:"redis_addr"`
	Job        string         `json:"job"`
	Kept       bool           `json:"kept_rows"`
	Binary     string         `json:"erpsync_bin"`
}

// ProcessResult is what one process did.
type ProcessResult struct {
	Index    int      `json:"index"`
	Mode     string   `json:"mode"`
	Args     []string `json:"args"`
	ExitCode int      `json:"exit_code"`
	// Seconds is the process's wall time.
	Seconds float64 `json:"seconds"`
	// RecordsPerSecond is the records the process handled over its run's
	// duration (from its report).
	RecordsPerSecond float64 `json:"records_per_second"`
	// PeakRSSKiB is the process's peak resident set: the last VmHWM read
	// from /proc every 50 ms while it ran (see RSSWatch).
	PeakRSSKiB int64 `json:"peak_rss_kib"`
	// RusageMaxRSSKiB is ru_maxrss of its rusage, which on Linux is at
	// least the load test's own RSS when the process started: kept for
	// reference, not the process's peak.
	RusageMaxRSSKiB int64   `json:"rusage_maxrss_kib"`
	CPUSeconds      float64 `json:"cpu_seconds"`
	// Served counts the records erpmock served the process in whole pages.
	Served            int64          `json:"served_records"`
	ERPRequestLatency Distribution   `json:"erp_request_latency"`
	Report            *syncer.Report `json:"report"`
	LogFile           string         `json:"log_file,omitempty"`
	LogTail           []string       `json:"log_tail,omitempty"`
}

// Sample is one point of the timeline.
type Sample struct {
	// T is seconds since the processes started.
	T float64 `json:"t"`
	// Rows is COUNT(*) of memberships.
	Rows int64 `json:"rows"`
	// RowsPerSecond is the growth of Rows since the previous sample.
	RowsPerSecond float64 `json:"rows_per_second"`
	// Served is, per process, the records erpmock has served it so far.
	Served []int64 `json:"served"`
	// Done is, per process, "done" of its last progress line (one every
	// 10 s).
	Done []int64 `json:"done"`
}

const (
	latencyName       = "serve-to-write latency"
	latencyDefinition = "per row of memberships at the end: the row's updated_at (set by the database at the start of the statement that wrote its final version, millisecond precision, corrected by the measured database clock offset) minus the moment erpmock began the last write of the first complete page that carried that version of the record to any process. It covers queueing in the page pipeline, the record lock, the version read and the write; it leaves out the ERP request itself and the commit."
)

// Run runs one load test. It returns an error when the test could not be
// run; a test that ran and found failures returns a report whose OK is
// false, and no error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(cfg.Log, "loadtest: "+format+"\n", args...) }
	dbName, _ := databaseName(cfg.MySQLDSN)
	rep := &Report{
		Config: ReportConfig{
			Records: cfg.Records, Seed: cfg.Seed, Processes: cfg.Processes, Workers: cfg.Workers,
			ChunkSize: cfg.ChunkSize, PageSize: cfg.PageSize, ERPRetries: cfg.ERPRetries, Faults: cfg.Faults, Database: dbName,
			RedisAddr: cfg.RedisAddr, Job: cfg.Job, Kept: cfg.Keep, Binary: cfg.Bin,
		},
		StartedAt:         time.Now().UTC(),
		LatencyName:       latencyName,
		LatencyDefinition: latencyDefinition,
	}

	// The database, empty, and Redis.
	mres, err := store.Migrate(ctx, cfg.MySQLDSN)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	logf("database %s migrated (version %d)", mres.Database, mres.Current)
	st, err := store.Open(ctx, cfg.MySQLDSN, &store.Options{MaxOpenConns: 4})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	// One table, one job: an emptied table is this test's job's (an
	// earlier load test's job owned it); a kept one may belong to another
	// job, and then the processes would be refused.
	if !cfg.Keep {
		if err := st.DB().WithContext(ctx).Exec("TRUNCATE TABLE memberships").Error; err != nil {
			return nil, fmt.Errorf("empty memberships: %w", err)
		}
		if _, _, err := st.TakeTable(ctx, store.MembershipsTable, cfg.Job); err != nil {
			return nil, err
		}
	} else if err := st.ClaimTable(ctx, store.MembershipsTable, cfg.Job); err != nil {
		return nil, fmt.Errorf("%w: give the load test that job (--job) to keep its rows", err)
	}
	offset, slack, err := dbClockOffset(ctx, st)
	if err != nil {
		return nil, err
	}
	rep.DBClockOffsetMS = float64(offset) / float64(time.Millisecond)
	rep.DBClockUncertaintyMS = float64(slack) / float64(time.Millisecond)
	rdb := redis.NewClient(&redis.Options{Addr: cfg.RedisAddr})
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = rdb.Ping(pctx).Err()
	cancel()
	rdb.Close()
	if err != nil {
		return nil, fmt.Errorf("redis at %s: %w", cfg.RedisAddr, err)
	}

	// The mock, behind the tap, on a loopback port.
	mock := erpmock.New(erpmock.Options{Records: cfg.Records, Seed: cfg.Seed, Faults: cfg.Faults})
	tp := newTap(mock, cfg.Processes)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: tp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	logf("erpmock serving %d records (seed %d) at %s", cfg.Records, cfg.Seed, base)

	// The processes.
	logDir := cfg.OutDir
	if logDir == "" {
		logDir, err = os.MkdirTemp("", "erpsync-loadtest-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(logDir)
	} else if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", logDir, err)
	}
	tmp, err := os.MkdirTemp("", "erpsync-loadtest-reports-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	children := make([]*child, cfg.Processes)
	for i := range children {
		c := &child{index: i, mode: syncer.ModeRun, report: filepath.Join(tmp, fmt.Sprintf("p%d.json", i))}
		if i > 0 {
			c.mode = syncer.ModeBackfill
		}
		c.args = []string{c.mode,
			"--redis-addr", cfg.RedisAddr,
			"--erp-url", base + prefix(i),
			"--job", cfg.Job,
			"--report", c.report,
			"--log-format", "json",
			"--log-level", "info",
		}
		if c.mode == syncer.ModeBackfill {
			c.args = append(c.args, "--since", backfillSince.Add(time.Duration(i)*time.Second).Format(time.RFC3339))
		}
		for _, f := range []struct {
			name string
			v    int
		}{{"--workers", cfg.Workers}, {"--chunk-size", cfg.ChunkSize}, {"--page-size", cfg.PageSize}} {
			if f.v > 0 {
				c.args = append(c.args, f.name, strconv.Itoa(f.v))
			}
		}
		if cfg.ERPRetries != nil {
			c.args = append(c.args, "--erp-retries", strconv.Itoa(*cfg.ERPRetries))
		}
		children[i] = c
	}
	t0 := time.Now()
	smp := &sampler{st: st, tap: tp, children: children, t0: t0}
	smp.sample(ctx) // the rows before
	for _, c := range children {
		logPath := filepath.Join(logDir, fmt.Sprintf("process-%d-%s.log", c.index, c.mode))
		if err := c.start(ctx, cfg.Bin, cfg.MySQLDSN, logPath, t0); err != nil {
			for _, o := range children {
				if o.done != nil {
					_ = o.cmd.Process.Kill()
					o.wait()
				}
			}
			return nil, err
		}
		if cfg.OutDir != "" {
			c.logFile = logPath
		}
	}
	logf("started %d processes (1 run, %d backfills), job %s", len(children), len(children)-1, cfg.Job)

	// Sample while they run.
	stopSampling := make(chan struct{})
	var sampled sync.WaitGroup
	sampled.Add(1)
	go func() {
		defer sampled.Done()
		tick := time.NewTicker(cfg.SampleEvery)
		defer tick.Stop()
		lastLog := time.Now()
		for {
			select {
			case <-tick.C:
				s := smp.sample(ctx)
				if time.Since(lastLog) >= 5*time.Second {
					lastLog = time.Now()
					logf("%5.1fs  rows %d  %.0f rows/s  served %v", s.T, s.Rows, s.RowsPerSecond, s.Served)
				}
			case <-stopSampling:
				return
			}
		}
	}()
	for _, c := range children {
		c.wait()
	}
	end := time.Now()
	close(stopSampling)
	sampled.Wait()
	smp.sample(ctx)
	rep.Timeline = smp.samples
	rep.Seconds = end.Sub(t0).Seconds()
	logf("processes done in %.1fs", rep.Seconds)

	// What each process did.
	var all []float64
	for _, c := range children {
		pr, err := c.result()
		if err != nil {
			rep.Failures = append(rep.Failures, err.Error())
		}
		p := tp.procs[c.index]
		pr.Served = p.served.Load()
		p.mu.Lock()
		lat := slices.Clone(p.latency)
		p.mu.Unlock()
		all = append(all, lat...)
		pr.ERPRequestLatency = distribution(lat, false)
		pr.LogFile = c.logFile
		switch {
		case pr.ExitCode != 0:
			rep.Failures = append(rep.Failures, fmt.Sprintf("process %d (%s) exited %d", c.index, c.mode, pr.ExitCode))
		case pr.Report != nil && pr.Report.Status != store.StatusSucceeded:
			rep.Failures = append(rep.Failures, fmt.Sprintf("process %d (%s) ended %s", c.index, c.mode, pr.Report.Status))
		default:
			pr.LogTail = nil
		}
		if r := pr.Report; r != nil {
			addCounters(&rep.Totals, r.Counters)
			rep.ProcessedPerSecond += float64(r.Counters.Handled())
		}
		rep.Processes = append(rep.Processes, pr)
	}
	rep.ERPRequestLatency = distribution(all, false)
	if rep.Seconds > 0 {
		rep.ProcessedPerSecond /= rep.Seconds
	}

	// Is the table the feed? Faults off: verify reads the feed as it is.
	mock.SetFaults(erpmock.Faults{})
	rep.Mock = mock.Stats()
	rep.FeedRecords = int64(rep.Mock.Valid)
	if rep.Seconds > 0 {
		rep.RecordsPerSecond = float64(rep.FeedRecords) / rep.Seconds
	}
	if ctx.Err() != nil {
		// Stopped (signal or --timeout): report what there is.
		rep.Failures = append(rep.Failures, fmt.Sprintf("interrupted (%v): not verified", context.Cause(ctx)))
		return rep.finish(cfg.OutDir)
	}
	ec, err := erp.New(erp.Config{BaseURL: base + verifyPrefix})
	if err != nil {
		return nil, err
	}
	vctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	res, err := verify.Verify(vctx, ec, st, 1000)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	rep.Verify = res
	if !res.OK() {
		rep.Failures = append(rep.Failures, fmt.Sprintf("verify: %d missing, %d stale, %d unknown, %d ahead",
			res.Missing.Count, res.Stale.Count, res.Unknown.Count, res.Ahead.Count))
	}
	logf("verify: %d rows, %d matching, ok=%v", res.Rows, res.Matching, res.OK())

	// Serve-to-write latency of every row.
	lat, unmatched, err := rowLatencies(vctx, st, tp, offset, slack)
	if err != nil {
		return nil, err
	}
	rep.Latency = distribution(lat, true)
	rep.LatencyUnmatched = unmatched

	return rep.finish(cfg.OutDir)
}

// finish stamps the report and writes it into dir, when not empty.
func (r *Report) finish(dir string) (*Report, error) {
	r.FinishedAt = time.Now().UTC()
	r.OK = len(r.Failures) == 0
	if dir != "" {
		if err := r.write(dir); err != nil {
			return r, err
		}
	}
	return r, nil
}

func addCounters(t *store.Counters, c store.Counters) {
	t.Fetched += c.Fetched
	t.Inserted += c.Inserted
	t.Updated += c.Updated
	t.Unchanged += c.Unchanged
	t.DuplicatesInFeed += c.DuplicatesInFeed
	t.LockContended += c.LockContended
	t.UniqueViolations += c.UniqueViolations
	t.StaleRejected += c.StaleRejected
	t.Invalid += c.Invalid
	t.Failed += c.Failed
	t.ERPRequests += c.ERPRequests
	t.ERPRetries += c.ERPRetries
}

// dbClockOffset measures the database clock minus ours, and the bound of
// its error (half the round trip of the best of five reads).
func dbClockOffset(ctx context.Context, st *store.Store) (offset, slack time.Duration, err error) {
	best := time.Duration(-1)
	for range 5 {
		var now time.Time
		before := time.Now()
		clock := "SELECT UTC_TIMESTAMP(6)"
		if st.Dialect() == store.Postgres {
			clock = "SELECT clock_timestamp()"
		}
		if err := st.DB().WithContext(ctx).Raw(clock).Row().Scan(&now); err != nil {
			return 0, 0, fmt.Errorf("read database clock: %w", err)
		}
		rtt := time.Since(before)
		if best < 0 || rtt < best {
			best = rtt
			offset = now.Sub(before.Add(rtt / 2))
		}
	}
	return offset, best / 2, nil
}

// rowLatencies returns the serve-to-write latency of each row, in
// milliseconds, and how many rows had no serve time. A row written at most
// slack plus a millisecond before its serve time counts as written at once:
// the offset is known to slack, and updated_at to the millisecond.
func rowLatencies(ctx context.Context, st *store.Store, tp *tap, offset, slack time.Duration) ([]float64, int64, error) {
	rows, err := st.DB().WithContext(ctx).Raw("SELECT erp_id, erp_version, updated_at FROM memberships").Rows()
	if err != nil {
		return nil, 0, fmt.Errorf("read memberships: %w", err)
	}
	defer rows.Close()
	var out []float64
	var unmatched int64
	for rows.Next() {
		var id string
		var v int64
		var at time.Time
		if err := rows.Scan(&id, &v, &at); err != nil {
			return nil, 0, fmt.Errorf("read memberships: %w", err)
		}
		served, ok := tp.firstServed(id, v)
		d := at.Add(-offset).Sub(tp.start.Add(served))
		if !ok || d < -time.Millisecond-slack {
			unmatched++
			continue
		}
		out = append(out, max(float64(d)/float64(time.Millisecond), 0))
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("read memberships: %w", err)
	}
	return out, unmatched, nil
}

// sampler takes the timeline's samples.
type sampler struct {
	st       *store.Store
	tap      *tap
	children []*child
	t0       time.Time
	samples  []Sample
}

func (s *sampler) sample(ctx context.Context) Sample {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	at := time.Since(s.t0)
	var prev Sample
	if n := len(s.samples); n > 0 {
		prev = s.samples[n-1]
	}
	var rows int64
	if err := s.st.DB().WithContext(cctx).Raw("SELECT COUNT(*) FROM memberships").Row().Scan(&rows); err != nil {
		rows = prev.Rows // a missed count shows as no growth
	}
	smp := Sample{T: at.Seconds(), Rows: rows}
	if dt := smp.T - prev.T; dt > 0 {
		smp.RowsPerSecond = float64(rows-prev.Rows) / dt
	}
	for i, c := range s.children {
		smp.Served = append(smp.Served, s.tap.procs[i].served.Load())
		smp.Done = append(smp.Done, c.lastProgress().Done)
	}
	s.samples = append(s.samples, smp)
	return smp
}

// write writes report.json and report.html into dir.
func (r *Report) write(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "report.html"))
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := writeHTML(f, r); err != nil {
		f.Close()
		return fmt.Errorf("write html report: %w", err)
	}
	return f.Close()
}

// databaseName is the name of the database dsn names, MySQL's or
// PostgreSQL's.
func databaseName(dsn string) (string, error) {
	_, name, err := store.Target(dsn)
	return name, err
}

// dsnEnv is the erpsync setting that takes dsn: ERPSYNC_POSTGRES_DSN or
// ERPSYNC_MYSQL_DSN.
func dsnEnv(dsn string) string {
	if store.DialectOf(dsn) == store.Postgres {
		return "ERPSYNC_POSTGRES_DSN"
	}
	return "ERPSYNC_MYSQL_DSN"
}
