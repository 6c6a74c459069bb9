// Package metrics exports erpsync's Prometheus metrics: runs by status
// (skipped included), records by outcome (soft deletes, restores and
// quarantine marks included), rows marked quarantined, reconciles the deletion guard refused, lock events and
// acquire latency, ERP requests, retries and latency, last success and
// checkpoint lag.
//
// Record counters are added when a run finishes, from its report, so they
// always match the run reports exactly.
package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/lock"
)

// Metrics holds erpsync's collectors in their own registry.
type Metrics struct {
	reg           *prometheus.Registry
	runs          *prometheus.CounterVec
	records       *prometheus.CounterVec
	lockEvents    *prometheus.CounterVec
	lockAcquire   *prometheus.HistogramVec
	erpRequests   *prometheus.CounterVec
	erpRetries    *prometheus.CounterVec
	erpLatency    *prometheus.HistogramVec
	runDuration   *prometheus.HistogramVec
	lastSuccess   *prometheus.GaugeVec
	checkpointLag *prometheus.GaugeVec
	quarantined   *prometheus.GaugeVec
	markedRows    *prometheus.GaugeVec
	interval      *prometheus.GaugeVec
	refused       *prometheus.CounterVec
}

// New creates the collectors, with Go and process collectors beside them.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "erpsync_runs_total",
			Help: "Runs by job, mode and status (succeeded, skipped, failed, interrupted)."}, []string{"job", "mode", "status"}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "erpsync_records_total",
			Help: "Records by outcome, added from each finished run's report."}, []string{"job", "outcome"}),
		lockEvents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "erpsync_lock_events_total",
			Help: "Lock events by kind (job, record) and event (obtained, contended, not_obtained, lost, renew_failed)."}, []string{"kind", "event"}),
		lockAcquire: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "erpsync_lock_acquire_seconds",
			Help: "Time to obtain a lock, waiting included.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"kind"}),
		erpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "erpsync_erp_requests_total",
			Help: "ERP API requests by endpoint and HTTP status code (0: no response)."}, []string{"endpoint", "code"}),
		erpRetries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "erpsync_erp_retries_total",
			Help: "ERP API retries by reason."}, []string{"reason"}),
		erpLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "erpsync_erp_request_duration_seconds",
			Help: "ERP API request latency.", Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12)}, []string{"endpoint"}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "erpsync_run_duration_seconds",
			Help: "Duration of runs that did work.", Buckets: prometheus.ExponentialBuckets(0.05, 2.5, 12)}, []string{"job", "mode"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "erpsync_last_success_timestamp_seconds",
			Help: "Unix time of the last succeeded run."}, []string{"job"}),
		checkpointLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "erpsync_checkpoint_lag_seconds",
			Help: "Now minus the job checkpoint position, at the end of the last run."}, []string{"job"}),
		quarantined: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "erpsync_quarantined_records",
			Help: "Distinct invalid payloads in quarantine."}, []string{"job"}),
		markedRows: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "erpsync_quarantined_rows",
			Help: "Live rows marked quarantined (quarantined_at): the ERP's newest copy of their record is invalid, and the row holds its last valid data."}, []string{"job"}),
		interval: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "erpsync_schedule_interval_seconds",
			Help: "The schedule's interval (--every), for alerts counted in intervals."}, []string{"job"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "erpsync_reconcile_refused_total",
			Help: "Reconciles the deletion guard refused: more deletions than --max-delete, or an empty scan of a table with rows."}, []string{"job"}),
	}
	m.reg.MustRegister(m.runs, m.records, m.lockEvents, m.lockAcquire, m.erpRequests, m.erpRetries, m.erpLatency,
		m.runDuration, m.lastSuccess, m.checkpointLag, m.quarantined, m.markedRows, m.interval, m.refused,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry returns the registry (for tests and extra collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ObserveRun adds a finished run's report.
func (m *Metrics) ObserveRun(r store.Run, checkpoint *time.Time) {
	m.runs.WithLabelValues(r.Job, r.Mode, r.Status).Inc()
	if r.Status == store.StatusSkipped {
		return
	}
	c := r.Counters
	for outcome, n := range map[string]int64{
		"inserted": c.Inserted, "updated": c.Updated, "unchanged": c.Unchanged, "duplicate": c.DuplicatesInFeed,
		"invalid": c.Invalid, "failed": c.Failed, "stale_rejected": c.StaleRejected, "unique_violation": c.UniqueViolations,
		"restored": c.Restored, "deleted": c.Deleted, "repaired": c.Repaired, "quarantined": c.Quarantined,
	} {
		m.records.WithLabelValues(r.Job, outcome).Add(float64(n))
	}
	if r.FinishedAt != nil {
		m.runDuration.WithLabelValues(r.Job, r.Mode).Observe(r.FinishedAt.Sub(r.StartedAt).Seconds())
		// A reconcile's success says nothing of the incremental runs that
		// ErpsyncNoSuccessIn3Intervals watches.
		if r.Status == store.StatusSucceeded && r.Mode != "reconcile" {
			m.lastSuccess.WithLabelValues(r.Job).Set(float64(r.FinishedAt.UnixNano()) / 1e9)
		}
	}
	if checkpoint != nil {
		m.checkpointLag.WithLabelValues(r.Job).Set(time.Since(*checkpoint).Seconds())
	}
}

// Init creates a job's run and record series at zero, so that rate() and
// increase() see their first event.
func (m *Metrics) Init(job, mode string) {
	for _, st := range []string{store.StatusSucceeded, store.StatusSkipped, store.StatusFailed, store.StatusInterrupted} {
		m.runs.WithLabelValues(job, mode, st)
	}
	for _, o := range []string{"inserted", "updated", "unchanged", "duplicate", "invalid", "failed", "stale_rejected", "unique_violation", "restored", "deleted", "repaired", "quarantined"} {
		m.records.WithLabelValues(job, o)
	}
	m.refused.WithLabelValues(job)
	for _, kind := range []string{"job", "record"} {
		for _, ev := range []string{"obtained", "contended", "not_obtained", "lost", "renew_failed"} {
			m.lockEvents.WithLabelValues(kind, ev)
		}
	}
}

// ObserveRefused counts a reconcile of job that the deletion guard refused.
func (m *Metrics) ObserveRefused(job string) {
	m.refused.WithLabelValues(job).Inc()
}

// SetQuarantined sets the quarantine size.
func (m *Metrics) SetQuarantined(job string, n int64) {
	m.quarantined.WithLabelValues(job).Set(float64(n))
}

// SetQuarantinedRows sets the number of live rows marked quarantined.
func (m *Metrics) SetQuarantinedRows(job string, n int64) {
	m.markedRows.WithLabelValues(job).Set(float64(n))
}

// SetInterval publishes the schedule interval.
func (m *Metrics) SetInterval(job string, d time.Duration) {
	m.interval.WithLabelValues(job).Set(d.Seconds())
}

// lockKind tells a job lock from a record lock by its key.
func lockKind(key string) string {
	if strings.HasPrefix(key, "job:") {
		return "job"
	}
	return "record"
}

// LockHooks returns lock hooks that count lock events.
func (m *Metrics) LockHooks() *lock.Hooks {
	ev := func(key, event string) { m.lockEvents.WithLabelValues(lockKind(key), event).Inc() }
	return &lock.Hooks{
		Obtained: func(key string, wait time.Duration) {
			ev(key, "obtained")
			m.lockAcquire.WithLabelValues(lockKind(key)).Observe(wait.Seconds())
		},
		Contended:   func(key string) { ev(key, "contended") },
		NotObtained: func(key string) { ev(key, "not_obtained") },
		Lost:        func(key string, _ error) { ev(key, "lost") },
		RenewFailed: func(key string, _ error) { ev(key, "renew_failed") },
	}
}

// ERPHooks returns ERP client hooks that count requests, retries and latency.
func (m *Metrics) ERPHooks() *erp.Hooks {
	return &erp.Hooks{
		Request: func(endpoint string, status int, d time.Duration, _ error) {
			m.erpRequests.WithLabelValues(endpoint, strconv.Itoa(status)).Inc()
			m.erpLatency.WithLabelValues(endpoint).Observe(d.Seconds())
		},
		Retry: func(reason string, _ time.Duration) { m.erpRetries.WithLabelValues(reason).Inc() },
	}
}
