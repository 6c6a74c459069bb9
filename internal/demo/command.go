package demo

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/cli"
	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/store"
)

// Command returns `erpsync demo`, for cli.Main.
func Command() cli.Command {
	return cli.Command{
		Name:    "demo",
		Summary: "the whole job on embedded servers (ERP, Redis, MySQL in this process): nothing to set up",
		Run:     run,
	}
}

const help = `Usage: erpsync demo [flags]

Starts erpmock, a Redis-protocol server (miniredis) and a MySQL-protocol
server (go-mysql-server, in memory) in this process on loopback ports, then
runs five sync instances with the production code: two runs at once (one
finds the job lock taken and is skipped), two backfills of the whole feed
with different chunk sizes while ERP records change, then a final run.
Each change is written with its event to the outbox, and a relay delivers
the events, HMAC-signed, to a webhook in this process while the instances
run. It prints each run's report, verify's comparison of the feed with the
database and what the webhook took. Exit 0 when they match and the webhook
took one event for each row inserted or updated, 1 otherwise, 2 on bad
usage.

--mysql-dsn (or --postgres-dsn, a PostgreSQL database instead of MySQL)
and --redis-addr use real servers instead: the database is created when
missing and must hold no memberships. They do not fall back to
ERPSYNC_MYSQL_DSN, ERPSYNC_POSTGRES_DSN and ERPSYNC_REDIS_ADDR, so that the
demo never writes into the database a deployment points at. The other
flags do fall back to their ERPSYNC_* variables (--records is
ERPSYNC_RECORDS).

Flags:
`

// noEnv lists the flags that never read their environment variable.
var noEnv = map[string]bool{"mysql-dsn": true, "postgres-dsn": true, "redis-addr": true}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	tally := new(quietTally)
	cfg, err := parseFlags(args, stderr, tally)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()

	fmt.Fprintf(stdout, "erpsync demo: five sync instances against one ERP, one Redis and one %s\n\n", cfg.database())
	res, err := Run(ctx, cfg, stdout)
	tally.summarise(*cfg.Log)
	if errors.Is(err, errNotEmpty) {
		return cli.UsageError(err)
	}
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	Print(stdout, res)
	if !res.OK() {
		return fmt.Errorf("%w: demo", cli.ErrFailed)
	}
	return nil
}

func parseFlags(args []string, stderr io.Writer, tally *quietTally) (Config, error) {
	var cfg Config
	var level string
	fs := flag.NewFlagSet("erpsync demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, help)
		fs.PrintDefaults()
	}
	fs.IntVar(&cfg.Records, "records", 0, fmt.Sprintf("records in the mock ERP (default %d on the embedded MySQL, %d on a real one)", DefaultEmbeddedRecords, DefaultRecords))
	fs.Int64Var(&cfg.Seed, "seed", 1, "seed of the mock's records and fault decisions")
	fs.IntVar(&cfg.Changes, "changes", DefaultChanges, "ERP records that change while the instances page (0: none)")
	fs.StringVar(&cfg.MySQLDSN, "mysql-dsn", "", "a real MySQL database instead of the embedded server (created when missing; must hold no memberships)")
	fs.StringVar(&cfg.PostgresDSN, "postgres-dsn", "", "a real PostgreSQL database instead of the embedded MySQL, a postgres:// URL or a libpq key=value string (created when missing; must hold no memberships)")
	fs.StringVar(&cfg.RedisAddr, "redis-addr", "", "a real Redis host:port instead of the embedded server")
	fs.StringVar(&level, "log-level", "warn", "log level of the instances' logs on stderr: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, err
		}
		return cfg, cli.UsageError(err)
	}
	if fs.NArg() > 0 {
		return cfg, cli.UsageError(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || noEnv[f.Name] {
			return
		}
		name := "ERPSYNC_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %v", name, v, err))
			}
		}
	})
	if len(errs) > 0 {
		return cfg, cli.UsageError(errors.Join(errs...))
	}
	if cfg.Changes == 0 {
		cfg.Changes = -1 // Config's zero is the default
	}
	lvl, err := zerolog.ParseLevel(strings.ToLower(level))
	if err != nil || level == "" {
		return cfg, cli.UsageError(fmt.Errorf("--log-level %q: want debug, info, warn or error", level))
	}
	log := newLogger(stderr, lvl, tally)
	cfg.Log = &log
	if _, err := cfg.withDefaults(); err != nil {
		return cfg, cli.UsageError(err)
	}
	return cfg, nil
}

