package syncer

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/semaphore"

	"github.com/erpsync/erpsync/internal/ctxtime"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/lock"
)

// Syncer runs the sync job. One Syncer may run many times, one run at a time
// or several at once.
type Syncer struct {
	cfg   Config
	erp   Source
	store *store.Store
	locks Locker
	log   zerolog.Logger
	hooks faultHooks
}

// Source is what the syncer needs of an ERP feed: pages of records in a
// window of updated_at, each after the position (the cursor) of the one
// before, and the count of requests it made. The REST client of the ERP API
// (*erp.Client) and the OData v4 source provide it.
type Source interface {
	Page(ctx context.Context, q erp.Query) (*erp.Page, error)
	Stats() erp.Stats
}

// Locker is what the syncer needs of a lock service. A *lock.Client (one
// Redis, or a Redis Cluster) and a *lock.Redlock (a quorum of masters) both
// provide it. When it also has ObtainMany and ReleaseMany (both do), a
// chunk's locks are taken and released in one round trip each (to every
// node at once, for a Redlock); otherwise one by one.
type Locker interface {
	Obtain(ctx context.Context, key string, ttl time.Duration, opt *lock.ObtainOptions) (*lock.Lock, error)
}

type batchLocker interface {
	ObtainMany(ctx context.Context, keys []string, ttl time.Duration) ([]*lock.Lock, error)
	ReleaseMany(ctx context.Context, locks []*lock.Lock) (notHeld int, err error)
}

// faultHooks let in-package tests inject faults at points no outside means
// can reach deterministically. All nil in production.
type faultHooks struct {
	// beforeInsert runs between reading the rows and inserting the absent
	// ones: a test writes a row there to race the UNIQUE index. Chunks then
	// always read first, so that the window it races exists.
	beforeInsert func(ctx context.Context, rows []store.Row)
	// readLocked is called for each read of versions under the locks.
	readLocked func()
	// refused is called for each insert-first the UNIQUE index refused.
	refused func()
	// failWrite makes the write of an erp_id fail with the returned error.
	failWrite func(erpID string) error
	// preRead is called for each read of versions before the locks.
	preRead func()
}

// New checks cfg, fills its defaults and returns a Syncer.
func New(cfg Config, e Source, st *store.Store, locks Locker, log zerolog.Logger) (*Syncer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("syncer config: %w", err)
	}
	if cfg.Host == "" {
		cfg.Host, _ = os.Hostname()
	}
	if cfg.PID == 0 {
		cfg.PID = os.Getpid()
	}
	return &Syncer{cfg: cfg, erp: e, store: st, locks: locks, log: log}, nil
}

// Config returns the configuration with its defaults filled in.
func (s *Syncer) Config() Config { return s.cfg }

// NewRunID returns a run id that sorts by start time.
func NewRunID(now time.Time) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102T150405.000Z") + "-" + hex.EncodeToString(b[:])
}

// JobLockKey is the Redis lock key of a job.
func JobLockKey(job string) string { return "job:" + job }

// RecordLockKey is the Redis lock key of one membership, shared by every
// job and mode that writes it.
func RecordLockKey(erpID string) string { return "rec:" + erpID }

// EntityLockKey is the Redis lock key of the record of an entity with the
// given key text: RecordLockKey for the memberships entity (so that an
// instance on the built-in entity and one on a config file that declares
// it share their locks), else "rec:<entity>:<key>". An entity's name has
// no colon and an erp_id neither, so two entities never share a key.
func EntityLockKey(entity, key string) string {
	if entity == "" || entity == MembershipsEntity {
		return RecordLockKey(key)
	}
	return "rec:" + entity + ":" + key
}

// MembershipsEntity is the name of the built-in entity.
const MembershipsEntity = "memberships"

// lockKey is the lock key of the record with the given key text.
func (s *Syncer) lockKey(key string) string { return EntityLockKey(s.cfg.Entity, key) }

// ResumeMargin is how far before its checkpoint an unfinished backfill
// resumes.
const ResumeMargin = time.Millisecond

// ErrMaxDuration ends a run that outlived Config.MaxDuration.
var ErrMaxDuration = errors.New("run reached its max duration")

// ErrFirstPageInvalid stops a run whose first page holds only invalid
// items, more than Config.MaxInvalid allows of them, before it writes
// anything.
var ErrFirstPageInvalid = errors.New("every item of the ERP's first page is invalid")

