package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/metrics"
	"github.com/erpsync/erpsync/internal/reconcile"
	"github.com/erpsync/erpsync/internal/relay"
	"github.com/erpsync/erpsync/internal/schedule"
	"github.com/erpsync/erpsync/internal/syncer"
)

func cmdSchedule(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var s settings
	var every time.Duration
	var cronExpr, httpAddr string
	var ticks int
	var reconcileEvery time.Duration
	var r reconcileSettings
	fs := newFlagSet("erpsync schedule", stderr)
	s.connFlags(fs)
	s.syncFlags(fs)
	durationVar(fs, &reconcileEvery, "reconcile-every", 0, 0, "never", "also run reconcile every D on the wall-clock grid of D, under its own lock (0: never)")
	r.guardFlags(fs)
	fs.DurationVar(&every, "every", 0, "run every D on the wall-clock grid of D (fixed delay: a run longer than D skips the ticks it overran)")
	fs.StringVar(&cronExpr, "cron", "", "run by a cron expression (5 fields or @hourly...; UTC) instead of --every")
	fs.StringVar(&httpAddr, "http-addr", ":9090", "serve /metrics, /healthz and /readyz here (empty: off)")
	intVar(fs, &ticks, "ticks", 0, 0, math.MaxInt, "stop after this many ticks (0: until SIGTERM/SIGINT)")
	var ev eventSettings
	var retention time.Duration
	ev.flags(fs)
	durationVar(fs, &retention, "events-retention", 7*24*time.Hour, time.Minute, "", "the relay's: delivered events older than this are pruned")
	if err := s.parseEntities(fs, args); err != nil {
		return err
	}
	// With a sink (the file's events: block or --events-sink), the relay
	// runs beside the ticks.
	runRelay := true
	if err := ev.fill(s.file); errors.Is(err, errNoSink) {
		runRelay = false
	} else if err != nil {
		return err
	}
	ev.redact(fs)
	log, err := newLogger(&s, stderr)
	if err != nil {
		return err
	}
	// Each target ticks on its entity's own every or cron, where the file
	// gives one, else on --every or --cron.
	scheds := make([]schedule.Schedule, len(s.targets))
	for i, t := range s.targets {
		var err error
		if t.ent.Every > 0 || t.ent.Cron != "" {
			scheds[i], err = schedule.Parse(t.ent.Every, t.ent.Cron)
		} else {
			scheds[i], err = schedule.Parse(every, cronExpr)
		}
		if err != nil {
			if s.ConfigFile != "" {
				err = fmt.Errorf("entity %s: %w (or give the entity every: or cron: in %s)", t.ent.Name, err, s.ConfigFile)
			}
			return usageError{err}
		}
	}
	if err := r.check(); err != nil {
		return err
	}
	if reconcileEvery > 0 {
		if err := scanNeverSkips(&s); err != nil {
			return err
		}
	}
	cfg := s.syncConfig(syncer.ModeRun)
	if err := checkRun(&s, cfg, log); err != nil {
		return err
	}

	// The schedule's own lines name its job, or a config file's jobs;
	// runs add their run_id and job.
	slog := log.With().Str("job", s.Job).Logger()
	if s.ConfigFile != "" {
		var jobs []string
		for _, t := range s.targets {
			jobs = append(jobs, t.job)
		}
		slog = log.With().Str("job", strings.Join(jobs, ",")).Logger()
	}
	m := metrics.New()
	ctx, d, done, err := open(ctx, &s, false, m, log)
	if errors.As(err, new(interruptedError)) {
		return nil // asked to stop before it started: stopping is its clean end
	}
	if err != nil {
		return err
	}
	defer done()
	for i, t := range d.targets {
		m.Init(t.job, syncer.ModeRun)
		if e, ok := scheds[i].(schedule.Every); ok {
			m.SetInterval(t.job, time.Duration(e))
		}
	}
	if reconcileEvery > 0 {
		rcfg := r.config()
		rcfg.PageSize = s.PageSize
		rcfg.Fetchers = s.Fetchers
		rctx, stopReconciles := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, t := range d.targets {
			m.Init(t.job, reconcile.Mode)
			wg.Go(func() { reconcileLoop(rctx, schedule.Every(reconcileEvery), rcfg, cfg, d, t, log, m) })
		}
		defer func() {
			stopReconciles()
			wg.Wait()
		}()
	}

	stopOps, err := serveOps(ctx, httpAddr, m, d, slog)
	if err != nil {
		return err
	}
	defer stopOps()

	if runRelay {
		sink, err := ev.sink(ctx)
		if err != nil {
			return err
		}
		defer sink.Close()
		rlog := log.With().Str("component", "relay").Str("sink", ev.Sink).Logger()
		r, err := newRelay(relay.Config{LockTTL: s.LockTTL, Grace: s.Grace, Retention: retention}, d, sink, metrics.NewOutbox(m), rlog)
		if err != nil {
			return err
		}
		rctx, stopRelay := context.WithCancel(ctx) // --ticks ends the schedule without a signal
		relayDone := make(chan struct{})
		go func() {
			defer close(relayDone)
			if err := r.Run(rctx); err != nil {
				rlog.Error().Err(err).Msg("relay stopped; the runs go on, the events wait in the outbox")
			}
		}()
		defer func() {
			stopRelay()
			<-relayDone
		}()
	}

	slog.Info().Dur("every", every).Str("cron", cronExpr).Dur("reconcile_every", reconcileEvery).Int("jobs", len(d.targets)).Msg("schedule started")
	// One loop per target: a slow or failing entity holds no other back.
	failed := make([]int, len(d.targets))
	var wg sync.WaitGroup
	for i, t := range d.targets {
		wg.Go(func() { failed[i] = tickLoop(ctx, scheds[i], ticks, cfg, d, t, &s, log, m) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		slog.Info().Msg("schedule stopped")
		return nil
	}
	failedTicks := 0
	for _, n := range failed {
		failedTicks += n
	}
	if failedTicks > 0 {
		return fmt.Errorf("%w: %d of %d ticks failed", errFailed, failedTicks, ticks*len(d.targets))
	}
	return nil
}

// tickLoop runs target t on every tick of sched (ticks of them, 0: until
// ctx ends) and returns how many failed.
func tickLoop(ctx context.Context, sched schedule.Schedule, ticks int, cfg syncer.Config, d *deps, t *target, s *settings, log zerolog.Logger, m *metrics.Metrics) int {
	slog := log.With().Str("job", t.job).Logger()
	cfg.Job, cfg.Entity = t.job, t.ent.Name
	failedTicks := 0
	for n := 0; ticks == 0 || n < ticks; n++ {
		tick := sched.Next(time.Now())
		select {
		case <-ctx.Done():
			return failedTicks
		case <-time.After(time.Until(tick)):
		}
		// Lock-at-least-for: hold the job lock to halfway to the next tick,
		// so replicas whose clocks or timers fire a little later skip this
		// tick, and the next tick still finds the lock free.
		next := sched.Next(tick)
		cfg.HoldUntil = tick.Add(next.Sub(tick) / 2)
		rep, err := runTick(ctx, cfg, d, t, log, m)
		if err != nil {
			failedTicks++
			slog.Error().Err(err).Time("tick", tick).Msg("tick failed")
		}
		if len(d.targets) == 1 { // several: the runs' summary lines and history tell
			if err := writeReport(s.Report, rep); err != nil {
				slog.Error().Err(err).Msg("write report")
			}
		}
		if ctx.Err() != nil {
			return failedTicks
		}
	}
	return failedTicks
}

// runTick runs one tick and publishes its outcome to the metrics.
func runTick(ctx context.Context, cfg syncer.Config, d *deps, t *target, log zerolog.Logger, m *metrics.Metrics) (*syncer.Report, error) {
	if err := claim(ctx, t.st, t.owner()); err != nil {
		return nil, err // a --take-table of another job since the start
	}
	sy, err := syncer.New(cfg, t.erp, t.st, d.locks, log)
	if err != nil {
		return nil, err
	}
	rep, err := sy.Run(ctx)
	if rep != nil {
		m.ObserveRun(rep.Run, rep.Checkpoint)
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if n, qerr := t.st.QuarantineCount(qctx); qerr == nil {
		m.SetQuarantined(cfg.Job, n)
	}
	if n, qerr := t.st.QuarantinedRows(qctx); qerr == nil {
		m.SetQuarantinedRows(cfg.Job, n)
	}
	return rep, err
}

// reconcileLoop runs a reconcile on every tick of sched until ctx ends,
// beside the incremental runs: its own lock (held to halfway to the next
// tick, as the runs' job lock), history rows and metrics. A reconcile
// that fails or is refused is logged and counted; the loop goes on.
func reconcileLoop(ctx context.Context, sched schedule.Schedule, rcfg reconcile.Config, cfg syncer.Config, d *deps, t *target, log zerolog.Logger, m *metrics.Metrics) {
	cfg.Job = t.job
	for {
		tick := sched.Next(time.Now())
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(tick)):
		}
		next := sched.Next(tick)
		rcfg.HoldUntil = tick.Add(next.Sub(tick) / 2)
		rc, err := newReconciler(rcfg, cfg, d, t, log)
		if err == nil {
			err = claim(ctx, t.st, t.owner()) // a --take-table since the start refuses the tick
		}
		if err != nil {
			log.Error().Err(err).Msg("reconcile tick failed")
			continue
		}
		rep, err := rc.Run(ctx)
		if rep != nil && rep.FinishedAt != nil {
			m.ObserveRun(rep.Run, nil)
			if rep.Refused != "" {
				m.ObserveRefused(cfg.Job)
			}
		}
		if err != nil {
			log.Error().Err(err).Str("job", cfg.Job).Time("tick", tick).Msg("reconcile tick failed")
		}
	}
}

// serveOps serves opsMux at addr (nothing when addr is empty) until stop.
func serveOps(ctx context.Context, addr string, m *metrics.Metrics, d *deps, log zerolog.Logger) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usageError{fmt.Errorf("--http-addr %s: %w", addr, err)}
	}
	srv := &http.Server{Handler: opsMux(m, d), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	log.Info().Str("http_addr", ln.Addr().String()).Msg("serving /metrics, /healthz, /readyz")
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}, nil
}

// opsMux serves /metrics, /healthz (the process lives) and /readyz (the database
// and Redis answer).
func opsMux(m *metrics.Metrics, d *deps) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := d.store.Ping(ctx); err != nil {
			http.Error(w, d.store.Dialect().String()+": "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if err := d.rdb.Ping(ctx).Err(); err != nil {
			http.Error(w, "redis: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}
