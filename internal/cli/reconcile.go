package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/odata"
	"github.com/erpsync/erpsync/internal/reconcile"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
)

// reconcileSettings are the settings of reconcile (the command, and the
// reconciles of schedule).
type reconcileSettings struct {
	MaxDelete      string
	MaxDeleteTotal string
	Window         time.Duration
	Force          bool
	DryRun         bool
	limit, total   reconcile.Limit
}

// guardFlags: the deletion guard's limit.
func (r *reconcileSettings) guardFlags(fs *flag.FlagSet) {
	fs.StringVar(&r.MaxDelete, "max-delete", "5%", "most rows one reconcile may soft-delete: a count N, or P% of the live rows; more refuses the reconcile (exit 1)")
	fs.StringVar(&r.MaxDeleteTotal, "max-delete-total", reconcile.DefaultTotalLimit.String(), "most rows the job's reconciles may soft-delete over --max-delete-window, this one included: a count N, or P% of the live rows plus those deleted in the window; forced reconciles do not count")
	durationVar(fs, &r.Window, "max-delete-window", reconcile.DefaultWindow, time.Millisecond, "", "the rolling window of --max-delete-total")
}

// check parses the limit; a bad one is a usage error.
func (r *reconcileSettings) check() error {
	l, err := reconcile.ParseLimit(r.MaxDelete)
	if err != nil {
		return usageError{fmt.Errorf("--max-delete %w", err)}
	}
	r.limit = l
	if r.total, err = reconcile.ParseLimit(r.MaxDeleteTotal); err != nil {
		return usageError{fmt.Errorf("--max-delete-total %w", err)}
	}
	return nil
}

func (r *reconcileSettings) config() reconcile.Config {
	l, t := r.limit, r.total
	return reconcile.Config{MaxDelete: &l, MaxDeleteTotal: &t, Window: r.Window, Force: r.Force, DryRun: r.DryRun}
}

// newReconciler wires a reconciler of target t onto d, with cfg's
// settings under t's job.
func newReconciler(rcfg reconcile.Config, cfg syncer.Config, d *deps, t *target, log zerolog.Logger) (*reconcile.Reconciler, error) {
	cfg.Job, cfg.Entity = t.job, t.ent.Name
	sy, err := syncer.New(cfg, t.erp, t.st, d.locks, log)
	if err != nil {
		return nil, err
	}
	return reconcile.New(rcfg, sy, t.erp, t.st, log)
}

// scanNeverSkips refuses a reconcile over paging that can skip a record:
// offset-based paging skips one whenever an earlier record changes during
// the scan, and reconcile would soft-delete the live row of the record it
// did not see.
func scanNeverSkips(s *settings) error {
	switch {
	case s.ERP.Kind == kindOData && s.ERP.Paging == odata.PagingServer:
		return usageError{errors.New("--erp-paging server: reconcile needs paging that cannot skip a record (a server's offset-based next links skip one whenever an earlier record changes during the scan, and reconcile would soft-delete its row); give reconcile --erp-paging keyset")}
	case s.ERP.Kind == kindREST && s.REST.Paging == erp.PagingOffset.String():
		return usageError{errors.New("--erp-rest-paging offset: reconcile needs paging that cannot skip a record (offset paging skips one whenever an earlier record changes during the scan, and reconcile would soft-delete its row); use cursor paging")}
	}
	return nil
}

