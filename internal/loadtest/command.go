package loadtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/erpsync/erpsync/internal/cli"
	"github.com/erpsync/erpsync/internal/store"
)

// Command returns `erpsync loadtest` for cli.Main.
func Command() cli.Command {
	return cli.Command{
		Name:    "loadtest",
		Summary: "start erpmock and several erpsync processes against it; print throughput, latency and correctness",
		Run:     run,
	}
}

const help = `Usage: erpsync loadtest [flags]

Starts erpmock in this process on a loopback port and --processes erpsync
processes of --erpsync-bin against it at once: one "run" and the others
"backfill"s over the whole feed, so that they overlap record for record.
While they run it counts the table every 500 ms; at the end it verifies the
table against the feed and prints records/s overall and per process, the
serve-to-write latency (p50/p95/p99), lock contention, UNIQUE violations,
stale rejects, ERP retries and peak RSS per process. It writes report.json
and report.html (charts, no outside resource) and one log per process into
--out. Exit 0 when every process succeeded and the table matches the feed,
1 otherwise, 2 on bad usage.

The database (default erpsync_loadtest) is created and migrated when
missing, and its memberships table is emptied first unless --keep; it must
have "loadtest" in its name for that. The emptied table is handed to the
load test's job; with --keep, --job must be the job that owns the table.
Unlike the other commands, loadtest reads no ERPSYNC_* variable and passes
none of its own on to its processes: only its flags configure them (the
DSN goes to them as ERPSYNC_MYSQL_DSN, off their command lines), so it
never empties the database a deployment points at.

Flags:
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, timeout, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cfg.Log = stderr
	if _, err := cfg.withDefaults(); err != nil {
		return cli.UsageError(err)
	}
	rep, err := Run(ctx, cfg)
	if err != nil {
		return err
	}
	printSummary(stdout, rep)
	fmt.Fprintf(stdout, "reports: %s, %s\n", filepath.Join(cfg.OutDir, "report.json"), filepath.Join(cfg.OutDir, "report.html"))
	if !rep.OK {
		return fmt.Errorf("%w: load test", cli.ErrFailed)
	}
	return nil
}

func parseFlags(args []string, stderr io.Writer) (Config, time.Duration, error) {
	var cfg Config
	var timeout time.Duration
	fs := flag.NewFlagSet("erpsync loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, help)
		fs.PrintDefaults()
	}
	self, _ := os.Executable()
	fs.StringVar(&cfg.Bin, "erpsync-bin", self, "erpsync binary the processes run")
	fs.IntVar(&cfg.Records, "records", DefaultRecords, "records in the mock feed")
	fs.Int64Var(&cfg.Seed, "seed", 1, "seed of the records and of the fault decisions")
	cli.IntVar(fs, &cfg.Processes, "processes", DefaultProcesses, 1, 64, "erpsync processes: one run and the rest backfills")
	fs.IntVar(&cfg.Workers, "workers", 0, "--workers of each process (0: erpsync's default)")
	fs.IntVar(&cfg.ChunkSize, "chunk-size", 0, "--chunk-size of each process (0: erpsync's default)")
	fs.IntVar(&cfg.PageSize, "page-size", 0, "--page-size of each process (0: erpsync's default)")
	retries := -1
	cli.IntVar(fs, &retries, "erp-retries", -1, -1, 100, "--erp-retries of each process (0: none; -1: erpsync's default)")
	fs.StringVar(&cfg.MySQLDSN, "mysql-dsn", DefaultMySQLDSN, "MySQL DSN; the database is created and migrated when missing")
	var postgresDSN string
	fs.StringVar(&postgresDSN, "postgres-dsn", "", "PostgreSQL DSN (a postgres:// URL or a key=value string) in place of --mysql-dsn; the database is created and migrated when missing")
	fs.StringVar(&cfg.RedisAddr, "redis-addr", DefaultRedisAddr, "Redis address of the locks")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the rows in memberships instead of emptying it first")
	fs.StringVar(&cfg.Job, "job", "", "job name of the processes (default loadtest-<random>)")
	fs.StringVar(&cfg.OutDir, "out", "./loadtest-report", "directory of report.json, report.html and the process logs")
	fs.DurationVar(&timeout, "timeout", 30*time.Minute, "give up (stopping the processes) after this long")
	cfg.Faults.Flags(fs, "erpmock: ")
	if err := cli.ParseFlags(fs, args); err != nil {
		return cfg, 0, err
	}
	mysqlSet := false
	fs.Visit(func(f *flag.Flag) { mysqlSet = mysqlSet || f.Name == "mysql-dsn" })
	if postgresDSN != "" {
		if mysqlSet {
			return cfg, 0, cli.UsageError(errors.New("--mysql-dsn and --postgres-dsn both given: give one database"))
		}
		if store.DialectOf(postgresDSN) != store.Postgres {
			_, err := store.ParsePostgresDSN(postgresDSN)
			return cfg, 0, cli.UsageError(fmt.Errorf("--postgres-dsn: %w", err))
		}
		cfg.MySQLDSN = postgresDSN
	} else if store.DialectOf(cfg.MySQLDSN) == store.Postgres {
		return cfg, 0, cli.UsageError(errors.New("--mysql-dsn: that is a PostgreSQL DSN: give it as --postgres-dsn"))
	}
	if cfg.Records < 1 {
		return cfg, 0, cli.UsageError(errors.New("--records: want at least 1"))
	}
	if timeout <= 0 {
		return cfg, 0, cli.UsageError(errors.New("--timeout: want a positive duration"))
	}
	if retries >= 0 {
		cfg.ERPRetries = &retries
	}
	return cfg, timeout, nil
}

// printSummary writes the report as a few tables.
func printSummary(w io.Writer, r *Report) {
	verdict := "OK"
	if r.Verify == nil || !r.Verify.OK() {
		verdict = "MISMATCH"
	}
	fmt.Fprintf(w, "\nerpsync load test: %d records, %d processes, %.1f s\n\n", r.FeedRecords, len(r.Processes), r.Seconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "process\tmode\texit\tstatus\trecords/s\tinserted\tupdated\tunchanged\tlock contended\tUNIQUE viol.\tstale rejected\tERP requests\tERP retries\trecord p50/p95/p99 ms\tpeak RSS MiB\t")
	for _, p := range r.Processes {
		status, lat := "no report", "-"
		var c struct{ ins, upd, unch, cont, uniq, stale, req, ret int64 }
		if rep := p.Report; rep != nil {
			status = rep.Status
			if l := rep.RecordLatency; l != nil {
				lat = fmt.Sprintf("%s/%s/%s", fmtNum(l.P50), fmtNum(l.P95), fmtNum(l.P99))
			}
			c.ins, c.upd, c.unch, c.cont, c.uniq, c.stale, c.req, c.ret = rep.Inserted, rep.Updated, rep.Unchanged,
				rep.LockContended, rep.UniqueViolations, rep.StaleRejected, rep.ERPRequests, rep.ERPRetries
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%.0f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", p.Index, p.Mode, p.ExitCode, status,
			p.RecordsPerSecond, c.ins, c.upd, c.unch, c.cont, c.uniq, c.stale, c.req, c.ret, lat, mib(p.PeakRSSKiB))
	}
	t := r.Totals
	fmt.Fprintf(tw, "all\t\t\t\t%.0f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\t\t\n", r.ProcessedPerSecond,
		t.Inserted, t.Updated, t.Unchanged, t.LockContended, t.UniqueViolations, t.StaleRejected, t.ERPRequests, t.ERPRetries)
	tw.Flush()
	fmt.Fprintf(w, "\noverall: %.0f feed records/s (%d records in %.1f s); %.0f records/s handled by all processes\n",
		r.RecordsPerSecond, r.FeedRecords, r.Seconds, r.ProcessedPerSecond)
	fmt.Fprintf(w, "%s: p50 %s ms, p95 %s ms, p99 %s ms, max %s ms (%d rows)\n", r.LatencyName,
		fmtNum(r.Latency.P50), fmtNum(r.Latency.P95), fmtNum(r.Latency.P99), fmtNum(r.Latency.Max), r.Latency.Count)
	fmt.Fprintf(w, "ERP request latency (erpmock side): p50 %s ms, p95 %s ms, p99 %s ms\n",
		fmtNum(r.ERPRequestLatency.P50), fmtNum(r.ERPRequestLatency.P95), fmtNum(r.ERPRequestLatency.P99))
	if r.Verify != nil {
		fmt.Fprintf(w, "verify: %s (%d feed records, %d rows, %d matching, %d missing, %d stale, %d unknown, %d ahead)\n", verdict,
			r.Verify.FeedRecords, r.Verify.Rows, r.Verify.Matching, r.Verify.Missing.Count, r.Verify.Stale.Count, r.Verify.Unknown.Count, r.Verify.Ahead.Count)
	} else {
		fmt.Fprintln(w, "verify: not run")
	}
	for _, f := range r.Failures {
		fmt.Fprintf(w, "FAILED: %s\n", f)
	}
	for _, p := range r.Processes {
		if len(p.LogTail) > 0 {
			fmt.Fprintf(w, "\nprocess %d (%s), last log lines:\n", p.Index, p.Mode)
			for _, l := range p.LogTail {
				fmt.Fprintln(w, "  "+l)
			}
		}
	}
}
