package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/verify"
)

// errMismatch is verify's "the database does not match the feed": exit 1.
var errMismatch = errors.New("the database does not match the feed")

func cmdVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var s settings
	var asJSON bool
	fs := newFlagSet("erpsync verify", stderr)
	s.connFlags(fs)
	intVar(fs, &s.PageSize, "page-size", 1000, 1, 1000, "ERP page size (1..1000)")
	s.fetchersFlag(fs)
	fs.BoolVar(&asJSON, "json", false, "print the result as JSON")
	var ignoreInvalid bool
	fs.BoolVar(&ignoreInvalid, "ignore-invalid", false, "exit 0 over a feed with invalid items when the rows match the valid ones (by default any invalid item is a mismatch: verify cannot compare it)")
	if err := s.parseEntities(fs, args); err != nil {
		return err
	}
	log, err := newLogger(&s, stderr)
	if err != nil {
		return err
	}
	ctx, d, done, err := open(ctx, &s, true, nil, log)
	if err != nil {
		return err
	}
	defer done()
	allOK := true
	var results []any
	for _, t := range d.targets {
		res, err := verify.VerifyParts(ctx, t.erp, t.st, s.PageSize, s.Fetchers)
		if err != nil {
			return interrupted(ctx, fmt.Errorf("verify: %w", targetError(&s, t, err)), "verify compared part of the feed; run it again (it starts over)")
		}
		ok := res.OK() && (ignoreInvalid || res.FeedInvalid == 0)
		allOK = allOK && ok
		switch {
		case asJSON && s.ConfigFile != "":
			results = append(results, struct {
				Entity string `json:"entity"`
				Job    string `json:"job"`
				OK     bool   `json:"ok"`
				*verify.Result
			}{t.ent.Name, t.job, ok, res})
		case asJSON:
			results = append(results, struct {
				OK bool `json:"ok"`
				*verify.Result
			}{ok, res})
		default:
			if s.ConfigFile != "" {
				fmt.Fprintf(stdout, "entity %s (job %s, table %s):\n", t.ent.Name, t.job, t.table.Name())
			}
			printVerify(stdout, res, ok)
		}
	}
	if asJSON {
		var out any = results
		if s.ConfigFile == "" && len(results) == 1 {
			out = results[0] // the contract's one object
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Fprintln(stdout, string(b))
	}
	if !allOK {
		return fmt.Errorf("%w", errFailed)
	}
	return nil
}

func printVerify(w io.Writer, r *verify.Result, ok bool) {
	verdict := "OK: the database matches the feed"
	switch {
	case !r.OK():
		verdict = "MISMATCH: the database differs from the feed"
	case !ok:
		verdict = fmt.Sprintf("INVALID: the rows match the feed's %d valid records, but %d records' newest copies are invalid (an invalid item that names no record counts as one) and cannot be compared (their reasons: the runs' warning lines and quarantined_records; --ignore-invalid accepts them)", r.FeedRecords, r.FeedInvalid)
	}
	fmt.Fprintln(w, verdict)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  feed records\t%d\t(%d records whose newest copy is invalid)\n", r.FeedRecords, r.FeedInvalid)
	fmt.Fprintf(tw, "  database rows\t%d\t(and %d soft-deleted)\n", r.Rows, r.SoftDeleted)
	fmt.Fprintf(tw, "  matching\t%d\n", r.Matching)
	printSamples(tw, []sampleRow{
		{"missing", r.Missing, "in the feed, not in the database (or soft-deleted)"},
		{"stale", r.Stale, "older version, or fields differ at the same version"},
		{"unknown", r.Unknown, "in the database, not in the feed"},
		{"ahead", r.Ahead, "newer version in the database than in the feed"},
		{"quarantined", r.Quarantined, "the feed's newest copy is invalid: the row holds its last valid data (quarantined_at)"},
	})
	if r.LinesMissing.Count+r.LinesExtra.Count+r.LinesStale.Count > 0 {
		printSamples(tw, []sampleRow{
			{"lines missing", r.LinesMissing, "a document's line in the feed, not in its child table"},
			{"lines extra", r.LinesExtra, "a line in the child table that the feed's document does not have"},
			{"lines stale", r.LinesStale, "a line whose values differ from the feed's"},
		})
	}
	fmt.Fprintf(tw, "  took\t%.2fs\n", r.Duration)
	tw.Flush()
}

