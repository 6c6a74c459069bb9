package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/metrics"
	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/relay"
	"github.com/erpsync/erpsync/internal/secret"
	"github.com/erpsync/erpsync/lock"
)

// eventSettings are where the relay delivers: the flags, or the config
// file's events block for what the flags leave unset.
type eventSettings struct {
	Sink, URL, Secret, Subject, Exchange string
	// Unsigned lets a webhook go without a secret.
	Unsigned bool
}

func (e *eventSettings) flags(fs *flag.FlagSet) {
	fs.StringVar(&e.Sink, "events-sink", "", "where the relay delivers change events: webhook, nats or rabbitmq (default: the --config file's events.sink)")
	fs.StringVar(&e.URL, "events-url", "", "the webhook's URL, nats://host:4222 or amqp://user:pass@host:5672/ (default: events.url)")
	secretVar(fs, &e.Secret, "events-secret", "", "webhook: HMAC-SHA256 secret of the X-Erpsync-Timestamp and X-Erpsync-Signature headers (default: events.secret or events.secret_file; never logged); a webhook without one is refused unless unsigned")
	fs.BoolVar(&e.Unsigned, "events-unsigned", false, "webhook: send the POSTs unsigned, without a secret (default: events.unsigned)")
	fs.StringVar(&e.Subject, "events-subject", "", "nats: the subject prefix; each event goes to <subject>.<entity> (default: events.subject, else erpsync.events)")
	fs.StringVar(&e.Exchange, "events-exchange", "", "rabbitmq: the exchange, a durable topic exchange declared when missing; routing key: the entity (default: events.exchange, else erpsync)")
}

// redact tells the redactor of fs's output the secret, which may have
// come from the file rather than a flag.
func (e *eventSettings) redact(fs *flag.FlagSet) {
	redact(fs, e.Secret)
}

// fill sets what the flags left unset from the config file's events
// block, then the defaults, and checks the result.
func (e *eventSettings) fill(f *entity.File) error {
	where := "--events-secret"
	if f != nil {
		if ev := f.Events; ev != nil {
			if e.Sink == "" || e.Sink == ev.Sink {
				where = fmt.Sprintf("%s:%d: events", f.Path, ev.Line)
			}
			e.Unsigned = e.Unsigned || ev.Unsigned
			e.Sink = orString(e.Sink, ev.Sink)
			e.URL = orString(e.URL, ev.URL)
			e.Subject = orString(e.Subject, ev.Subject)
			e.Exchange = orString(e.Exchange, ev.Exchange)
			if e.Secret == "" && ev.SecretFile != "" {
				s, err := secret.ReadFile(ev.SecretFile)
				if err != nil {
					return usageError{fmt.Errorf("%s:%d: events: secret_file: %w", f.Path, ev.Line, err)}
				}
				e.Secret = s
			}
			e.Secret = orString(e.Secret, ev.Secret)
		}
	}
	e.Subject = orString(e.Subject, "erpsync.events")
	e.Exchange = orString(e.Exchange, "erpsync")
	switch e.Sink {
	case entity.SinkWebhook:
		if u, err := url.Parse(e.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usageError{fmt.Errorf("--events-url %q: a webhook wants an http:// or https:// URL", erpHost(e.URL))}
		}
		if e.Secret == "" && !e.Unsigned {
			return usageError{fmt.Errorf("%s: a webhook without a secret: give secret_file (or --events-secret-file), or unsigned: true (--events-unsigned) to send unsigned POSTs", where)}
		}
	case entity.SinkNATS, entity.SinkRabbitMQ:
		if e.URL == "" {
			return usageError{fmt.Errorf("--events-url: the %s sink wants the server's URL", e.Sink)}
		}
	case "":
		return usageError{errNoSink}
	default:
		return usageError{fmt.Errorf("--events-sink %q: want webhook, nats or rabbitmq", e.Sink)}
	}
	return nil
}

// errNoSink is fill's error when neither the flags nor the file name a
// sink: schedule then runs no relay.
var errNoSink = errors.New("--events-sink: no sink (give --events-sink and --events-url, or --config with an events: block)")

