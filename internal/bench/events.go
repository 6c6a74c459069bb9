package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/webhook"
)

// Measurement names of change events, for Config.Only.
const (
	// Events is the typed backfill (TypedEntity) with change events on
	// against the same backfill with them off, in rounds that alternate
	// which goes first.
	Events = "events"
	// Relay is `erpsync relay --once` delivering the outbox of the
	// events-on backfill to a webhook that the bench serves and to NATS
	// JetStream, at each of RelayBatchSizes.
	Relay = "relay"
)

// GoalEventsRatio is the goal: the typed backfill with change
// events on at no less than this fraction of its records/s with them off,
// in the same run.
const GoalEventsRatio = 0.7

// DefaultNATSURL is the NATS JetStream server of the relay row.
const DefaultNATSURL = "nats://127.0.0.1:4222"

// RelayBatchSizes are the --batch-size values the relay row runs.
var RelayBatchSizes = []int{100, 1000}

// EventResults are the measurements of change events.
type EventResults struct {
	// Off and On are the typed backfill with events off and on, each its
	// best round.
	Off *Result `json:"backfill_events_off,omitempty"`
	On  *Result `json:"backfill_events_on,omitempty"`
	// Rounds are the rounds' on / off, in order.
	Rounds []EventRound `json:"rounds,omitempty"`
	// Relay are the relay's deliveries of the events-on backfill's
	// outbox, one per sink and batch size, each its best round; Records
	// counts events, Seconds the process's wall time, start to exit.
	Relay []*Result `json:"relay,omitempty"`
	// RelayStart is the least wall time of `erpsync relay --once` with
	// nothing pending, over the rounds: the start and exit that each of
	// Relay's Seconds includes.
	RelayStart float64 `json:"relay_start_seconds,omitempty"`
}

// EventRound is one round of the events row.
type EventRound struct {
	// Ratio is the round's events-on records/s over its events-off.
	Ratio float64 `json:"on_over_off"`
	// OnFirst tells whether the events-on backfill ran first.
	OnFirst bool `json:"on_first"`
}

// Ratio is On's records/s over Off's; 0 when either is missing.
func (e *EventResults) Ratio() float64 {
	if e == nil || e.On == nil || e.Off == nil || e.Off.PerSecond == 0 {
		return 0
	}
	return e.On.PerSecond / e.Off.PerSecond
}

// results are the rows of the measurement table: the backfills, then the
// relay's deliveries.
func (e *EventResults) results() []*Result {
	if e == nil {
		return nil
	}
	return append([]*Result{e.Off, e.On}, e.Relay...)
}

// goals are the events' goal, when both backfills were measured.
func (e *EventResults) goals() []Goal {
	v := e.Ratio()
	if v == 0 {
		return nil
	}
	return []Goal{{fmt.Sprintf("typed backfill (%d columns), events on / off", TypedColumns), v, fmt.Sprintf(">= %.1f", GoalEventsRatio), v >= GoalEventsRatio}}
}

// markdown writes the rounds of the events row and the relay's
// deliveries as tables.
func (e *EventResults) markdown(w io.Writer) {
	defer e.relayMarkdown(w)
	if e.Ratio() == 0 {
		return
	}
	rounds := make([]string, len(e.Rounds))
	for i, r := range e.Rounds {
		first := "off first"
		if r.OnFirst {
			first = "on first"
		}
		rounds[i] = fmt.Sprintf("%.2f (%s)", r.Ratio, first)
	}
	tableHead(w, fmt.Sprintf("| typed backfill (%d columns) | events off, records/s | events on, records/s | on / off | on / off in each round |", TypedColumns),
		"| --- | ---: | ---: | ---: | --- |")
	fmt.Fprintf(w, "| %d records | %.0f | %.0f | %.2f | %s |\n", e.On.Records, e.Off.PerSecond, e.On.PerSecond, e.Ratio(), strings.Join(rounds, ", "))
}

// relayMarkdown writes the relay's deliveries as a table: events/s from
// the process's start to its exit and past the start (RelayStart), and
// the CPU an event of erpsync and MariaDB.
func (e *EventResults) relayMarkdown(w io.Writer) {
	if e == nil || len(e.Relay) == 0 {
		return
	}
	tableHead(w, fmt.Sprintf("| erpsync relay --once (nothing pending: %.2f s) | events | events/s, start to exit | events/s past the start | erpsync CPU µs an event | MariaDB CPU µs an event |", e.RelayStart),
		"| --- | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range e.Relay {
		past := "-"
		if d := r.Seconds - e.RelayStart; e.RelayStart > 0 && d > 0 {
			past = fmt.Sprintf("%.0f", float64(r.Records)/d)
		}
		per := func(s float64) float64 { return s / float64(r.Records) * 1e6 }
		fmt.Fprintf(w, "| %s | %d | %.0f | %s | %.1f | %.1f |\n", r.Name, r.Records, r.PerSecond, past, per(r.CPU.Erpsync), per(r.CPU.MySQL))
	}
}