// ErrTooManyInvalid fails a run whose invalid items exceed
// Config.MaxInvalid: a misconfigured map or a broken feed is not a
// healthy sync, though every valid record was written.
var ErrTooManyInvalid = errors.New("too many invalid records")

// Run executes one run: in ModeRun it takes the job lock (or reports
// skipped) and resumes from the checkpoint; in ModeBackfill it syncs its
// window. The report is returned even when err is not nil, except for errors
// before anything started.
func (s *Syncer) Run(ctx context.Context) (*Report, error) {
	start := time.Now()
	rep := &Report{Run: store.Run{
		RunID:     NewRunID(start),
		Job:       s.cfg.Job,
		Mode:      s.cfg.Mode,
		Status:    store.StatusRunning,
		Host:      s.cfg.Host,
		PID:       s.cfg.PID,
		StartedAt: start.UTC(),
	}, Entity: s.cfg.Entity}
	if s.cfg.Shards > 1 {
		rep.Shard = fmt.Sprintf("%d/%d", s.cfg.Shard, s.cfg.Shards)
	}
	log := s.log.With().Str("run_id", rep.RunID).Str("job", s.cfg.Job).Str("entity", s.cfg.Entity).Str("mode", s.cfg.Mode).Logger()
	r := s.newRun(rep, log)

	var since, until time.Time
	workCtx := ctx
	if s.cfg.Mode == ModeRun {
		fence, jobCtx, done, err := s.HoldJob(ctx, JobLockKey(s.cfg.Job), s.cfg.HoldUntil, log)
		if errors.Is(err, lock.ErrNotObtained) {
			r.finish(ctx, store.StatusSkipped, nil)
			log.Warn().Msg("job lock held by another instance; run skipped")
			return rep, nil
		}
		if err != nil {
			err = fmt.Errorf("take job lock: %w", err)
			r.finish(ctx, store.StatusFailed, err)
			return rep, err
		}
		defer done()
		rep.Fence = fence
		// The watchdog renews the job lock until the run has finished,
		// the grace period after a signal included: a second run must not
		// start while this one still writes the records in hand.
		workCtx = jobCtx
		cp, ok, err := s.store.Checkpoint(ctx, s.cfg.Job)
		if err != nil {
			r.finish(ctx, store.StatusFailed, err)
			return rep, err
		}
		if ok {
			since = cp.Position.Add(-s.cfg.Overlap)
			r.checkpoint = cp.Position
		}
	} else {
		since, until = s.cfg.Since, s.cfg.Until
		r.cpName = BackfillCheckpointName(s.cfg)
		cp, ok, err := s.store.Checkpoint(ctx, r.cpName)
		if err != nil {
			r.finish(ctx, store.StatusFailed, err)
			return rep, err
		}
		if resume := cp.Position.Add(-ResumeMargin); ok && resume.After(since) {
			// Resume a backfill of the same window that did not finish, a
			// millisecond early: a record of the checkpoint's own
			// millisecond is read again rather than skipped, whether the
			// server truncated or rounded the position it stored.
			since = resume
			r.checkpoint = cp.Position
			rep.ResumedFrom = &resume
		}
		if !since.IsZero() {
			t := since.UTC()
			rep.WindowSince = &t
		}
		if !until.IsZero() {
			t := until.UTC()
			rep.WindowUntil = &t
		}
	}
	if err := s.store.StartRun(ctx, &rep.Run); err != nil {
		return rep, err
	}
	r.stopBeat = s.store.Beat(ctx, rep.RunID, s.cfg.HeartbeatEvery, r.c.snapshot, func(err error) {
		r.log.Warn().Err(err).Msg("heartbeat not written; the run goes on")
	})
	ev := log.Info()
	if !since.IsZero() {
		ev = ev.Time("since", since)
	}
	if !until.IsZero() { // an open window has no end to show
		ev = ev.Time("until", until)
	}
	ev.Int64("fence_token", rep.Fence).Msg("run started")

	execCtx := workCtx
	if s.cfg.MaxDuration > 0 {
		var cancel context.CancelFunc
		execCtx, cancel = context.WithDeadlineCause(workCtx, start.Add(s.cfg.MaxDuration), ErrMaxDuration)
		defer cancel()
	}
	erpBefore := s.erp.Stats()
	err := r.execute(execCtx, since, until)
	erpAfter := s.erp.Stats()
	r.erpRequests = erpAfter.Requests - erpBefore.Requests
	r.erpRetries = erpAfter.Retries - erpBefore.Retries

	status := store.StatusSucceeded
	switch {
	case err != nil || r.c.failed.Load() > 0:
		status = store.StatusFailed
	case ctx.Err() != nil:
		status = store.StatusInterrupted
	case workCtx.Err() != nil:
		status = store.StatusFailed
		err = fmt.Errorf("job lock: %w", context.Cause(workCtx))
	case execCtx.Err() != nil:
		status = store.StatusFailed
		err = fmt.Errorf("%w (%s): stopped, records in hand written; the next run continues from the checkpoint", ErrMaxDuration, s.cfg.MaxDuration)
	}
	if err == nil && r.c.failed.Load() > 0 {
		err = fmt.Errorf("%d records failed after their retries (failed_ids in the report, the reasons in the error log lines)", r.c.failed.Load())
	}
	if l := s.cfg.MaxInvalid; l != nil && status != store.StatusInterrupted {
		fetched, invalid := r.c.fetched.Load(), r.c.invalid.Load()
		if allowed := invalidAllowed(*l, fetched); invalid > allowed {
			status = store.StatusFailed
			ierr := fmt.Errorf("%w: %d of %d items fetched were invalid (%.1f%%), above --max-invalid %s (%d items): %s",
				ErrTooManyInvalid, invalid, fetched, 100*float64(invalid)/float64(max(fetched, 1)), l, allowed, r.invalid.top(3))
			if err == nil {
				err = ierr
			} else {
				err = fmt.Errorf("%w; %w", err, ierr)
			}
		}
	}
	if status == store.StatusSucceeded && s.cfg.Mode == ModeBackfill {
		// The window is done: a new backfill of it starts from scratch.
		if derr := s.store.ResetCheckpoint(ctx, r.cpName, 0, rep.RunID); derr != nil {
			log.Warn().Err(derr).Msg("reset backfill checkpoint")
		}
	}
	r.finish(ctx, status, err)
	return rep, err
}