// newRelay is the relay of cfg over d's outbox and locks, publishing to
// om.
func newRelay(cfg relay.Config, d *deps, sink relay.Sink, om *metrics.Outbox, log zerolog.Logger) (*relay.Relay, error) {
	return relay.New(cfg, d.store.Outbox(), sink, d.locks, om, log), nil
}

func orString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// sink connects to the sink; a failure is exit 2.
func (e *eventSettings) sink(ctx context.Context) (relay.Sink, error) {
	switch e.Sink {
	case entity.SinkNATS:
		s, err := relay.NewNATS(ctx, e.URL, e.Subject)
		if err != nil {
			return nil, depError{err}
		}
		return s, nil
	case entity.SinkRabbitMQ:
		s, err := relay.NewRabbitMQ(e.URL, e.Exchange)
		if err != nil {
			return nil, depError{err}
		}
		return s, nil
	}
	s, err := relay.NewWebhook(e.URL, relay.WebhookOptions{Secret: []byte(e.Secret), Unsigned: e.Unsigned})
	if err != nil {
		return nil, usageError{err}
	}
	return s, nil
}

func cmdRelay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var s settings
	var ev eventSettings
	var cfg relay.Config
	var httpAddr string
	fs := newFlagSet("erpsync relay", stderr)
	s.databaseFlags(fs)
	s.redisFlags(fs)
	ev.flags(fs)
	fs.StringVar(&s.ConfigFile, "config", "", "a config file whose events: block says where to deliver (docs/events.md), and whose database: block names the database; the flags win")
	fs.BoolVar(&cfg.Once, "once", false, "one pass: deliver until nothing is pending, then exit (a failed delivery: exit 1, the events left pending)")
	intVar(fs, &cfg.BatchSize, "batch-size", 100, 1, 10000, "events per delivery (one webhook POST)")
	durationVar(fs, &cfg.Poll, "poll", time.Second, time.Millisecond, "", "wait between looks at an empty outbox (PostgreSQL: a notification of new events ends it at once)")
	durationVar(fs, &cfg.LockTTL, "lock-ttl", 30*time.Second, 10*time.Millisecond, "", "lease of the relay lock (renewed while held); its fencing token guards every mark")
	durationVar(fs, &cfg.Grace, "grace", 10*time.Second, time.Millisecond, "", "after SIGTERM/SIGINT, how long the batch in hand may still be delivered and marked")
	durationVar(fs, &cfg.Retention, "events-retention", 7*24*time.Hour, time.Minute, "", "delivered events older than this are pruned")
	durationVar(fs, &cfg.MaxBackoff, "max-backoff", 30*time.Second, time.Millisecond, "", "longest wait before retrying a failed delivery (doubling from 200ms; a Retry-After within it is honoured)")
	fs.StringVar(&httpAddr, "http-addr", ":9091", "serve /metrics, /healthz and /readyz here (empty: off)")
	s.logFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	log, err := newLogger(&s, stderr)
	if err != nil {
		return err
	}
	f, err := loadConfig(s.ConfigFile)
	if err != nil {
		return err
	}
	if f != nil {
		if err := s.applyFileDatabase(fs, f); err != nil {
			return err
		}
	}
	if err := ev.fill(f); err != nil {
		return err
	}
	ev.redact(fs)
	log = log.With().Str("component", "relay").Str("sink", ev.Sink).Logger()
	ctx, d, done, err := openRelay(ctx, &s, !cfg.Once, log)
	if err != nil {
		return err
	}
	defer done()
	sink, err := ev.sink(ctx)
	if err != nil {
		return err
	}
	defer sink.Close()
	m := metrics.New()
	om := metrics.NewOutbox(m)
	stopOps, err := serveOps(ctx, httpAddr, m, d, log)
	if err != nil {
		return err
	}
	defer stopOps()
	r, err := newRelay(cfg, d, sink, om, log)
	if err != nil {
		return err
	}
	log.Info().Bool("once", cfg.Once).Msg("relay started")
	err = r.Run(ctx)
	switch {
	case errors.Is(err, relay.ErrSkipped):
		// Logged and counted by the relay; the line says so to a script
		// too, which would otherwise take the silence for an empty outbox.
		left := "the pending ones left to it"
		if st, serr := d.store.Outbox().Stats(ctx); serr == nil {
			left = pendingLeft(st.Pending())
		}
		fmt.Fprintf(stdout, "relay: skipped: another relay holds the lock (%s); delivered 0 events; %s\n", relay.LockKey, left)
		return nil
	case err != nil:
		return err
	}
	log.Info().Int64("delivered", r.Delivered()).Msg("relay stopped")
	if cfg.Once {
		fmt.Fprintf(stdout, "relay: delivered %d events; none left pending\n", r.Delivered())
	}
	return nil
}