// quiet are log messages that the demo's tables already count, one line per
// record or run: at warn they would drown the output. The quarantines are
// summed up in one line at the end (quietTally).
var quiet = map[string]bool{
	"invalid records quarantined":                    true,
	"job lock held by another instance; run skipped": true,
}

// quietTally counts the quarantine warnings the demo's log leaves out.
type quietTally struct {
	mu    sync.Mutex
	lines int
}

func (q *quietTally) add() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.lines++
}

// summarise logs, at warn, the one line that stands for the quarantine
// warnings left out, if there were any.
func (q *quietTally) summarise(log zerolog.Logger) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lines > 0 {
		log.Warn().Int("warnings", q.lines).Msg("invalid records quarantined (erpmock serves some on purpose): the invalid column below counts them per instance")
	}
}

// newLogger is the demo's console log on w: colours only on a terminal
// without NO_COLOR; at warn and above, without the quiet messages, whose
// quarantines tally counts.
func newLogger(w io.Writer, lvl zerolog.Level, tally *quietTally) zerolog.Logger {
	l := zerolog.New(zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000", NoColor: !cli.Colour(w)}).Level(lvl).With().Timestamp().Logger()
	if lvl >= zerolog.WarnLevel {
		l = l.Hook(zerolog.HookFunc(func(e *zerolog.Event, _ zerolog.Level, msg string) {
			if quiet[msg] {
				e.Discard()
				if msg == "invalid records quarantined" {
					tally.add()
				}
			}
		}))
	}
	return l
}

// Print writes the run reports, verify's result and the verdict.
func Print(w io.Writer, r *Result) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "instance\tmode\tchunk\tstatus\tfetched\tinserted\tupdated\tunchanged\tduplicates\tlock_contended\tstale_rejected\tinvalid\tfailed\ttook\t")
	var sum store.Counters
	skipped := []string{}
	for _, in := range r.Instances {
		rep := in.Report
		if rep == nil {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t\t\t\t\t\t\t\t\t\t\t\n", in.Name, in.Config.Mode, in.Config.ChunkSize, "error")
			continue
		}
		took := "-"
		if rep.FinishedAt != nil {
			took = rep.FinishedAt.Sub(rep.StartedAt).Round(10 * time.Millisecond).String()
		}
		c := rep.Counters
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", in.Name, in.Config.Mode, in.Config.ChunkSize,
			rep.Status, c.Fetched, c.Inserted, c.Updated, c.Unchanged, c.DuplicatesInFeed, c.LockContended,
			c.StaleRejected, c.Invalid, c.Failed, took)
		sum.Inserted += c.Inserted
		sum.LockContended += c.LockContended
		if rep.Status == store.StatusSkipped {
			skipped = append(skipped, in.Name)
		}
	}
	tw.Flush()
	fmt.Fprintln(w, "  duplicates: copies of a record already in the page or the page before (erpmock replays some), dropped")
	fmt.Fprintln(w, "  lock_contended: records whose lock another instance held; they waited for it and were then written or found current")
	fmt.Fprintln(w, "  stale_rejected: writes refused because a newer lock holder (fencing token) wrote the row first; retried under a fresh lock")
	for _, in := range r.Instances {
		if in.Err != nil {
			fmt.Fprintf(w, "  %s failed: %v\n", in.Name, in.Err)
		}
	}

	v := r.Verify
	if v == nil {
		fmt.Fprintln(w, "\nverify: not run")
		fmt.Fprintln(w, "\nFAILED: the demo did not get to verify")
		return
	}
	table := r.Database + ".memberships"
	if r.DatabaseServer == "PostgreSQL" {
		table = "memberships of database " + r.Database
	}
	fmt.Fprintf(w, "\nverify: %d valid records in the feed (%d records whose newest copy is invalid), %d rows in %s\n",
		v.FeedRecords, v.FeedInvalid, v.Rows, table)
	fmt.Fprintf(w, "  matching %d, missing %d, stale %d, unknown %d, ahead %d\n",
		v.Matching, v.Missing.Count, v.Stale.Count, v.Unknown.Count, v.Ahead.Count)
	for _, s := range []struct {
		name string
		ids  []string
	}{{"missing", v.Missing.IDs}, {"stale", v.Stale.IDs}, {"unknown", v.Unknown.IDs}, {"ahead", v.Ahead.IDs}} {
		if len(s.ids) > 0 {
			fmt.Fprintf(w, "  %s, e.g.: %s\n", s.name, strings.Join(s.ids, ", "))
		}
	}

	printEvents(w, r.Events)

	fmt.Fprintln(w)
	switch {
	case !v.OK():
		fmt.Fprintf(w, "MISMATCH: the database differs from the ERP feed after %s (see above)\n", r.Took.Round(100*time.Millisecond))
		return
	case !r.Events.OK():
		fmt.Fprintf(w, "MISMATCH: the webhook did not take one event for each row inserted or updated after %s (see above)\n", r.Took.Round(100*time.Millisecond))
		return
	}
	skip := "no run was skipped (the two runs did not overlap)"
	if len(skipped) > 0 {
		skip = strings.Join(skipped, ", ") + " skipped: another instance held the job lock"
	}
	changed := fmt.Sprintf("%d ERP records changed mid-run", r.Changed)
	switch {
	case r.Changed == 0:
		changed = "no ERP record changed"
	case r.ChangedAt < 0:
		changed = fmt.Sprintf("%d ERP records changed before the final run", r.Changed)
	}
	once := fmt.Sprintf("each record was inserted once over all instances (inserted, summed: %d)", sum.Inserted)
	if sum.Inserted != v.Rows {
		once = fmt.Sprintf("%d inserts counted over all instances for %d rows", sum.Inserted, v.Rows)
	}
	fmt.Fprintf(w, "OK: the database holds exactly the ERP's latest version of all %d valid records.\n", v.FeedRecords)
	fmt.Fprintf(w, "    %d instances wrote at once, %s, and %s;\n", concurrent(r), changed, skip)
	fmt.Fprintf(w, "    %s; %d records waited for a lock another instance held;\n", once, sum.LockContended)
	fmt.Fprintf(w, "    the webhook took one change event for each row inserted or updated (%d).\n", r.Events.Delivered)
	fmt.Fprintf(w, "    %s in all.\n", r.Took.Round(100*time.Millisecond))
	if r.Embedded {
		fmt.Fprintln(w, "(embedded servers: nothing was kept; see `erpsync demo -h` to run it on a real MySQL or PostgreSQL and Redis)")
	}
}