// HoldJob takes the job lock key and starts its watchdog. It returns the
// lock's fencing token; a ctx that ends with ctx or, with the lock's loss
// as its cause, when the lock is lost; and done, which stops the watchdog
// and releases the lock, or, when holdUntil is still ahead and nothing was
// cancelled, keeps it until then (lock-at-least-for: replicas whose ticks
// fire a little later skip the tick). The watchdog renews the lock until
// done, whatever happens to ctx, so work in hand after a signal stays
// covered. A lock held elsewhere is lock.ErrNotObtained.
func (s *Syncer) HoldJob(ctx context.Context, key string, holdUntil time.Time, log zerolog.Logger) (fence int64, work context.Context, done func(), err error) {
	jl, err := s.locks.Obtain(ctx, key, s.cfg.LockTTL, nil)
	if err != nil {
		return 0, nil, nil, err
	}
	holdCtx, stopHold := context.WithCancel(context.WithoutCancel(ctx))
	held := jl.Hold(holdCtx)
	work, cancelWork := context.WithCancelCause(ctx)
	stopAfter := context.AfterFunc(held, func() { cancelWork(context.Cause(held)) })
	done = func() {
		stopAfter()
		cancelWork(nil)
		defer stopHold()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		if left := time.Until(holdUntil); left > 10*time.Millisecond && ctx.Err() == nil && held.Err() == nil {
			// Lock-at-least-for: stop renewing, and let the lease run
			// out at the tick boundary.
			stopHold()
			if err := jl.Refresh(rctx, left); err != nil {
				log.Warn().Err(err).Msg("keep job lock until the next tick")
			}
			return
		}
		if err := jl.Release(rctx); err != nil {
			log.Warn().Err(err).Msg("release job lock")
		}
	}
	return jl.Fence(), work, done, nil
}

// newRun returns the state of one execution that reports into rep.
func (s *Syncer) newRun(rep *Report, log zerolog.Logger) *run {
	r := &run{s: s, rep: rep, log: log, writers: semaphore.NewWeighted(int64(s.cfg.DBWriters)),
		handRows: int64(3 * s.cfg.Workers * s.cfg.ChunkSize / 2)}
	r.inHand = semaphore.NewWeighted(r.handRows)
	r.invalid.keys = s.keyNames()
	r.preRead.Store(true)
	r.cleanNeeded.Store(1)
	return r
}