// pendingLeft says how many events a relay --once left pending.
func pendingLeft(n int64) string {
	if n == 0 {
		return "none left pending"
	}
	return fmt.Sprintf("%d left pending", n)
}

// loadConfig reads the --config file path for a command that takes no
// entities from it (relay, and schedule's events block): nil when path is
// empty; a file that cannot be used is a usage error.
func loadConfig(path string) (*entity.File, error) {
	if path == "" {
		return nil, nil
	}
	f, err := entity.Load(path)
	if err != nil {
		return nil, usageError{err}
	}
	return f, nil
}

// openRelay ties ctx to SIGTERM and SIGINT and connects the database and the
// locks' Redis (see open): the relay needs no ERP. With waitRedis, Redis
// that does not answer is logged and waited for: the relay retries its
// lock with backoff until it answers (relay.Config.Once false), as it
// does when Redis goes away later, rather than exit.
func openRelay(ctx context.Context, s *settings, waitRedis bool, log zerolog.Logger) (_ context.Context, _ *deps, done func(), _ error) {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	d := &deps{}
	st, err := s.openStoreOf(cctx, nil)
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	d.store = st
	d.rdb, d.locks, d.closers, err = connectRedis(cctx, s, &lock.Options{Prefix: s.LockPrefix})
	var down depError
	switch {
	case err != nil && waitRedis && errors.As(err, &down) && d.locks != nil:
		log.Warn().Err(err).Msg("relay lock service unavailable at start; waiting for it")
	case err != nil:
		d.Close()
		stop()
		return nil, nil, nil, err
	}
	return ctx, d, func() { d.Close(); stop() }, nil
}

func cmdEvents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var s settings
	fs := newFlagSet("erpsync events", stderr)
	s.databaseFlags(fs)
	s.entityFlags(fs)
	s.logFlags(fs)
	if err := s.parseEntities(fs, args); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := s.openStoreOf(cctx, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	stats, err := st.Outbox().Stats(cctx)
	if err != nil {
		return err
	}
	if len(s.Entities) > 0 {
		stats.Entities = slices.DeleteFunc(stats.Entities, func(e outbox.EntityStats) bool { return !slices.Contains(s.Entities, e.Entity) })
		if len(stats.Entities) == 0 {
			fmt.Fprintf(stdout, "the outbox holds no events of %s\n", strings.Join(s.Entities, ", "))
			return nil
		}
	}
	if len(stats.Entities) == 0 {
		fmt.Fprintln(stdout, "the outbox is empty")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENTITY\tPENDING\tDELIVERED\tOLDEST PENDING")
	var delivered int64
	for _, e := range stats.Entities {
		age := "-"
		if !e.OldestPending.IsZero() {
			age = max(stats.Now.Sub(e.OldestPending), 0).Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", e.Entity, e.Pending, e.Delivered, age)
		delivered += e.Delivered
	}
	age := "-"
	if stats.Pending() > 0 {
		age = stats.OldestPendingAge().Round(time.Millisecond).String()
	}
	fmt.Fprintf(tw, "(all)\t%d\t%d\t%s\n", stats.Pending(), delivered, age)
	return tw.Flush()
}
