package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/erpsync/erpsync/internal/outbox"
)

// Outbox holds the change-event relay's collectors: the outbox's pending
// events, the age of the oldest, the relays that skipped, the lock
// service's failures and the failed deliveries.
type Outbox struct {
	pending       prometheus.Gauge
	oldestPending prometheus.Gauge
	skipped       prometheus.Counter
	lockFailed    prometheus.Counter
	failed        prometheus.Counter
}

// NewOutbox creates the relay's collectors in m's registry.
func NewOutbox(m *Metrics) *Outbox {
	o := &Outbox{
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "erpsync_events_pending",
			Help: "Change events in the outbox not yet delivered, as the relay last counted them."}),
		oldestPending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "erpsync_events_oldest_pending_seconds",
			Help: "How long the oldest undelivered change event has waited (0: none pending)."}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "erpsync_relay_skipped_total",
			Help: "Times a relay found the relay lock held by another and did not deliver."}),
		lockFailed: prometheus.NewCounter(prometheus.CounterOpts{Name: "erpsync_relay_lock_failures_total",
			Help: "Times a running relay could not reach the lock service (Redis) and waited to try again."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "erpsync_relay_delivery_failures_total",
			Help: "Deliveries the sink did not take (a 5xx, a network error, a message a broker refused or returned unroutable) that a running relay retries."}),
	}
	m.reg.MustRegister(o.pending, o.oldestPending, o.skipped, o.lockFailed, o.failed)
	return o
}

// ObserveOutbox publishes the outbox's counts.
func (o *Outbox) ObserveOutbox(st outbox.Stats) {
	o.pending.Set(float64(st.Pending()))
	o.oldestPending.Set(st.OldestPendingAge().Seconds())
}

// ObserveRelaySkipped counts a relay that found the lock held.
func (o *Outbox) ObserveRelaySkipped() { o.skipped.Inc() }

// ObserveRelayLockFailed counts a failure of the lock service that a
// running relay waits out.
func (o *Outbox) ObserveRelayLockFailed() { o.lockFailed.Inc() }

// ObserveDeliveryFailed counts a delivery the sink did not take that a
// running relay retries.
func (o *Outbox) ObserveDeliveryFailed() { o.failed.Inc() }