func cmdRuns(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var s settings
	var limit int
	var lostAfter time.Duration
	var asJSON, all, status bool
	fs := newFlagSet("erpsync runs", stderr)
	s.databaseFlags(fs)
	nameVar(fs, &s.Job, "job", "membership-sync", "job name")
	s.entityFlags(fs)
	fs.BoolVar(&all, "all-jobs", false, "show every job's runs")
	intVar(fs, &limit, "limit", 20, 1, math.MaxInt, "how many runs to show")
	fs.BoolVar(&asJSON, "json", false, "print the runs as JSON")
	fs.BoolVar(&status, "status", false, "one line per entity instead: last run, last success, lag behind the checkpoint, quarantined rows, pending events")
	durationVar(fs, &lostAfter, "lost-after", time.Minute, time.Second, "", fmt.Sprintf("show a run as lost when its row says running but its process has not written its heartbeat (every %s) for this long: killed, or paused", store.HeartbeatEvery))
	s.logFlags(fs)
	if err := s.parseEntities(fs, args); err != nil {
		return err
	}
	// The run history is erpsync's own table; the entities' tables matter
	// to --status alone (its quarantined rows).
	var ents []*entity.Entity
	if status {
		ents = s.entityList()
	}
	st, err := s.openStoreOf(ctx, ents)
	if err != nil {
		return err
	}
	defer st.Close()
	if status {
		return printStatus(ctx, &s, st, stdout, lostAfter)
	}
	jobs := []string{s.Job}
	switch {
	case all:
		jobs = []string{""}
	case s.ConfigFile != "":
		jobs = jobs[:0]
		for _, t := range s.targets {
			jobs = append(jobs, t.job)
		}
	}
	var runs []store.Run
	for _, job := range jobs {
		rs, err := st.Runs(ctx, job, limit)
		if err != nil {
			return err
		}
		runs = append(runs, rs...)
	}
	if len(jobs) > 1 { // newest first over the jobs, then the limit
		slices.SortStableFunc(runs, func(a, b store.Run) int { return b.StartedAt.Compare(a.StartedAt) })
		runs = runs[:min(limit, len(runs))]
	}
	if err := showLost(ctx, st, runs, lostAfter); err != nil {
		return err
	}
	if asJSON {
		if runs == nil {
			runs = []store.Run{} // [], not null
		}
		b, _ := json.MarshalIndent(runs, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STARTED\tJOB\tMODE\tSTATUS\tFETCHED\tINSERTED\tUPDATED\tUNCHANGED\tCONTENDED\tINVALID\tQUARANTINED\tFAILED\tDURATION\tHOST\tRUN ID")
	for _, r := range runs {
		dur := "-"
		if r.FinishedAt != nil {
			dur = r.FinishedAt.Sub(r.StartedAt).Round(time.Millisecond).String()
		}
		mode := r.Mode
		if r.Shard != "" {
			mode += " " + r.Shard
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s:%d\t%s\n",
			r.StartedAt.Format("2006-01-02 15:04:05"), r.Job, mode, r.Status, r.Fetched, r.Inserted, r.Updated, r.Unchanged,
			r.LockContended, r.Invalid, r.Quarantined, r.Failed, dur, r.Host, r.PID, r.RunID)
	}
	tw.Flush()
	if len(runs) == 0 {
		fmt.Fprintln(stdout, noRuns(ctx, st, jobs))
	}
	return nil
}

// showLost sets the status of each running run whose process has not
// beaten for longer than after, by the database's clock, to lost.
func showLost(ctx context.Context, st *store.Store, runs []store.Run, after time.Duration) error {
	if !slices.ContainsFunc(runs, func(r store.Run) bool { return r.Status == store.StatusRunning }) {
		return nil
	}
	now, err := st.Now(ctx)
	if err != nil {
		return dbError(st, err)
	}
	for i := range runs {
		if runs[i].Lost(now, after) {
			runs[i].Status = store.StatusLost
		}
	}
	return nil
}

// noRuns is what runs prints when the jobs it shows have none: which
// other jobs have runs, when some do (a job name of a config file's
// entity, say, while --job is the default).
func noRuns(ctx context.Context, st *store.Store, jobs []string) string {
	all, err := st.Runs(ctx, "", 1000)
	var others []string
	for _, r := range all {
		if err == nil && !slices.Contains(others, r.Job) {
			others = append(others, r.Job)
		}
	}
	if len(others) == 0 || slices.Contains(jobs, "") {
		return "(no runs yet)"
	}
	return fmt.Sprintf("(no runs of job %s yet; jobs with runs: %s; --job, --config or --all-jobs shows them)", strings.Join(jobs, ", "), strings.Join(others, ", "))
}

// sampleRow is one line of a verify or reconcile table: a count, what it
// means, and the first few erp_ids.
type sampleRow struct {
	name string
	s    verify.Sample
	what string
}

// printSamples writes each row's count and meaning, and under it the
// erp_ids the sample kept.
func printSamples(tw io.Writer, rows []sampleRow) {
	for _, c := range rows {
		fmt.Fprintf(tw, "  %s\t%d\t%s\n", c.name, c.s.Count, c.what)
		if len(c.s.IDs) > 0 {
			more := ""
			if c.s.Count > int64(len(c.s.IDs)) {
				more = fmt.Sprintf(" (+%d more)", c.s.Count-int64(len(c.s.IDs)))
			}
			fmt.Fprintf(tw, "\t\te.g. %s%s\n", strings.Join(c.s.IDs, ", "), more)
		}
	}
}
