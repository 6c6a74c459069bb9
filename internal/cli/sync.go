package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
)

func isUnavailable(err error) bool { return errors.Is(err, store.ErrUnavailable) }

// parseShard parses "i/n".
func parseShard(v string) (i, n int, err error) {
	if v == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(v, "/")
	if ok {
		i, err = strconv.Atoi(a)
		if err == nil {
			n, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, fmt.Errorf("--shard %q: want i/n with 0 <= i < n", v)
	}
	return i, n, nil
}

func parseTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("--%s %q: want RFC 3339, like 2025-01-31T00:00:00Z", name, v)
	}
	return t.UTC(), nil
}

// checkWindow refuses a backfill window that starts after now (a
// mistyped year): it cannot hold a record. (One that ends before it starts
// is syncer.Config's to refuse.)
func checkWindow(since, now time.Time) error {
	if since.After(now) {
		return fmt.Errorf("--since %s is in the future (now %s): the window holds no record yet", since.Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339))
	}
	return nil
}

// cmdSync is `run` and `backfill`.
func cmdSync(ctx context.Context, mode string, args []string, stdout, stderr io.Writer) error {
	var s settings
	var sinceS, untilS, shardS string
	fs := newFlagSet("erpsync "+mode, stderr)
	s.connFlags(fs)
	s.syncFlags(fs)
	if mode == syncer.ModeBackfill {
		fs.StringVar(&sinceS, "since", "", "window start, inclusive (RFC 3339); required")
		fs.StringVar(&untilS, "until", "", "window end, exclusive (RFC 3339); default: open")
		fs.StringVar(&shardS, "shard", "", "i/n: only the erp_ids that hash to shard i of n")
	}
	if err := s.parseEntities(fs, args); err != nil {
		return err
	}
	log, err := newLogger(&s, stderr)
	if err != nil {
		return err
	}
	cfg := s.syncConfig(mode)
	if mode == syncer.ModeBackfill {
		if cfg.Since, err = parseTime("since", sinceS); err != nil {
			return usageError{err}
		}
		if sinceS == "" {
			return usageError{errors.New("backfill needs --since (RFC 3339)")}
		}
		if cfg.Until, err = parseTime("until", untilS); err != nil {
			return usageError{err}
		}
		if err := checkWindow(cfg.Since, time.Now()); err != nil {
			return usageError{err}
		}
		if shardS == "" {
			// A Kubernetes Indexed Job: pod i of ERPSYNC_SHARDS.
			idx, n := os.Getenv("JOB_COMPLETION_INDEX"), os.Getenv("ERPSYNC_SHARDS")
			if idx != "" && n != "" {
				shardS = idx + "/" + n
			}
		}
		if cfg.Shard, cfg.Shards, err = parseShard(shardS); err != nil {
			return usageError{err}
		}
	}
	if err := checkRun(&s, cfg, log); err != nil {
		return err
	}
	ctx, d, done, err := open(ctx, &s, true, nil, log)
	if err != nil {
		return err
	}
	defer done()
	// Each target in turn (every entity of --config, each source of one):
	// one that fails does not keep the others from running.
	var reports []*syncer.Report
	var firstErr error
	for _, t := range d.targets {
		if ctx.Err() != nil {
			break
		}
		tcfg := cfg
		tcfg.Job, tcfg.Entity = t.job, t.ent.Name
		stopProgress := progress(ctx, &tcfg, t.erp, s.live, log)
		sy, err := syncer.New(tcfg, t.erp, t.st, d.locks, log)
		if err != nil {
			return usageError{err}
		}
		rep, runErr := sy.Run(ctx)
		stopProgress(rep)
		if rep != nil {
			reports = append(reports, rep)
		}
		switch {
		case errors.Is(runErr, syncer.ErrFirstPageInvalid):
			runErr = usageError{targetError(&s, t, runErr)} // exit 2, one line
		case runErr != nil:
			runErr = runFailed(mode, &s, targetError(&s, t, runErr))
		}
		if firstErr == nil {
			firstErr = runErr
		}
	}
	firstErr = interrupted(ctx, firstErr, resumeLine(mode, reports))
	return saveReports(log, s.Report, reports, firstErr)
}

// resumeLine says what the interrupted runs of a run or backfill did and
// how to resume them.
func resumeLine(mode string, reports []*syncer.Report) string {
	var written int64
	var at string
	for _, r := range reports {
		written += r.Handled()
		if r.Checkpoint != nil {
			at = r.Checkpoint.UTC().Format(time.RFC3339Nano)
		}
	}
	if mode == syncer.ModeBackfill {
		if at == "" {
			return fmt.Sprintf("%d records done; no checkpoint yet: run the same command again to start the window over", written)
		}
		return fmt.Sprintf("%d records done, the window's checkpoint is at %s; run the same command again to resume from there", written, at)
	}
	if at == "" {
		return fmt.Sprintf("%d records done; the next run starts from the job's last checkpoint", written)
	}
	return fmt.Sprintf("%d records done, the job's checkpoint is at %s; the next run continues from there", written, at)
}

// targetError names t's entity (and its job, for one source of several)
// in err, when a config file gave the targets.
func targetError(s *settings, t *target, err error) error {
	if s.ConfigFile == "" {
		return err
	}
	return fmt.Errorf("entity %s (job %s): %w", t.ent.Name, t.job, err)
}

// saveReports writes the reports of a command's runs to path (--report):
// the report itself for one run, a JSON array of them for several.
func saveReports[R any](log zerolog.Logger, path string, reps []R, runErr error) error {
	if len(reps) == 1 {
		return saveReport(log, path, reps[0], runErr)
	}
	if len(reps) == 0 {
		return runErr
	}
	return saveReport(log, path, reps, runErr)
}

// runFailed is the plain line of a run, backfill or reconcile that ended
// failed (exit 1), beside its JSON summary line: what happened and, for
// the failures a setting can cause, what to do.
func runFailed(what string, s *settings, err error) error {
	hint := ""
	switch {
	case errors.Is(err, syncer.ErrTooManyInvalid):
		hint = " (fix --erp-map or --erp-status-map, or the records in the ERP; when such items are expected, raise --max-invalid)"
	case errors.Is(err, erp.ErrLoop) && s.ERP.Kind == kindREST:
		hint = "; if the ERP pages right, --erp-cursor-path may name the wrong field"
	}
	return fmt.Errorf("%s failed: %v%s", what, err, hint)
}
