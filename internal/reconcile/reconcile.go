package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
	"github.com/erpsync/erpsync/internal/verify"
	"github.com/erpsync/erpsync/lock"
)

// Mode is the mode of a reconcile in the run history.
const Mode = "reconcile"

// ErrRefused is returned when the guard refused a reconcile: it would have
// deleted more than MaxDelete allows, or the scan found nothing while the
// table has rows. Nothing was written.
var ErrRefused = errors.New("reconcile: refused by the deletion guard")

// Limit bounds the rows one reconcile may delete: a count, or a
// percentage of the live rows (syncer.Limit).
type Limit = syncer.Limit

// ParseLimit parses "N" (a count) or "P%" (a percentage, 0 to 100).
func ParseLimit(s string) (Limit, error) { return syncer.ParseLimit(s) }

// DefaultLimit is 5% of the live rows: the default of one reconcile.
var DefaultLimit = Limit{Percent: 5, IsPercent: true}

// DefaultTotalLimit is 10% of the rows: the default over DefaultWindow.
var DefaultTotalLimit = Limit{Percent: 10, IsPercent: true}

// DefaultWindow is the rolling window of DefaultTotalLimit: a week, long
// enough that a fault hiding a few percent more of the feed each day is
// refused within days, short enough that last month's confirmed clean-up
// does not hold today's reconcile back.
const DefaultWindow = 7 * 24 * time.Hour

// Config says what a reconcile does. Zero fields take their defaults.
type Config struct {
	// PageSize is the page size of the scan. Defaults to 1000.
	PageSize int
	// Fetchers is how many parts of the feed the scans page at once
	// (verify.ScanParts). Defaults to 1: one pass.
	Fetchers int
	// MaxDelete bounds the rows one reconcile may delete. Defaults to
	// DefaultLimit (5% of the live rows).
	MaxDelete *Limit
	// MaxDeleteTotal bounds the rows the job's reconciles may delete over
	// Window, this one included; a percentage is of the live rows plus
	// those deleted in the window. Deletions of forced reconciles do not
	// count. Defaults to DefaultTotalLimit (10%).
	MaxDeleteTotal *Limit
	// Window is the rolling window of MaxDeleteTotal. Defaults to
	// DefaultWindow (7 days).
	Window time.Duration
	// Force lets a reconcile past the guard (logged at warn level).
	Force bool
	// DryRun computes the plan and changes nothing: no lock, no write, no
	// run history.
	DryRun bool
	// HoldUntil, when later than the end of a reconcile, keeps its job lock
	// until then (lock-at-least-for, as syncer.Config.HoldUntil).
	HoldUntil time.Time
}

// Plan is what a reconcile found to do, with a sample of erp_ids of each
// kind.
type Plan struct {
	FeedRecords int64         `json:"feed_records"`
	Rows        int64         `json:"rows"` // live rows
	MaxDelete   int64         `json:"max_delete"`
	Delete      verify.Sample `json:"delete"`
	Restore     verify.Sample `json:"restore"`
	Repair      verify.Sample `json:"repair"`
	// Kept counts the live rows the scan lacks that were written since
	// the scan began: not deleted, looked at again by the next reconcile.
	Kept int64 `json:"kept"`
	// Reappeared counts the rows to delete that the confirming pass found
	// in the source again: not deleted.
	Reappeared int64 `json:"reappeared"`
	// WindowDeleted counts the rows the job's reconciles deleted within
	// the window before this one (forced ones not counted), and
	// MaxDeleteTotal what the window allows, this reconcile included.
	WindowDeleted  int64 `json:"window_deleted"`
	MaxDeleteTotal int64 `json:"max_delete_total"`
}

// Report is a reconcile's run history row plus what only the report
// carries.
type Report struct {
	store.Run
	// Plan is what the comparison found, before any write.
	Plan *Plan `json:"plan,omitempty"`
	// Refused says why the guard refused the reconcile, if it did.
	Refused string `json:"refused,omitempty"`
	// Forced says the guard would have refused, and Force overrode it.
	Forced string `json:"forced,omitempty"`
	// DryRun says nothing was changed.
	DryRun bool `json:"dry_run,omitempty"`
	// FailedIDs lists (up to 1,000) erp_ids whose repair failed.
	FailedIDs []string `json:"failed_ids,omitempty"`
}