// eventsConfig is typedConfig with change events on: the entity's
// events: true and the file's events block, which names a sink that the
// relay row's flags override.
var eventsConfig = strings.Replace(strings.Replace(typedConfig,
	"entities:\n", "events:\n  sink: webhook\n  url: http://127.0.0.1:9/unused\nentities:\n", 1),
	"    key: [company, order_no]\n", "    events: true\n    key: [company, order_no]\n", 1)

// eventsTarget writes the config file of TypedEntity with change events
// on beside t's and returns the target of its backfill: the same feed,
// table and owner as t's.
func (t *typed) eventsTarget() (target, error) {
	path := filepath.Join(t.dir, TypedEntity+"-events.yaml")
	f, err := entity.Parse(path, []byte(eventsConfig))
	if err != nil {
		return target{}, fmt.Errorf("events config: %w", err)
	}
	if !f.Entities[0].Events || f.Events == nil {
		return target{}, errors.New("events config: the entity records no events")
	}
	if err := os.WriteFile(path, []byte(eventsConfig), 0o644); err != nil {
		return target{}, err
	}
	tg := t.target()
	tg.args = []string{"--config", path, "--entity", TypedEntity}
	return tg, nil
}

// events makes the events and relay rows that the config wants.
func (b *bench) events(ctx context.Context) (*EventResults, error) {
	ty, err := b.startTyped(ctx, b.cfg.Records)
	if err != nil {
		return nil, err
	}
	defer ty.close()
	on, err := ty.eventsTarget()
	if err != nil {
		return nil, err
	}
	res := &EventResults{}
	if b.cfg.wants(Events) {
		for round := range b.cfg.Repeat {
			onFirst := round%2 == 0
			var rOn, rOff *Result
			for _, withEvents := range []bool{onFirst, !onFirst} {
				if withEvents {
					rOn, err = b.backfillEvents(ctx, ty, on)
				} else {
					rOff, err = b.backfillNoEvents(ctx, ty)
				}
				if err != nil {
					return res, err
				}
			}
			res.Rounds = append(res.Rounds, EventRound{Ratio: rOn.PerSecond / rOff.PerSecond, OnFirst: onFirst})
			b.logf("events round %d: on / off %.2f", round+1, rOn.PerSecond/rOff.PerSecond)
			res.On, res.Off = best(res.On, rOn), best(res.Off, rOff)
		}
	}
	if b.cfg.wants(Relay) {
		if err := b.relayRows(ctx, ty, on, res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// backfillEvents runs the typed backfill with events on into an emptied
// table and outbox, and checks the outbox it left.
func (b *bench) backfillEvents(ctx context.Context, ty *typed, on target) (*Result, error) {
	if err := b.emptyOutbox(ctx); err != nil {
		return nil, err
	}
	r, err := b.backfill(ctx, fmt.Sprintf("typed backfill (%d columns), events on", TypedColumns), on, true)
	if err != nil {
		return nil, err
	}
	if err := b.checkOutbox(ctx, ty, r); err != nil {
		return nil, err
	}
	r.Note += "; outbox checked: one insert event a row"
	return r, nil
}

// backfillNoEvents runs the typed backfill with events off into an
// emptied table, and checks that it recorded no event. The outbox keeps
// what the last events-on round recorded, for the relay row.
func (b *bench) backfillNoEvents(ctx context.Context, ty *typed) (*Result, error) {
	before, err := b.outboxCount(ctx)
	if err != nil {
		return nil, err
	}
	r, err := b.backfill(ctx, fmt.Sprintf("typed backfill (%d columns), events off", TypedColumns), ty.target(), true)
	if err != nil {
		return nil, err
	}
	after, err := b.outboxCount(ctx)
	if err != nil {
		return nil, err
	}
	if r.Report.Inserted != int64(b.cfg.Records) || after != before {
		return nil, fmt.Errorf("%s: inserted %d of %d records, recorded %d events", r.Name, r.Report.Inserted, b.cfg.Records, after-before)
	}
	return r, nil
}

// emptyOutbox truncates erpsync_events.
func (b *bench) emptyOutbox(ctx context.Context) error {
	if _, err := b.db.ExecContext(ctx, "TRUNCATE TABLE erpsync_events"); err != nil {
		return fmt.Errorf("empty erpsync_events: %w", err)
	}
	return nil
}

func (b *bench) outboxCount(ctx context.Context) (int64, error) {
	var n int64
	if err := b.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM erpsync_events").Scan(&n); err != nil {
		return 0, fmt.Errorf("count erpsync_events: %w", err)
	}
	return n, nil
}

// checkOutbox checks the outbox after the backfill r with events into an
// emptied table and outbox: the table holds every record, and the outbox
// one undelivered insert event of TypedEntity for each row, at the row's
// key and version (the UNIQUE index on (entity, key, version, op) leaves
// no two events one row).
func (b *bench) checkOutbox(ctx context.Context, ty *typed, r *Result) error {
	table := "`" + ty.table.Name() + "`"
	var rows, events, matched int64
	err := b.db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM `+table+`), (SELECT COUNT(*) FROM erpsync_events),
  (SELECT COUNT(*) FROM erpsync_events e JOIN `+table+` t
     ON t.company = JSON_VALUE(e.entity_key, '$.company') AND t.order_no = CAST(JSON_VALUE(e.entity_key, '$.order_no') AS SIGNED)
    AND t.erp_version = e.version
   WHERE e.entity = ? AND e.op = 'insert' AND e.delivered_at IS NULL)`, TypedEntity).Scan(&rows, &events, &matched)
	if err != nil {
		return fmt.Errorf("check the outbox: %w", err)
	}
	n := int64(b.cfg.Records)
	if r.Report.Inserted != n || rows != n || events != n || matched != n {
		return fmt.Errorf("%s: inserted %d of %d records; the table holds %d rows, the outbox %d events, %d of them an undelivered insert at a row's key and version",
			r.Name, r.Report.Inserted, n, rows, events, matched)
	}
	return nil
}

// relaySink is a sink of the relay row: the flags that name it, and how
// many events it received since it was last reset.
type relaySink struct {
	name  string
	args  []string
	reset func(ctx context.Context) error
	count func(ctx context.Context) (received int64, note string, err error)
}

// relayRows measures `erpsync relay --once` delivering the outbox of the
// events-on backfill to each sink at each of RelayBatchSizes, in rounds
// that rotate their order, into res; before each delivery every event is
// marked undelivered again, after it the sink must have received each
// event of the outbox and the outbox must hold none undelivered. Each
// round ends with a relay that finds nothing pending.
func (b *bench) relayRows(ctx context.Context, ty *typed, on target, res *EventResults) error {
	n := int64(b.cfg.Records)
	if c, err := b.outboxCount(ctx); err != nil {
		return err
	} else if c != n {
		b.logf("relay: recording the outbox first")
		if _, err := b.backfillEvents(ctx, ty, on); err != nil {
			return err
		}
	}
	// A fence of an earlier bench's relay, under another lock prefix,
	// would fence this one's out.
	if _, err := b.db.ExecContext(ctx, "DELETE FROM erpsync_relay_fence"); err != nil {
		return fmt.Errorf("reset the relay fence: %w", err)
	}
	wh, stopHook, err := ty.startHook()
	if err != nil {
		return err
	}
	defer stopHook()
	js, stopJS, err := b.startStream(ctx)
	if err != nil {
		return err
	}
	defer stopJS()
	type run struct {
		sink  *relaySink
		batch int
		out   *Result
	}
	var runs []*run
	for _, s := range []*relaySink{wh, js} {
		for _, size := range RelayBatchSizes {
			runs = append(runs, &run{sink: s, batch: size})
		}
	}
	for round := range b.cfg.Repeat {
		for i := range runs {
			r := runs[(i+round)%len(runs)]
			m, err := b.relayOnce(ctx, r.sink, r.batch)
			if err != nil {
				return err
			}
			r.out = best(r.out, m)
		}
		// Everything is delivered now.
		c, err := b.child(ctx, "relay --once, nothing pending", b.relayArgs(wh, RelayBatchSizes[0]), b.ports)
		if err != nil {
			return err
		}
		if res.RelayStart == 0 || c.wall.Seconds() < res.RelayStart {
			res.RelayStart = c.wall.Seconds()
		}
	}
	for _, r := range runs {
		res.Relay = append(res.Relay, r.out)
	}
	return nil
}

// relayArgs are the arguments of `erpsync relay --once` into s.
func (b *bench) relayArgs(s *relaySink, batch int) []string {
	return append([]string{"relay", "--once", "--batch-size", strconv.Itoa(batch), "--redis-addr", b.cfg.RedisAddr,
		"--lock-prefix", "erpsync-bench:" + b.job + ":", "--http-addr", "", "--log-format", "json", "--log-level", "warn"}, s.args...)
}

// relayOnce marks every event undelivered, runs `erpsync relay --once`
// into s with --batch-size batch, and checks that s received each event
// and that none is left undelivered.
func (b *bench) relayOnce(ctx context.Context, s *relaySink, batch int) (*Result, error) {
	name := fmt.Sprintf("relay --once to %s, --batch-size %d", s.name, batch)
	n := int64(b.cfg.Records)
	if _, err := b.db.ExecContext(ctx, "UPDATE erpsync_events SET delivered_at = NULL WHERE delivered_at IS NOT NULL"); err != nil {
		return nil, fmt.Errorf("%s: mark the outbox undelivered: %w", name, err)
	}
	if err := s.reset(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	b.logf("%s", name)
	c, err := b.child(ctx, name, b.relayArgs(s, batch), b.ports)
	if err != nil {
		return nil, err
	}
	got, note, err := s.count(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var pending int64
	if err := b.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM erpsync_events WHERE delivered_at IS NULL").Scan(&pending); err != nil {
		return nil, fmt.Errorf("%s: count pending events: %w", name, err)
	}
	if got != n || pending != 0 {
		return nil, fmt.Errorf("%s: the sink received %d of %d events (%s); %d left undelivered", name, got, n, note, pending)
	}
	r := result(name, n, c.wall)
	r.CPU = c.cpu
	r.PeakRSSKiB = c.peakRSSKiB
	r.Note = note + "; process wall, start to exit"
	b.logf("%s: %.0f events/s", name, r.PerSecond)
	return r, nil
}

// hook is the webhook of the relay row: it answers 200 to each POST whose
// signature holds and counts the distinct event ids it received.
type hook struct {
	secret []byte
	mu     sync.Mutex
	ids    map[string]struct{}
	events int64
	posts  int64
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if webhook.Verify(h.secret, r.Header, body, nil) != nil {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var evs []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &evs); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	for _, e := range evs {
		h.ids[e.ID] = struct{}{}
	}
	h.events += int64(len(evs))
	h.posts++
	h.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// startHook serves a hook on a loopback port, its secret in a file in
// t's directory, and returns its sink.
func (t *typed) startHook() (*relaySink, func(), error) {
	h := &hook{secret: []byte("erpsync-bench-secret"), ids: map[string]struct{}{}}
	secretFile := filepath.Join(t.dir, "hook-secret")
	if err := os.WriteFile(secretFile, append(h.secret, '\n'), 0o600); err != nil {
		return nil, nil, err
	}
	srv, url, err := serve(h)
	if err != nil {
		return nil, nil, err
	}
	return &relaySink{
		name: "a webhook",
		args: []string{"--events-sink", entity.SinkWebhook, "--events-url", url + "/hook", "--events-secret-file", secretFile},
		reset: func(context.Context) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.ids, h.events, h.posts = map[string]struct{}{}, 0, 0
			return nil
		},
		count: func(context.Context) (int64, string, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			return int64(len(h.ids)), fmt.Sprintf("%d distinct ids in %d events, %d POSTs", len(h.ids), h.events, h.posts), nil
		},
	}, func() { srv.Close() }, nil
}

// startStream connects to NATS JetStream and returns the sink of a
// stream of the bench's own, on a subject of its own: made anew before
// each delivery (a stream drops a message whose id it saw within its
// duplicate window), deleted at the end.
func (b *bench) startStream(ctx context.Context) (*relaySink, func(), error) {
	nc, err := nats.Connect(b.cfg.NATSURL, nats.Name("erpsync-bench"), nats.Timeout(5*time.Second))
	if err != nil {
		return nil, nil, fmt.Errorf("nats at %s: %w", b.cfg.NATSURL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("nats jetstream: %w", err)
	}
	suffix := strings.TrimPrefix(b.job, "bench-")
	stream, subject := "ERPSYNC_BENCH_"+strings.ToUpper(suffix), "erpsync-bench."+suffix
	drop := func(ctx context.Context) error {
		if err := js.DeleteStream(ctx, stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("delete stream %s: %w", stream, err)
		}
		return nil
	}
	return &relaySink{
			name: "NATS JetStream",
			args: []string{"--events-sink", entity.SinkNATS, "--events-url", b.cfg.NATSURL, "--events-subject", subject},
			reset: func(ctx context.Context) error {
				if err := drop(ctx); err != nil {
					return err
				}
				if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject + ".>"}, Storage: jetstream.FileStorage}); err != nil {
					return fmt.Errorf("create stream %s: %w", stream, err)
				}
				return nil
			},
			count: func(ctx context.Context) (int64, string, error) {
				s, err := js.Stream(ctx, stream)
				if err != nil {
					return 0, "", fmt.Errorf("stream %s: %w", stream, err)
				}
				info, err := s.Info(ctx)
				if err != nil {
					return 0, "", fmt.Errorf("stream %s: %w", stream, err)
				}
				return int64(info.State.Msgs), fmt.Sprintf("%d messages in the stream (file storage)", info.State.Msgs), nil
			},
		}, func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := drop(dctx); err != nil {
				b.logf("%v", err)
			}
			nc.Close()
		}, nil
}