// run is the state of one execution.
type run struct {
	s   *Syncer
	rep *Report
	log zerolog.Logger
	c   counters
	t   tracker
	lat latencyHist

	writers *semaphore.Weighted // bounds the write statements in flight
	// inHand bounds the rows (a record and its lines) fetched and not yet
	// written, handRows of them, whatever the fetchers: the memory of a
	// run is what is in flight, not the feed.
	inHand   *semaphore.Weighted
	handRows int64
	// newest is the newest updated_at of the valid records of each part
	// (fetchParts), written by the part's fetcher only.
	newest  []time.Time
	preRead atomic.Bool // whether chunks read versions before locking; see learnCurrent
	// cleanReads counts the reads under the locks in a row that found none
	// of their chunk's rows; once it reaches cleanNeeded, chunks insert
	// before they read (see insertFirst and insertRefused).
	cleanReads  atomic.Int64
	cleanNeeded atomic.Int64

	checkpoint  time.Time // last saved
	cpName      string    // the backfill window's checkpoint
	stopBeat    func()    // ends the heartbeat (store.Beat) once the run is recorded
	erpRequests int64
	erpRetries  int64

	failedMu  sync.Mutex
	failedIDs []string

	// halted is the first write the database refused for good
	// (dberr.Denied: a privilege the user lacks); once set no record is
	// tried again, and stopFetch (set by execute) ends the fetching.
	haltMu    sync.Mutex
	halted    error
	stopFetch context.CancelCauseFunc

	invalid invalidTally
	// invalidCopies holds the newest invalid copy of each record the run
	// was served one of (markInvalid): a valid copy the run writes later
	// may be older than it (a replay of an earlier version), and may make
	// the record's first row or clear a mark that a copy with neither a
	// version nor an updated_at set; the row is then marked after the
	// write (markAfterWrites).
	invalidCopies invalidCopies
	// storedCopies holds the invalid copies of the job's records that its
	// quarantines stored, which other runs met too: flushMade marks the
	// rows the run made (made) of those records.
	storedCopies storedCopies
	made         madeRows
}

// invalidCopies is run.invalidCopies. Safe for concurrent use.
type invalidCopies struct {
	n    atomic.Int64 // len(byID), read without mu on every chunk
	mu   sync.Mutex
	byID map[string]erp.Invalid
}

// add keeps inv when it is the newest copy of its record so far.
func (u *invalidCopies) add(inv erp.Invalid) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.byID == nil {
		u.byID = map[string]erp.Invalid{}
	}
	if keepNewest(u.byID, inv) {
		u.n.Store(int64(len(u.byID)))
	}
}