// Reconciler runs reconciles of one job.
type Reconciler struct {
	cfg   Config
	sy    *syncer.Syncer
	src   syncer.Source
	store *store.Store
	log   zerolog.Logger
	// afterScan, beforeWrite and beforeConfirm, when set (by tests), run
	// after the scan, after the comparison (before the first write), and
	// before the confirming pass.
	afterScan, beforeWrite, beforeConfirm func()
}

// New returns a Reconciler that writes through sy (its job, locks, lock
// TTL, workers and chunks) and reads the feed from src.
func New(cfg Config, sy *syncer.Syncer, src syncer.Source, st *store.Store, log zerolog.Logger) (*Reconciler, error) {
	if cfg.Fetchers == 0 {
		cfg.Fetchers = 1
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = 1000
	}
	if cfg.PageSize < 1 || cfg.PageSize > 1000 {
		return nil, fmt.Errorf("reconcile: page size %d: want 1..1000", cfg.PageSize)
	}
	if cfg.MaxDelete == nil {
		l := DefaultLimit
		cfg.MaxDelete = &l
	}
	if cfg.MaxDeleteTotal == nil {
		l := DefaultTotalLimit
		cfg.MaxDeleteTotal = &l
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Window < 0 {
		return nil, fmt.Errorf("reconcile: window %s: want a positive duration", cfg.Window)
	}
	return &Reconciler{cfg: cfg, sy: sy, src: src, store: st, log: log}, nil
}

// JobLockKey is the lock key of the reconcile of job: its own, so that a
// reconcile and the job's incremental runs go on side by side.
func JobLockKey(job string) string { return syncer.JobLockKey(Mode + ":" + job) }

// Run runs one reconcile. It returns the report even with an error, except
// for errors before anything started. ErrRefused (wrapped) says the guard
// refused; a reconcile whose job lock is held elsewhere is skipped (status
// skipped, nil error).
func (rc *Reconciler) Run(ctx context.Context) (*Report, error) {
	scfg := rc.sy.Config()
	start := time.Now()
	rep := &Report{Run: store.Run{
		RunID: syncer.NewRunID(start), Job: scfg.Job, Mode: Mode, Status: store.StatusRunning,
		Host: scfg.Host, PID: scfg.PID, StartedAt: start.UTC(),
	}, DryRun: rc.cfg.DryRun}
	log := rc.log.With().Str("run_id", rep.RunID).Str("job", scfg.Job).Str("mode", Mode).Logger()
	if rc.cfg.DryRun {
		err := rc.reconcile(ctx, rep, &progress{src: rc.src}, log)
		rep.Status = store.StatusSucceeded
		if err != nil {
			rep.Status = store.StatusFailed
		}
		fin := time.Now().UTC()
		rep.FinishedAt = &fin
		return rep, err
	}

	fence, workCtx, done, err := rc.sy.HoldJob(ctx, JobLockKey(scfg.Job), rc.cfg.HoldUntil, log)
	if errors.Is(err, lock.ErrNotObtained) {
		log.Warn().Msg("reconcile lock held by another instance; reconcile skipped")
		rc.finish(ctx, rep, store.StatusSkipped, nil, log)
		return rep, nil
	}
	if err != nil {
		err = fmt.Errorf("take reconcile lock: %w", err)
		rc.finish(ctx, rep, store.StatusFailed, err, log)
		return rep, err
	}
	defer done()
	rep.Fence = fence
	if err := rc.store.StartRun(ctx, &rep.Run); err != nil {
		return rep, err
	}
	lv := &progress{src: rc.src}
	stopBeat := rc.store.Beat(ctx, rep.RunID, rc.sy.Config().HeartbeatEvery, lv.snapshot, func(err error) {
		log.Warn().Err(err).Msg("heartbeat not written; the reconcile goes on")
	})
	log.Info().Int64("fence_token", rep.Fence).Msg("reconcile started")

	err = rc.reconcile(workCtx, rep, lv, log)
	status := store.StatusSucceeded
	switch {
	case err == nil && rep.Failed > 0:
		status = store.StatusFailed
		err = fmt.Errorf("%d records failed after their retries (failed_ids in the report)", rep.Failed)
	case err != nil && ctx.Err() != nil:
		status = store.StatusInterrupted
	case err != nil && workCtx.Err() != nil:
		status = store.StatusFailed
		err = fmt.Errorf("reconcile lock: %w", context.Cause(workCtx))
	case err != nil:
		status = store.StatusFailed
	}
	stopBeat()
	rc.finish(ctx, rep, status, err, log)
	return rep, err
}

// reconcile scans, compares, applies the guard and, unless it refuses or
// this is a dry run, repairs and deletes; lv follows its steps for the
// heartbeat.
func (rc *Reconciler) reconcile(ctx context.Context, rep *Report, lv *progress, log zerolog.Logger) error {
	before := rc.src.Stats()
	defer func() {
		after := rc.src.Stats()
		rep.ERPRequests += after.Requests - before.Requests
		rep.ERPRetries += after.Retries - before.Retries
	}()
	// The scan is no snapshot: a record recreated after the scan passed
	// its place, and written by a run before the comparison reads its
	// row, is absent from the scan and present in the table. A row
	// written since the scan began is therefore never a deletion: the
	// next reconcile looks at it again.
	scanStart, err := rc.store.Now(ctx)
	if err != nil {
		return err
	}
	// The table is read while the feed is paged; the rows found different
	// are read again after (CompareSnapshot), so a row written during the
	// scan is judged as it is then, written since the scan began.
	feed, snap, err := verify.ScanReading(ctx, lv.counting(), rc.store, rc.cfg.PageSize, rc.cfg.Fetchers, true)
	if err != nil {
		return err
	}
	if rc.afterScan != nil {
		rc.afterScan()
	}
	res, diff, err := feed.CompareSnapshot(ctx, rc.store, snap)
	if err != nil {
		return err
	}
	rep.Fetched = res.Fetched()
	lv.stepDone(rep)
	windowDeleted, err := rc.store.ReconcileDeletedSince(ctx, rc.sy.Config().Job, Mode, scanStart.Add(-rc.cfg.Window))
	if err != nil {
		return err
	}
	plan := &Plan{FeedRecords: res.FeedRecords, Rows: res.Rows, MaxDelete: rc.cfg.MaxDelete.Of(res.Rows),
		WindowDeleted: windowDeleted, MaxDeleteTotal: rc.cfg.MaxDeleteTotal.Of(res.Rows + windowDeleted)}
	absent := diff.Absent[:0]
	for _, r := range diff.Absent {
		if !r.Written.Before(scanStart) {
			plan.Kept++
			continue
		}
		absent = append(absent, r)
		plan.Delete.Add(r.ErpID)
	}
	for _, r := range diff.Restore {
		plan.Restore.Add(r.ErpID)
	}
	for _, recs := range [][]erp.Record{diff.Missing, diff.Stale, diff.Repair} {
		for _, r := range recs {
			plan.Repair.Add(r.ErpID)
		}
	}
	rep.Plan = plan

	if why := rc.guard(res, plan); why != "" {
		if !rc.cfg.Force {
			rep.Refused = why
			return fmt.Errorf("%w: %s", ErrRefused, why)
		}
		rep.Forced = why
		rep.Run.Forced = true
		log.Warn().Str("guard", why).Msg("deletion guard overridden by --force")
	}
	if rc.cfg.DryRun {
		return nil
	}
	if rc.beforeWrite != nil {
		rc.beforeWrite()
	}

	repair := make([]erp.Record, 0, len(diff.Missing)+len(diff.Restore)+len(diff.Stale))
	repair = append(append(append(repair, diff.Missing...), diff.Restore...), diff.Stale...)
	if err := rc.apply(ctx, repair, rep, lv, log); err != nil {
		return err
	}
	if len(diff.Repair) > 0 {
		l, err := rc.sy.Repair(ctx, diff.Repair, rep.RunID, log)
		rep.Updated += l.Updated
		rep.Repaired += l.Updated
		rep.Unchanged += l.Unchanged
		rep.LockContended += l.LockContended
		lv.stepDone(rep)
		if err != nil {
			return err
		}
	}
	// Every invalid copy of the scan, not only those of rows the
	// comparison found unmarked: a row the repairs just wrote from an
	// older valid copy is marked too (Quarantine reads the rows), and a
	// run that makes a record's row later, from an older valid copy it
	// fetched before, finds the copy stored and marks its row.
	invs := feed.Invalid()
	q, err := rc.sy.Quarantine(ctx, rep.RunID, invs, log)
	rep.Quarantined = q
	if err != nil {
		return err
	}
	rep.Invalid = int64(len(invs))
	lv.stepDone(rep)
	if len(absent) == 0 {
		return nil
	}

	// A record the scan lacked may have been back before the comparison:
	// hidden for a moment by the ERP and restored as it was, same version
	// and same updated_at, which no run serves again (it is behind their
	// checkpoint) and the kept-rule cannot see (nobody wrote its row).
	// So a row is deleted only when a second pass, made after the
	// comparison and the repairs, lacks its record too.
	if rc.beforeConfirm != nil {
		rc.beforeConfirm()
	}
	again, err := verify.ScanNewer(ctx, rc.src, rc.store.Dialect(), rc.cfg.PageSize, rc.cfg.Fetchers, feed)
	if err != nil {
		return fmt.Errorf("confirm the deletions: %w", err)
	}
	// The second pass is served what changed in the ERP since the scan:
	// versions newer than the scan's, and records it lacked. A reconcile
	// writes every version it was served, as a run does; the writes are
	// guarded as the repairs are, so a row written since by a newer
	// version keeps it.
	if newer := again.Kept(); len(newer) > 0 {
		if err := rc.apply(ctx, newer, rep, lv, log); err != nil {
			return err
		}
	}
	gone := absent[:0]
	for _, r := range absent {
		if again.Has(r.ErpID) || again.Quarantined(r.ErpID) {
			plan.Reappeared++
			continue
		}
		gone = append(gone, r)
	}
	if plan.Reappeared > 0 {
		log.Info().Int64("reappeared", plan.Reappeared).Msg("records the scan lacked are in the source again: kept live")
	}
	ts := make([]store.Tombstone, len(gone))
	for i, r := range gone {
		ts[i] = store.Tombstone{ErpID: r.ErpID, Version: r.Version, RunID: rep.RunID}
	}
	d, err := rc.sy.SoftDelete(ctx, ts, log)
	rep.Deleted = d.Deleted
	rep.LockContended += d.LockContended
	if d.Kept > 0 {
		log.Info().Int64("kept", d.Kept).Msg("rows written or locked since the comparison kept live; the next reconcile looks again")
	}
	return err
}

// apply writes recs through the runs' path and adds what it did to rep;
// the error is the one that stopped the writes, or the context's.
func (rc *Reconciler) apply(ctx context.Context, recs []erp.Record, rep *Report, lv *progress, log zerolog.Logger) error {
	a := rc.sy.Apply(ctx, recs, log)
	rep.addApplied(a)
	lv.stepDone(rep)
	if a.Err != nil {
		return a.Err
	}
	return ctx.Err()
}

// addApplied adds what a write of records did to the report's counters:
// the rows inserted and updated are repaired.
func (rep *Report) addApplied(a syncer.Applied) {
	rep.Inserted += a.Inserted
	rep.Updated += a.Updated
	rep.Restored += a.Restored
	rep.Unchanged += a.Unchanged
	rep.Repaired += a.Inserted + a.Updated
	rep.LockContended += a.LockContended
	rep.StaleRejected += a.StaleRejected
	rep.UniqueViolations += a.UniqueViolations
	rep.Failed += a.Failed
	rep.FailedIDs = append(rep.FailedIDs, a.FailedIDs...)
}

// progress is what a reconcile's heartbeat writes to its row while it
// runs (store.Beat): while the scan pages the feed, the records and
// invalid items it has been served so far as fetched (a record served
// twice counts twice); after that the report's counters as of the last
// step done (the comparison, the repairs, the quarantine). The
// reconcile's goroutine writes the report, the heartbeat's reads a copy.
type progress struct {
	src    syncer.Source
	read   atomic.Int64
	mu     sync.Mutex
	done   store.Counters // the report's, at the last stepDone
	doneOK bool
}

// counting returns src, adding every page's records and invalid items to
// the records read. It keeps src's count (syncer.Counter) when src has
// one: the scan plans its parts by it, and without it cuts the feed's
// time into even parts, many more pages for a small feed.
func (p *progress) counting() verify.Pager {
	cp := countingPager{p.src, &p.read}
	if c, ok := p.src.(syncer.Counter); ok {
		return countingCounter{cp, c}
	}
	return cp
}

// stepDone takes the counters of rep, whose step has ended.
func (p *progress) stepDone(rep *Report) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done, p.doneOK = rep.Counters, true
}