// printEvents writes what the relay delivered: an insert and an update
// as the webhook took them, and the counts.
func printEvents(w io.Writer, e *Events) {
	if e == nil {
		fmt.Fprintln(w, "\nevents: the relay did not run")
		return
	}
	fmt.Fprintf(w, "\nevents: the relay delivered the outbox to the webhook in %d POSTs, every signature verified (%d did not)\n", e.Posts, e.BadSignatures)
	for _, b := range []*outbox.Body{e.Insert, e.Update} {
		if b != nil {
			key, _ := json.Marshal(b.Key)
			fmt.Fprintf(w, "  %-6s %s version %d: %s\n", b.Op, key, b.Version, excerpt(b))
		}
	}
	fmt.Fprintf(w, "  delivered %d distinct events (%d with redeliveries); rows inserted + updated over all instances: %d + %d = %d\n",
		e.Delivered, e.Received, e.Inserted, e.Updated, e.Inserted+e.Updated)
	if e.Pending != 0 {
		fmt.Fprintf(w, "  %d events left pending\n", e.Pending)
	}
	if e.Err != nil {
		fmt.Fprintf(w, "  relay: %v\n", e.Err)
	}
}

// concurrent counts the instances of the concurrent phase that ran (not
// skipped): all but the final run.
func concurrent(r *Result) int {
	n := 0
	for _, in := range r.Instances[:max(len(r.Instances)-1, 0)] {
		if in.Report != nil && in.Report.Status != store.StatusSkipped {
			n++
		}
	}
	return n
}