// of returns the copies held of the records of recs.
func (u *invalidCopies) of(recs []erp.Record) []erp.Invalid {
	if u.n.Load() == 0 {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []erp.Invalid
	for _, rec := range recs {
		if inv, ok := u.byID[rec.ErpID]; ok {
			out = append(out, inv)
		}
	}
	return out
}

func (r *run) finish(ctx context.Context, status string, err error) {
	if r.stopBeat != nil {
		r.stopBeat()
	}
	now := time.Now()
	rep := r.rep
	rep.Status = status
	fin := now.UTC()
	rep.FinishedAt = &fin
	rep.Counters = r.c.snapshot()
	rep.RecordLatency = r.lat.summary()
	rep.ERPRequests, rep.ERPRetries = r.erpRequests, r.erpRetries
	if d := now.Sub(rep.StartedAt).Seconds(); d > 0 {
		rep.RecordsPerSecond = float64(rep.Fetched) / d
	}
	if err != nil {
		msg := err.Error()
		rep.Error = &msg
	}
	r.failedMu.Lock()
	rep.FailedIDs = r.failedIDs
	r.failedMu.Unlock()
	if !r.checkpoint.IsZero() {
		t := r.checkpoint
		rep.Checkpoint = &t
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var serr error
	if status == store.StatusSkipped {
		serr = r.s.store.StartRun(dctx, &rep.Run)
	} else {
		serr = r.s.store.FinishRun(dctx, &rep.Run)
	}
	if serr != nil {
		r.log.Error().Err(serr).Msg("record run history")
	}
	ev := r.log.Info()
	if status == store.StatusFailed {
		ev = r.log.Error().AnErr("error", err)
	}
	ev.Str("status", status).
		Int64("fetched", rep.Fetched).Int64("inserted", rep.Inserted).Int64("updated", rep.Updated).Int64("restored", rep.Restored).
		Int64("unchanged", rep.Unchanged).Int64("duplicates_in_feed", rep.DuplicatesInFeed).
		Int64("lock_contended", rep.LockContended).Int64("unique_violations", rep.UniqueViolations).
		Int64("stale_rejected", rep.StaleRejected).Int64("invalid", rep.Invalid).Int64("quarantined", rep.Quarantined).Int64("failed", rep.Failed).
		Int64("erp_requests", rep.ERPRequests).Int64("erp_retries", rep.ERPRetries).
		Float64("records_per_second", rep.RecordsPerSecond).
		Dur("duration", now.Sub(rep.StartedAt)).
		Msg("run summary")
}

func (r *run) recordFailed(id string, err error) {
	r.c.failed.Add(1)
	r.log.Error().Str("erp_id", readableKey(r.invalid.keys, id)).Err(err).Msg("record failed after retries")
	r.failedMu.Lock()
	if len(r.failedIDs) < 1000 {
		r.failedIDs = append(r.failedIDs, id)
	}
	r.failedMu.Unlock()
}

// halt stops the run's writes on err, a refusal no retry can heal: the
// first one is logged and kept for the run's error, and the fetching
// ends. It returns the halting error.
func (r *run) halt(err error) error {
	r.haltMu.Lock()
	defer r.haltMu.Unlock()
	if r.halted == nil {
		r.halted = fmt.Errorf("the database refuses the writes, whatever the retries: %w", err)
		r.log.Error().Err(err).Msg("the database refuses the writes; the run stops")
		if r.stopFetch != nil {
			r.stopFetch(r.halted)
		}
	}
	return r.halted
}

// haltErr returns the error that halted the run's writes, nil while none
// did.
func (r *run) haltErr() error {
	r.haltMu.Lock()
	defer r.haltMu.Unlock()
	return r.halted
}

// unwritten counts recs failed, without a line each: the run's halting
// error says why.
func (r *run) unwritten(recs []erp.Record) {
	r.c.failed.Add(int64(len(recs)))
	r.failedMu.Lock()
	defer r.failedMu.Unlock()
	for _, rec := range recs {
		if len(r.failedIDs) >= 1000 {
			break
		}
		r.failedIDs = append(r.failedIDs, rec.ErpID)
	}
}

type chunk struct {
	part int // the part of the window (see plan) its page belongs to
	page int
	rows int64 // its weight in run.inHand
	recs []erp.Record
	at   time.Time // when its page was fetched
}

// execute pages the feed from since (inclusive) to until (exclusive, zero =
// to the end) and writes it. ctx ends the fetching; records already fetched
// are still written for up to Grace after that.
func (r *run) execute(ctx context.Context, since, until time.Time) error {
	cfg := r.s.cfg
	queue := make(chan chunk, cfg.Workers*2)

	// Records in hand outlive a cancelled ctx by up to Grace.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-ctx.Done():
			select {
			case <-time.After(cfg.Grace):
				cancelWork()
			case <-finished:
			}
		case <-finished:
		}
	}()

	var fetchErr error
	fetchCtx, stopFetch := context.WithCancelCause(ctx)
	defer stopFetch(nil)
	r.haltMu.Lock()
	r.stopFetch = stopFetch
	r.haltMu.Unlock()
	go func() {
		defer close(queue)
		fetchErr = r.fetchParts(fetchCtx, workCtx, since, until, queue)
	}()

	// Save the checkpoint as the watermark moves.
	cpDone := make(chan struct{})
	var cpErr error
	stopCP := make(chan struct{})
	go func() {
		defer close(cpDone)
		tick := time.NewTicker(cfg.CheckpointEvery)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				if err := r.saveCheckpoint(workCtx); err != nil {
					if !checkpointRetriable(workCtx, err) {
						cpErr = err
						return
					}
					r.log.Warn().Err(err).Msg("checkpoint not saved; trying again at the next tick")
				}
			case <-stopCP:
				return
			}
		}
	}()

	if cfg.Progress != nil {
		go func() {
			tick := time.NewTicker(cfg.ProgressEvery)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					cfg.Progress(r.c.snapshot())
				case <-finished:
					return
				}
			}
		}()
	}

	sem := semaphore.NewWeighted(int64(cfg.Workers))
	var wg sync.WaitGroup
	for c := range queue {
		if err := sem.Acquire(workCtx, 1); err != nil {
			for _, rec := range c.recs {
				r.recordFailed(rec.ErpID, fmt.Errorf("not written before the grace period ended: %w", err))
			}
			r.t.done(c.part, c.page, true)
			r.inHand.Release(c.rows)
			continue
		}
		wg.Add(1)
		go func(c chunk) {
			defer wg.Done()
			defer sem.Release(1)
			defer r.inHand.Release(c.rows)
			failed := r.processChunk(workCtx, c.recs)
			r.lat.observe(time.Since(c.at), len(c.recs))
			r.t.done(c.part, c.page, failed)
		}(c)
	}
	wg.Wait()
	close(stopCP)
	<-cpDone
	if cpErr == nil {
		cpErr = r.lastCheckpoint(workCtx)
	}
	switch {
	case r.haltErr() != nil:
		fetchErr = r.haltErr() // the fetching ended for it
	case fetchErr != nil && ctx.Err() != nil && errors.Is(fetchErr, ctx.Err()):
		fetchErr = nil // cancelled, not failed; Run tells which
	}
	return errors.Join(fetchErr, cpErr)
}