// snapshot returns the counters the heartbeat writes.
func (p *progress) snapshot() store.Counters {
	p.mu.Lock()
	c, ok := p.done, p.doneOK
	p.mu.Unlock()
	if !ok {
		c.Fetched = p.read.Load()
	}
	return c
}

// countingPager is a Pager that adds the records and invalid items of each
// page it returns to n.
type countingPager struct {
	verify.Pager
	n *atomic.Int64
}

func (c countingPager) Page(ctx context.Context, q erp.Query) (*erp.Page, error) {
	p, err := c.Pager.Page(ctx, q)
	if p != nil {
		c.n.Add(int64(len(p.Records) + len(p.Invalid)))
	}
	return p, err
}

// countingCounter is a countingPager of a source that counts.
type countingCounter struct {
	countingPager
	syncer.Counter
}

// guard says why the plan must not be applied, or "" when it may.
func (rc *Reconciler) guard(res *verify.Result, plan *Plan) string {
	n := plan.Delete.Count
	switch {
	case res.FeedRecords == 0 && res.Rows > 0:
		return fmt.Sprintf("the scan of the ERP returned no record while the table has %d live rows: would delete all %d", res.Rows, n)
	case n > plan.MaxDelete:
		pct := 100 * float64(n) / float64(max(res.Rows, 1))
		return fmt.Sprintf("would delete %d of %d live rows (%.1f%%), above --max-delete %s (%d rows)", n, res.Rows, pct, rc.cfg.MaxDelete, plan.MaxDelete)
	case n > 0 && plan.WindowDeleted+n > plan.MaxDeleteTotal:
		total, base := plan.WindowDeleted+n, res.Rows+plan.WindowDeleted
		pct := 100 * float64(total) / float64(max(base, 1))
		return fmt.Sprintf("would delete %d rows after %d deleted by the reconciles of the last %s: %d of %d rows (%.1f%%), above --max-delete-total %s (%d rows)",
			n, plan.WindowDeleted, rc.cfg.Window, total, base, pct, rc.cfg.MaxDeleteTotal, plan.MaxDeleteTotal)
	}
	return ""
}