func cmdReconcile(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var s settings
	var r reconcileSettings
	fs := newFlagSet("erpsync reconcile", stderr)
	s.connFlags(fs)
	s.syncFlags(fs)
	r.guardFlags(fs)
	fs.BoolVar(&r.DryRun, "dry-run", false, "print what would change (counts and a sample of erp_ids) and change nothing")
	fs.BoolVar(&r.Force, "force", false, "go past the deletion guard (logged at warn level)")
	if err := s.parseEntities(fs, args); err != nil {
		return err
	}
	log, err := newLogger(&s, stderr)
	if err != nil {
		return err
	}
	if err := r.check(); err != nil {
		return err
	}
	if err := scanNeverSkips(&s); err != nil {
		return err
	}
	if r.DryRun {
		if s.TakeTable {
			return usageError{errors.New("--take-table with --dry-run: a dry run changes nothing; take the table with a command that writes")}
		}
		s.ownership = checksOwner
	}
	cfg := s.syncConfig(syncer.ModeRun)
	if err := checkRun(&s, cfg, log); err != nil {
		return err
	}
	rcfg := r.config()
	rcfg.PageSize = s.PageSize
	rcfg.Fetchers = s.Fetchers
	ctx, d, done, err := open(ctx, &s, true, nil, log)
	if err != nil {
		return err
	}
	defer done()
	var reports []*reconcile.Report
	var firstErr error
	for _, t := range d.targets {
		if ctx.Err() != nil {
			break
		}
		rc, err := newReconciler(rcfg, cfg, d, t, log)
		if err != nil {
			return usageError{err}
		}
		rep, runErr := rc.Run(ctx)
		if rep != nil {
			if r.DryRun && rep.Plan != nil {
				if s.ConfigFile != "" {
					fmt.Fprintf(stdout, "entity %s (job %s, table %s):\n", t.ent.Name, t.job, t.table.Name())
				}
				printPlan(stdout, rep)
			}
			reports = append(reports, rep)
		}
		if runErr != nil {
			runErr = targetError(&s, t, runErr)
		}
		switch {
		case runErr == nil:
		case errors.Is(runErr, reconcile.ErrRefused) && r.DryRun:
			runErr = errFailed // the plan says why
		case errors.Is(runErr, reconcile.ErrRefused):
			// One line that says how many and why: exit 1.
			runErr = fmt.Errorf("%v; nothing changed (--dry-run lists them, --force goes past the guard)", runErr)
		case rep != nil && rep.Status == store.StatusInterrupted:
			runErr = nil // a signal's doing: interrupted below says so, exit 130 or 143
		case rep != nil && rep.FinishedAt != nil && !r.DryRun:
			runErr = runFailed("reconcile", &s, runErr)
		}
		if firstErr == nil {
			firstErr = runErr
		}
	}
	firstErr = interrupted(ctx, firstErr, "what reconcile changed stays; run it again to finish (it scans the source again)")
	return saveReports(log, s.Report, reports, firstErr)
}

// printPlan prints a reconcile's plan, for --dry-run.
func printPlan(w io.Writer, rep *reconcile.Report) {
	p := rep.Plan
	switch {
	case rep.Refused != "":
		fmt.Fprintf(w, "DRY RUN, nothing changed. The guard would REFUSE this reconcile: %s\n", rep.Refused)
	case rep.Forced != "":
		fmt.Fprintf(w, "DRY RUN, nothing changed. The guard would refuse, --force would go past it: %s\n", rep.Forced)
	default:
		fmt.Fprintln(w, "DRY RUN, nothing changed. The guard would let this reconcile through.")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  feed records\t%d\n", p.FeedRecords)
	fmt.Fprintf(tw, "  live rows\t%d\n", p.Rows)
	fmt.Fprintf(tw, "  max delete\t%d\n", p.MaxDelete)
	fmt.Fprintf(tw, "  window\t%d\tdeleted by the reconciles of the window; it allows %d with this one\n", p.WindowDeleted, p.MaxDeleteTotal)
	printSamples(tw, []sampleRow{
		{"delete", p.Delete, "live rows the feed no longer has: would be soft-deleted"},
		{"restore", p.Restore, "soft-deleted rows the feed has again: would be restored"},
		{"repair", p.Repair, "rows missing or stale: would be written"},
	})
	if p.Kept > 0 {
		fmt.Fprintf(tw, "  kept\t%d\tlive rows the feed lacks but written since the scan began: left for the next reconcile\n", p.Kept)
	}
	tw.Flush()
}