func (r *run) saveCheckpoint(ctx context.Context) error {
	wm, moved := r.t.take()
	if !moved || !wm.After(r.checkpoint) {
		return nil
	}
	// The rows of the chunks wm passes are committed and wait in made.
	err := r.flushMade(ctx)
	if err == nil {
		if r.s.cfg.Mode == ModeRun {
			err = r.s.store.SaveCheckpoint(ctx, r.s.cfg.Job, wm, r.rep.Fence, r.rep.RunID)
		} else {
			err = r.s.store.AdvanceCheckpoint(ctx, r.cpName, wm, r.rep.RunID)
		}
	}
	if err != nil {
		r.t.keep() // the next save tries wm again
		return err
	}
	r.checkpoint = wm
	r.log.Debug().Time("checkpoint", wm).Msg("checkpoint saved")
	return nil
}

// checkpointPatience bounds how long the end of a run tries again to save
// its checkpoint through database errors: longer than a database server
// takes to restart or fail over.
const checkpointPatience = 30 * time.Second

// lastCheckpoint looks at the rows that wait in made and saves the run's
// last checkpoint, trying again through database errors for up to
// checkpointPatience: a run whose records are all written does not fail
// for a database that went away for a moment. A refusal by the fence, and
// the end of ctx, are final.
func (r *run) lastCheckpoint(ctx context.Context) error {
	deadline := time.Now().Add(checkpointPatience)
	for attempt := 2; ; attempt++ {
		err := r.flushMade(ctx)
		if err == nil {
			err = r.saveCheckpoint(ctx)
		}
		if err == nil || !checkpointRetriable(ctx, err) || time.Now().After(deadline) {
			return err
		}
		r.log.Warn().Err(err).Msg("checkpoint not saved; trying again")
		if ctxtime.Sleep(ctx, backoff(attempt)) != nil {
			return err
		}
	}
}

// checkpointRetriable reports whether a checkpoint save that failed with
// err may be tried again: not when the fence refused it (another holder
// has the job) nor once ctx has ended.
func checkpointRetriable(ctx context.Context, err error) bool {
	return ctx.Err() == nil && !errors.Is(err, store.ErrFenced)
}