// finish records the reconcile in the history and logs its summary line.
func (rc *Reconciler) finish(ctx context.Context, rep *Report, status string, err error, log zerolog.Logger) {
	now := time.Now()
	rep.Status = status
	fin := now.UTC()
	rep.FinishedAt = &fin
	if err != nil {
		msg := err.Error()
		rep.Error = &msg
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var serr error
	if status == store.StatusSkipped {
		serr = rc.store.StartRun(dctx, &rep.Run)
	} else {
		serr = rc.store.FinishRun(dctx, &rep.Run)
	}
	if serr != nil {
		log.Error().Err(serr).Msg("record run history")
	}
	if status == store.StatusSkipped {
		return
	}
	ev := log.Info()
	if status == store.StatusFailed {
		ev = log.Error().AnErr("error", err)
	}
	if rep.Refused != "" {
		ev = ev.Str("refused", rep.Refused)
	}
	ev.Str("status", status).Int64("fetched", rep.Fetched).
		Int64("deleted", rep.Deleted).Int64("restored", rep.Restored).Int64("repaired", rep.Repaired).
		Int64("invalid", rep.Invalid).Int64("quarantined", rep.Quarantined).
		Int64("lock_contended", rep.LockContended).Int64("failed", rep.Failed).
		Int64("erp_requests", rep.ERPRequests).Dur("duration", now.Sub(rep.StartedAt)).
		Msg("reconcile summary")
}