// fetch pages part i of the window, [since, until), into queue in chunks
// (see put). It fetches no page after ctx ended. seen, when not nil, is a
// page of the part read before (Plan's look at the first record), queued
// first.
func (r *run) fetch(ctx, hand context.Context, i int, since, until time.Time, seen *erp.Page, queue chan<- chunk) error {
	cfg := r.s.cfg
	q := erp.Query{Since: since, Until: until, Limit: cfg.PageSize}
	var prev map[string]pageEntry // the previous page's erp_ids, for duplicates across a boundary
	if seen != nil {
		// The part reads it again: it counts once in fetched, and not
		// as a duplicate. Its invalid items, and a record the table
		// cannot store, are the part's own first items: they are
		// quarantined and counted when the part reads them, once.
		recs, _ := erp.SplitUnstorableIn(slices.Clone(seen.Records), nil, r.s.store.Dialect() == store.Postgres)
		seen = &erp.Page{Records: recs}
		r.c.fetched.Add(-int64(len(recs)))
		var err error
		if prev, err = r.put(ctx, hand, i, seen, time.Now(), prev, false, queue); err != nil {
			return err
		}
		for id, e := range prev {
			e.looked = true
			prev[id] = e
		}
	}
	var pass erp.Pass
	for {
		page, err := r.s.erp.Page(ctx, q)
		if err != nil {
			return fmt.Errorf("fetch page: %w", err)
		}
		if err := pass.Next(page.NextCursor); err != nil {
			return err // nothing of this page is queued: the checkpoint stays where the pages before it put it
		}
		fetchedAt := time.Now()
		// The feed's first page is part 0's: a later part may start
		// where invalid items cluster, which says nothing of the map.
		if n := int64(len(page.Invalid)); i == 0 && q.Cursor == "" && len(page.Records) == 0 && n > 0 && cfg.MaxInvalid != nil && cfg.MaxInvalid.Of(n) < n {
			// A wrong map or status map, or another API's shape: the run
			// would quarantine the whole feed. Nothing is written.
			return fmt.Errorf("%w (%d of %d): %s; check --erp-map, --erp-status-map and the source settings (nothing written; --max-invalid 100%% lets it through)",
				ErrFirstPageInvalid, n, n, InvalidSummary(page.Invalid))
		}
		if prev, err = r.put(ctx, hand, i, page, fetchedAt, prev, page.NextCursor == "", queue); err != nil {
			return err
		}
		if page.NextCursor == "" {
			return nil
		}
		q.Cursor = page.NextCursor
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// put queues a page of part i in chunks, quarantining its invalid records
// and dropping duplicates within the page and of the page before (prev);
// last says it ends the part. A page fetched is in hand, and is
// quarantined and queued under hand (the run's ctx extended by the grace
// period), as the workers write it: a run stopped by its max duration or a
// signal writes every record it fetched. It returns the page's erp_ids for
// the next call.
func (r *run) put(ctx, hand context.Context, i int, page *erp.Page, fetchedAt time.Time, prev map[string]pageEntry, last bool, queue chan<- chunk) (map[string]pageEntry, error) {
	cfg := r.s.cfg
	r.c.fetched.Add(int64(len(page.Records) + len(page.Invalid)))
	page.Records, page.Invalid = erp.SplitUnstorableIn(page.Records, page.Invalid, r.s.store.Dialect() == store.Postgres)
	p := r.t.addPage(i, pageWatermark(page, fetchedAt))
	failed := false
	if len(page.Invalid) > 0 {
		r.c.invalid.Add(int64(len(page.Invalid)))
		qs := make([]store.Quarantined, len(page.Invalid))
		for i, inv := range page.Invalid {
			qs[i] = quarantinedOf(inv)
		}
		r.invalid.page(page.Invalid, r.log)
		if err := r.s.store.Quarantine(hand, cfg.Job, r.rep.RunID, qs); err != nil {
			r.log.Error().Err(err).Msg("quarantine failed; checkpoint held back")
			r.c.failed.Add(int64(len(qs)))
			failed = true
		} else if err := r.markInvalid(hand, page.Invalid); err != nil {
			r.log.Error().Err(err).Msg("checkpoint held back")
			r.c.failed.Add(1)
			failed = true
		}
	}
	if r.newest != nil {
		for _, rec := range page.Records {
			if rec.UpdatedAt.After(r.newest[i]) {
				r.newest[i] = rec.UpdatedAt
			}
		}
	}
	recs, cur := r.dedupe(page.Records, prev)
	for len(recs) > 0 {
		n := chunkLen(recs, cfg.ChunkSize)
		r.t.addChunk(i, p)
		c := chunk{part: i, page: p, recs: recs[:n:n], at: fetchedAt, rows: min(rowsOf(recs[:n]), r.handRows)}
		if r.inHand.Acquire(hand, c.rows) != nil {
			r.t.done(i, p, true)
			r.t.seal(i, p, true, false)
			return nil, ctx.Err()
		}
		select {
		case queue <- c:
		case <-hand.Done():
			r.inHand.Release(c.rows)
			r.t.done(i, p, true)
			r.t.seal(i, p, true, false)
			return nil, ctx.Err()
		}
		recs = recs[n:]
	}
	r.t.seal(i, p, failed, last)
	return cur, nil
}

// chunkLen is how many records of recs make the next chunk: at most size
// records filling at most size rows (rowsOf), one at least. A document's
// lines count as rows, so that the rows in hand (run.inHand, a multiple
// of size) hold as many chunks of documents as of records without lines,
// and the workers write several at once.
func chunkLen(recs []erp.Record, size int) int {
	n, rows := 0, int64(0)
	for n < len(recs) && n < size {
		r := recordRows(&recs[n])
		if n > 0 && rows+r > int64(size) {
			break
		}
		n, rows = n+1, rows+r
	}
	return n
}

// rowsOf is how many rows recs fill: each record's and its lines'.
func rowsOf(recs []erp.Record) int64 {
	var n int64
	for i := range recs {
		n += recordRows(&recs[i])
	}
	return n
}

// recordRows is how many rows rec fills: its own and its lines'.
func recordRows(rec *erp.Record) int64 {
	n := int64(1)
	for _, lines := range rec.Children {
		n += int64(len(lines))
	}
	return n
}

// ClockAllowance is how far past the ERP's clock (the Date header of a
// page's response, which has whole seconds) a checkpoint may go.
const ClockAllowance = time.Second

// pageWatermark is how far a page, once written, moves the checkpoint: the
// newest updated_at of its valid, storable records, but never past the
// ERP's clock when it served the page (plus ClockAllowance; our own clock
// when the answer had no Date header). Quarantined items never move it: a
// bad item dated 2999 would otherwise make every later run read from 2999
// and skip every change after it. A valid record dated in the future is
// written, and re-read by each run until the ERP's clock passes it.
func pageWatermark(page *erp.Page, fetchedAt time.Time) time.Time {
	var wm time.Time
	for _, rec := range page.Records {
		if rec.UpdatedAt.After(wm) {
			wm = rec.UpdatedAt
		}
	}
	clock := page.ServedAt
	if clock.IsZero() {
		clock = fetchedAt
	}
	if limit := clock.Add(ClockAllowance); wm.After(limit) {
		wm = limit
	}
	return wm
}

// dedupe keeps one record per erp_id in a page, its highest version
// whatever the order of the copies; drops it when the previous page already
// carried that version or a higher one (that page queued it); and keeps
// only this shard's records. It returns the page's erp_id -> highest
// version map for the next call.
func (r *run) dedupe(recs []erp.Record, prev map[string]pageEntry) ([]erp.Record, map[string]pageEntry) {
	cfg := r.s.cfg
	cur := make(map[string]pageEntry, len(recs))
	out := make([]erp.Record, 0, len(recs))
	for _, rec := range recs {
		e, seen := cur[rec.ErpID]
		if seen {
			r.c.duplicates.Add(1)
			if rec.Version <= e.version {
				continue
			}
			e.version = rec.Version
			if e.at >= 0 {
				out[e.at] = rec
				cur[rec.ErpID] = e
				continue
			}
		} else {
			e = pageEntry{version: rec.Version, at: -1}
		}
		// rec is the highest version of its erp_id in the page so far, and
		// the page has queued none of it yet.
		p, carried := prev[rec.ErpID]
		switch {
		case cfg.Shards > 1 && ShardOf(rec.ErpID, cfg.Shards) != cfg.Shard:
		case carried && p.version >= rec.Version:
			if !seen && !p.looked {
				r.c.duplicates.Add(1)
			}
		default:
			e.at = len(out)
			out = append(out, rec)
		}
		cur[rec.ErpID] = e
	}
	return out, cur
}

// pageEntry is what dedupe keeps of an erp_id of a page: its highest
// version, and where the record is in the page's output (-1: dropped).
type pageEntry struct {
	version int64
	at      int
	looked  bool // of the page Plan read to find the window's start: no duplicate of the feed's
}

// BackfillCheckpointName names the checkpoint of a backfill window: the
// job, and a digest of the window and shard.
func BackfillCheckpointName(cfg Config) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%d/%d", cfg.Since.UTC().Format(time.RFC3339Nano), cfg.Until.UTC().Format(time.RFC3339Nano), cfg.Shard, cfg.Shards)))
	return "backfill:" + cfg.Job + ":" + hex.EncodeToString(sum[:8])
}

// ShardOf returns the shard (0..n-1) of an erp_id: FNV-1a modulo n.
func ShardOf(erpID string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(erpID))
	return int(h.Sum32() % uint32(n))
}
