package guarantee

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/webhook"
)

var flagEventsFeeds = flag.Int("guarantee.events-feeds", 8, "feeds TestEventsGuarantee generates")

// Sinks an events feed delivers to.
const (
	sinkWebhook  = "webhook"
	sinkNATS     = "nats"
	sinkRabbitMQ = "rabbitmq"
)

// eventsSpec is how the change events of a feed reach its consumer.
type eventsSpec struct {
	Sink   string // sinkWebhook, sinkNATS or sinkRabbitMQ
	Relays int    // `erpsync relay` processes started at once (1 or 2)
	// KillAt: the relay that delivers the KillAt-th webhook POST (before
	// its answer) or broker message (as a consumer reads it) is killed
	// with SIGKILL, and another one started; 0: none is.
	KillAt int
	Batch  int // --batch-size
	// Faults are the sink's own (sinkfaults_test.go).
	Faults sinkFaults
	// Replays: a writer of the test replays rows through the store's
	// upsert while the feed runs, writes that must record nothing;
	// InPlace: how many records the ERP changes at their version after
	// the waves, which a reconcile repairs with an event each
	// (events_writes_test.go).
	Replays bool
	InPlace int
}

func (ev *eventsSpec) String() string {
	s := fmt.Sprintf("change events to a %s, %d relay(s) at once, batch %d", ev.Sink, ev.Relays, ev.Batch)
	if ev.KillAt > 0 {
		unit := "POST"
		if ev.Sink != sinkWebhook {
			unit = "message"
		}
		s += fmt.Sprintf(", the delivering relay SIGKILLed at %s %d", unit, ev.KillAt)
	}
	if ev.Replays {
		s += ", rows replayed through the upsert (writes that change nothing, stale and fenced ones)"
	}
	if ev.InPlace > 0 {
		s += fmt.Sprintf(", %d records changed at their version after the waves", ev.InPlace)
	}
	return s + ev.Faults.String()
}

// genEvents is the events of seed's feed: a webhook in half the feeds,
// NATS or RabbitMQ in a quarter each (seeds 2 and 7 of every 8 NATS, 3 and
// 6 RabbitMQ: each with one relay and with two), one relay or two at once,
// and a relay killed mid-delivery in three feeds of four.
func genEvents(seed uint64) *eventsSpec {
	sink := sinkWebhook
	switch {
	case seed%8 == 3 || seed%8 == 6:
		sink = sinkRabbitMQ
	case seed%4 >= 2:
		sink = sinkNATS
	}
	return genEventsTo(seed, sink)
}

// genEventsTo is genEvents with the sink given.
func genEventsTo(seed uint64, sink string) *eventsSpec {
	r := rand.New(rand.NewPCG(seed, 0xe7e175))
	ev := &eventsSpec{Sink: sink, Relays: 1 + int(seed+1)%2, Batch: 1 + r.IntN(20)}
	if seed%4 != 1 {
		ev.KillAt = 1 + r.IntN(4)
		if ev.Sink != sinkWebhook {
			ev.KillAt = 1 + r.IntN(15)
		}
	}
	genSinkFaults(seed, ev)
	return ev
}

// TestEventsGuarantee runs feeds of the contracts with `events: true`
// (more records and executions than the typed sweep's), whose change
// events relays deliver while the executions overlap: what the sink
// received must be exactly the changes the rows went through.
func TestEventsGuarantee(t *testing.T) {
	sweep(t, newTypedPool(t, parallelism()), *flagEventsFeeds, func(seed uint64) *scenario {
		sc := typedFeed(seed, &typedSpec{}, opts{MaxRecords: 24, MaxWaves: 2, MaxExecs: 4})
		sc.Typed.Events = genEvents(seed)
		genLives(seed, sc)
		genEventWrites(seed, sc)
		return sc
	})
}

// genLives draws, from a generator of its own (so that every other choice
// of the feed stays that of its seed), whether seed's events feed has
// records that go through a change of theirs again after the waves: ones
// that leave the ERP and come back unchanged, twice (Relive), and ones
// recreated at a lower version that climb back to the version they were
// deleted at (Climb); each in about two feeds of three. Such a feed's
// settlings end with a reconcile, which soft-deletes what left.
func genLives(seed uint64, sc *scenario) {
	r := rand.New(rand.NewPCG(seed, 0x11fe))
	if r.IntN(3) > 0 {
		sc.Relive = 1 + r.IntN(2)
	}
	if r.IntN(3) > 0 {
		sc.Climb = 1 + r.IntN(2)
	}
	sc.Reconcile = sc.Reconcile || sc.Relive > 0 || sc.Climb > 0
}

// sink is the consumer of an events feed's change events: a webhook in
// this process, a NATS JetStream stream or a RabbitMQ queue of its own,
// the relays that deliver to it, and what it received. The rows' own
// history is kept by triggers on contracts, in the write's transaction
// (changeTriggers).
type sink struct {
	f      *feed
	ev     *eventsSpec
	secret []byte
	srv    *httptest.Server // the webhook
	// subject is the NATS subject the relays publish under (each relay
	// under subject.<relay>), stream the feed's stream of it.
	subject  string
	nc       *nats.Conn
	stream   jetstream.Stream
	consumer jetstream.MessagesContext
	consumed chan struct{}
	gated    chan struct{} // closed by finish: gateCommits stops
	gating   sync.WaitGroup
	relayN   atomic.Int64
	wg       sync.WaitGroup // the relays' waiters

	// exchange is the feed's RabbitMQ exchange, queue the durable queue
	// bound to it, read after the final drain; each relay publishes to an
	// exchange of its own (exchange.<relay>, in exchanges) bound to it, so
	// that the sink knows who delivered. A queue of amqpConn is read while
	// the feed runs, to kill a relay.
	exchange, queue string
	exchanges       []string
	amqpConn        *amqp.Connection
	amqpMu          sync.Mutex // amqpCh
	amqpCh          *amqp.Channel

	mu       sync.Mutex
	got      []delivery                // every event received, in order
	relays   map[string]*proctest.Proc // running relays by id
	ended    map[string]proctest.Result
	stopping bool
	posts    int
	killed   bool
	faults   []string   // relay faults: kills and pauses
	faulty   faultState // the sink's own faults
	refused  []string   // what the webhook refused, and broker messages unlike an event's

	replaying sync.WaitGroup
	replayed  [4]int          // replayWrites' writes, by kind
	inPlace   map[string]bool // records the ERP changed at their version
}

// delivery is one event as the sink received it, from relay: its body
// and, from a broker, the message's id (RabbitMQ's message_id, NATS's
// Nats-Msg-Id header).
type delivery struct {
	relay string
	raw   []byte
	msgID string
}

// startSink starts the consumer and the relays of a feed whose entity
// records change events; nil in other feeds.
func (f *feed) startSink() *sink {
	if f.sc.Typed == nil || f.sc.Typed.Events == nil {
		return nil
	}
	s := &sink{f: f, ev: f.sc.Typed.Events, secret: []byte(testenv.RandomName("secret-")),
		relays: map[string]*proctest.Proc{}, ended: map[string]proctest.Result{}, inPlace: map[string]bool{}}
	db := f.w.st.DB()
	pg := f.w.postgres()
	history := "CREATE TABLE IF NOT EXISTS guarantee_row_changes (seq BIGINT AUTO_INCREMENT PRIMARY KEY, erp_id VARCHAR(100) NOT NULL, op VARCHAR(8) NOT NULL, erp_version BIGINT NOT NULL, data LONGTEXT NOT NULL)"
	if pg {
		history = "CREATE TABLE IF NOT EXISTS guarantee_row_changes (seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, erp_id VARCHAR(100) NOT NULL, op VARCHAR(8) NOT NULL, erp_version BIGINT NOT NULL, data TEXT NOT NULL)"
	}
	for _, q := range append([]string{
		history,
		"DELETE FROM guarantee_row_changes",
		"CREATE TABLE IF NOT EXISTS guarantee_gate (id INT PRIMARY KEY, hits BIGINT NOT NULL)",
		"DELETE FROM guarantee_gate",
		"INSERT INTO guarantee_gate VALUES (1, 0)",
		"CREATE TABLE IF NOT EXISTS guarantee_gate_ids (id INT PRIMARY KEY, lo BIGINT NOT NULL, hi BIGINT NOT NULL)",
		"DELETE FROM guarantee_gate_ids",
		"INSERT INTO guarantee_gate_ids VALUES (1, 0, -1)",
	}, changeTriggers(pg)...) {
		if err := db.Exec(q).Error; err != nil {
			f.t.Fatalf("row history: %s: %v", q, err)
		}
	}
	switch s.ev.Sink {
	case sinkWebhook:
		s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	case sinkNATS:
		s.consume()
	case sinkRabbitMQ:
		s.consumeRabbitMQ()
	}
	s.startFaults()
	for range s.ev.Relays {
		s.startRelay()
	}
	s.gated = make(chan struct{})
	s.gating.Add(1)
	go s.gateCommits()
	if s.ev.Replays {
		s.replaying.Add(1)
		go s.replayWrites(s.gated)
	}
	return s
}

// gateCommits holds, for 700 ms of every second until finish, the row of
// guarantee_gate that a trigger on the outbox updates after recording an
// event whose id is one of the next three (guarantee_gate_ids, set before
// each hold): the transaction that recorded it waits there, its
// AUTO_INCREMENT id taken, while others record and commit later ids and
// the relays deliver them. It commits late, below ids delivered already.
func (s *sink) gateCommits() {
	defer s.gating.Done()
	db, err := s.f.w.st.DB().DB()
	if err != nil {
		return
	}
	for {
		if _, err := db.Exec("UPDATE guarantee_gate_ids SET lo = (SELECT COALESCE(MAX(id), 0) + 1 FROM erpsync_events), hi = (SELECT COALESCE(MAX(id), 0) + 3 FROM erpsync_events)"); err == nil {
			if tx, err := db.Begin(); err == nil {
				if _, err := tx.Exec("SELECT hits FROM guarantee_gate WHERE id = 1 FOR UPDATE"); err == nil {
					time.Sleep(700 * time.Millisecond)
				}
				_ = tx.Rollback()
			}
		}
		select {
		case <-s.gated:
			return
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// changeTriggers drop and create the triggers that log every change of a
// row of contracts into guarantee_row_changes, in the transaction that
// makes it: an insert, and an update that changes a column of the entity,
// the version or whether the row is soft-deleted (not a fencing token or a
// quarantine mark alone), with its op and the row's data after it as an
// event carries it. The first three statements drop the triggers. pg
// writes them for PostgreSQL (a trigger runs a function there).
func changeTriggers(pg bool) []string {
	if pg {
		return pgChangeTriggers()
	}
	same := "NEW.erp_version <=> OLD.erp_version AND (NEW.deleted_at IS NULL) = (OLD.deleted_at IS NULL)"
	for _, c := range contractColumns {
		same += fmt.Sprintf(" AND NEW.`%s` <=> OLD.`%s`", c.name, c.name)
	}
	log := func(op string) string {
		return "INSERT INTO guarantee_row_changes (erp_id, op, erp_version, data) VALUES (CONCAT(NEW.region, NEW.`no`), " + op + ", NEW.erp_version, " + eventData(false, "NEW.") + ")"
	}
	return []string{
		"DROP TRIGGER IF EXISTS guarantee_contracts_insert",
		"DROP TRIGGER IF EXISTS guarantee_contracts_update",
		"DROP TRIGGER IF EXISTS guarantee_events_gate",
		"CREATE TRIGGER guarantee_events_gate AFTER INSERT ON erpsync_events FOR EACH ROW " +
			"IF NEW.id BETWEEN (SELECT lo FROM guarantee_gate_ids WHERE id = 1) AND (SELECT hi FROM guarantee_gate_ids WHERE id = 1) THEN " +
			"UPDATE guarantee_gate SET hits = hits + 1 WHERE id = 1; END IF",
		"CREATE TRIGGER guarantee_contracts_insert AFTER INSERT ON contracts FOR EACH ROW " +
			log("IF(NEW.deleted_at IS NULL, 'insert', 'delete')"),
		"CREATE TRIGGER guarantee_contracts_update AFTER UPDATE ON contracts FOR EACH ROW BEGIN IF NOT (" + same + ") THEN " +
			log("CASE WHEN OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL THEN 'delete' "+
				"WHEN OLD.deleted_at IS NOT NULL AND NEW.deleted_at IS NULL THEN 'restore' ELSE 'update' END") + "; END IF; END",
	}
}

// pgChangeTriggers is changeTriggers for PostgreSQL: the same triggers,
// each running a PL/pgSQL function.
func pgChangeTriggers() []string {
	same := "NEW.erp_version IS NOT DISTINCT FROM OLD.erp_version AND (NEW.deleted_at IS NULL) = (OLD.deleted_at IS NULL)"
	for _, c := range contractColumns {
		same += fmt.Sprintf(` AND NEW."%s" IS NOT DISTINCT FROM OLD."%s"`, c.name, c.name)
	}
	function := func(name, body string) string {
		return "CREATE OR REPLACE FUNCTION " + name + "() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN " + body + " RETURN NULL; END $$"
	}
	log := func(op string) string {
		return "INSERT INTO guarantee_row_changes (erp_id, op, erp_version, data) VALUES (CONCAT(NEW.region, NEW.no), " + op + ", NEW.erp_version, " + eventData(true, "NEW.") + ");"
	}
	return []string{
		"DROP TRIGGER IF EXISTS guarantee_contracts_insert ON contracts",
		"DROP TRIGGER IF EXISTS guarantee_contracts_update ON contracts",
		"DROP TRIGGER IF EXISTS guarantee_events_gate ON erpsync_events",
		function("guarantee_events_gate",
			"IF NEW.id BETWEEN (SELECT lo FROM guarantee_gate_ids WHERE id = 1) AND (SELECT hi FROM guarantee_gate_ids WHERE id = 1) THEN "+
				"UPDATE guarantee_gate SET hits = hits + 1 WHERE id = 1; END IF;"),
		"CREATE TRIGGER guarantee_events_gate AFTER INSERT ON erpsync_events FOR EACH ROW EXECUTE FUNCTION guarantee_events_gate()",
		function("guarantee_contracts_insert", log("CASE WHEN NEW.deleted_at IS NULL THEN 'insert' ELSE 'delete' END")),
		"CREATE TRIGGER guarantee_contracts_insert AFTER INSERT ON contracts FOR EACH ROW EXECUTE FUNCTION guarantee_contracts_insert()",
		function("guarantee_contracts_update", log("CASE WHEN OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL THEN 'delete' "+
			"WHEN OLD.deleted_at IS NOT NULL AND NEW.deleted_at IS NULL THEN 'restore' ELSE 'update' END")),
		"CREATE TRIGGER guarantee_contracts_update AFTER UPDATE ON contracts FOR EACH ROW WHEN (NOT (" + same + ")) EXECUTE FUNCTION guarantee_contracts_update()",
	}
}

// contractColumns are the columns of contracts (testdata/events.yaml) and
// the SQL that reads each as a change event carries it, on MySQL (text)
// and on PostgreSQL (pg): decimals and int64 as the database prints them,
// a date YYYY-MM-DD, a datetime RFC 3339 in UTC with milliseconds (%s is
// the column).
var contractColumns = []struct{ name, text, pg string }{
	{"region", "%s", "%s"}, {"no", "CAST(%s AS CHAR)", "CAST(%s AS TEXT)"}, {"customer", "%s", "%s"}, {"plan", "%s", "%s"}, {"status", "%s", "%s"},
	{"starts_at", "CONCAT(LEFT(DATE_FORMAT(%s, '%%Y-%%m-%%dT%%H:%%i:%%s.%%f'), 23), 'Z')", pgRFC3339ms},
	{"ends_at", "CONCAT(LEFT(DATE_FORMAT(%s, '%%Y-%%m-%%dT%%H:%%i:%%s.%%f'), 23), 'Z')", pgRFC3339ms},
	{"signed_on", "DATE_FORMAT(%s, '%%Y-%%m-%%d')", "to_char(%s, 'YYYY-MM-DD')"},
	{"amount", "CAST(%s AS CHAR)", "CAST(%s AS TEXT)"}, {"balance", "CAST(%s AS CHAR)", "CAST(%s AS TEXT)"}, {"serial", "CAST(%s AS CHAR)", "CAST(%s AS TEXT)"},
}

// pgRFC3339ms renders a timestamptz as RFC 3339 in UTC with milliseconds.
const pgRFC3339ms = `to_char(%s AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`

// eventData is the SQL of a JSON object of a row's columns (row is "NEW."
// in a trigger, "" in a query) as a change event's data carries them; pg
// writes it for PostgreSQL.
func eventData(pg bool, row string) string {
	parts := make([]string, 0, len(contractColumns))
	for _, c := range contractColumns {
		if pg {
			parts = append(parts, fmt.Sprintf("'%s', "+c.pg, c.name, row+`"`+c.name+`"`))
			continue
		}
		parts = append(parts, fmt.Sprintf("'%s', "+c.text, c.name, row+"`"+c.name+"`"))
	}
	if pg {
		return "CAST(json_build_object(" + strings.Join(parts, ", ") + ") AS TEXT)"
	}
	return "JSON_OBJECT(" + strings.Join(parts, ", ") + ")"
}

// relayArgs are the arguments of relay id: a short lease and poll, the
// feed's sink (the webhook under a path of the relay's own, NATS under a
// subject of its own, so that the sink knows who delivered) and lock
// service.
func (s *sink) relayArgs(id string, once bool) []string {
	args := []string{"relay", "--lock-ttl", "1s", "--poll", "50ms", "--batch-size", strconv.Itoa(s.ev.Batch),
		"--max-backoff", "500ms", "--grace", "5s", "--http-addr", "", "--log-level", "info"}
	if once {
		args = append(args, "--once")
	}
	switch s.ev.Sink {
	case sinkWebhook:
		args = append(args, "--events-sink", "webhook", "--events-url", s.srv.URL+"/hook/"+id, "--events-secret", string(s.secret))
	case sinkNATS:
		args = append(args, "--events-sink", "nats", "--events-url", testenv.NATSURL(), "--events-subject", s.subject+"."+id)
	case sinkRabbitMQ:
		args = append(args, "--events-sink", "rabbitmq", "--events-url", testenv.AMQPURL(), "--events-exchange", s.relayExchange(id))
	}
	return append(args, s.f.lockFlags()...)
}

// startRelay starts an `erpsync relay` process, unless the feed is
// stopping its relays.
func (s *sink) startRelay() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return
	}
	id := "r" + strconv.FormatInt(s.relayN.Add(1), 10)
	p := s.f.env(id).Start(s.relayArgs(id, false)...)
	s.relays[id] = p
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		res := s.f.wait(p) // one of the running processes: paused now and then in a feed that loses its locks
		s.mu.Lock()
		delete(s.relays, id)
		s.ended[id] = res
		stopping := s.stopping
		s.mu.Unlock()
		if !stopping && faultExit(res) {
			s.startRelay() // a redirect stopped it
		} else if !stopping && res.Code > 0 && strings.Contains(res.Stdout, "lock: redis unavailable") {
			// A relay stops when its lock service fails (a Redlock node
			// that timed out on a loaded machine): another one takes over.
			s.fault("relay " + id + " stopped by its lock service")
			s.startRelay()
		}
	}()
}

// kill kills relay id with SIGKILL mid-delivery and starts another.
func (s *sink) kill(id, at string) {
	s.mu.Lock()
	p := s.relays[id]
	s.mu.Unlock()
	if p == nil || p.Signal(syscall.SIGKILL) != nil {
		return
	}
	p.Wait()
	s.fault(fmt.Sprintf("relay %s SIGKILLed at %s", id, at))
	s.startRelay()
}

// paused notes that p, when it is a relay, was paused past its lease.
func (s *sink) paused(p *proctest.Proc) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, r := range s.relays {
		if r == p {
			s.faults = append(s.faults, "relay "+id+" paused")
		}
	}
}

func (s *sink) fault(what string) {
	s.mu.Lock()
	s.faults = append(s.faults, what)
	s.mu.Unlock()
}

// stallWriters, in an events or documents feed that loses its record
// locks, holds locks on every row of contracts and the gaps between them
// (InnoDB's of SELECT ... FOR UPDATE; on PostgreSQL, which locks no gaps,
// the table in EXCLUSIVE mode: reads go on, writes wait) for 500 ms of
// every second until stop is closed. On PostgreSQL a table lock that is
// not granted within 50 ms is given up for that second: queued behind a
// writer the test has paused, it would hold every later writer behind it
// for the whole pause, which InnoDB's row locks never do. Writers
// of one record that both passed their checks while the row was unchanged
// wait there together, and all but the first write nothing, or a stale
// version: writes that must record no event and write no line.
func (f *feed) stallWriters(stop <-chan struct{}) {
	if f.sink == nil && !f.sc.Typed.Docs {
		return
	}
	db, err := f.w.st.DB().DB()
	if err != nil {
		return
	}
	stall := []string{"SELECT 1 FROM contracts FOR UPDATE"}
	if f.w.postgres() {
		stall = []string{"SET LOCAL lock_timeout = '50ms'", "LOCK TABLE contracts IN EXCLUSIVE MODE"}
	}
	stalled, tries := 0, 0
	for {
		select {
		case <-stop:
			f.t.Logf("writers stalled %d times in %d tries", stalled, tries)
			return
		case <-time.After(500 * time.Millisecond):
		}
		tx, err := db.Begin()
		if err != nil {
			continue
		}
		tries++
		if execAll(tx, stall) == nil {
			stalled++
			time.Sleep(500 * time.Millisecond)
		}
		_ = tx.Rollback()
	}
}

// execAll runs each statement on tx in turn, up to the first that fails.
func execAll(tx *sql.Tx, stmts []string) error {
	for _, q := range stmts {
		if _, err := tx.Exec(q); err != nil {
			return err
		}
	}
	return nil
}

// serve is the webhook: it checks each POST's signature and
// Idempotency-Key, records its events, and kills the relay that sent the
// KillAt-th POST before answering it.
func (s *sink) serve(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/hook/")
	if s.redirected(w, r, id) {
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if err := webhook.Verify(s.secret, r.Header, body, nil); err != nil {
		s.refuse(w, fmt.Sprintf("relay %s: a POST signed %q at %q: %v", id, r.Header.Get(webhook.SignatureHeader), r.Header.Get(webhook.TimestampHeader), err))
		return
	}
	var evs []json.RawMessage
	if err := json.Unmarshal(body, &evs); err != nil || len(evs) == 0 {
		s.refuse(w, fmt.Sprintf("relay %s: a POST that is no array of events (%v): %.200s", id, err, body))
		return
	}
	h := sha256.New()
	for _, raw := range evs {
		var e struct{ ID string }
		_ = json.Unmarshal(raw, &e)
		h.Write([]byte(e.ID + "\n"))
	}
	if got, want := r.Header.Get("Idempotency-Key"), hex.EncodeToString(h.Sum(nil)); got != want {
		s.refuse(w, fmt.Sprintf("relay %s: Idempotency-Key %q, the hash of its event ids is %s", id, got, want))
		return
	}
	s.mu.Lock()
	for _, raw := range evs {
		s.got = append(s.got, delivery{relay: id, raw: raw})
	}
	s.posts++
	n := s.posts
	// The KillAt-th POST kills its relay, one of the waves' relays: a feed
	// with few events may reach it only in the final drain, which must
	// deliver them all.
	kill := !s.killed && n == s.ev.KillAt && s.relays[id] != nil && !s.stopping
	s.killed = s.killed || kill
	s.mu.Unlock()
	if kill {
		s.kill(id, fmt.Sprintf("POST %d, before its answer", n))
		http.Error(w, "killed", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *sink) refuse(w http.ResponseWriter, why string) {
	s.mu.Lock()
	s.refused = append(s.refused, "the webhook refused "+why)
	s.mu.Unlock()
	http.Error(w, why, http.StatusBadRequest)
}

// consume makes the feed's stream and reads it as a consumer does, in
// order, until finish stops it; it kills the relay that published the
// KillAt-th message.
func (s *sink) consume() {
	f := s.f
	ctx := context.Background()
	name := testenv.RandomName("guarantee_")
	s.subject = strings.ReplaceAll(name, "_", ".")
	var err error
	if s.nc, err = nats.Connect(testenv.NATSURL()); err != nil {
		f.t.Fatalf("nats: %v", err)
	}
	js, err := jetstream.New(s.nc)
	if err == nil {
		s.stream, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: strings.ToUpper(name), Subjects: []string{s.subject + ".>"}, Storage: jetstream.MemoryStorage})
	}
	var cons jetstream.Consumer
	if err == nil {
		cons, err = s.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	}
	if err == nil {
		s.consumer, err = cons.Messages()
	}
	if err != nil {
		f.t.Fatalf("nats stream of %s: %v", s.subject, err)
	}
	s.consumed = make(chan struct{})
	go func() {
		defer close(s.consumed)
		for n := 1; ; n++ {
			m, err := s.consumer.Next()
			if err != nil {
				return // stopped
			}
			relay, _, _ := strings.Cut(strings.TrimPrefix(m.Subject(), s.subject+"."), ".")
			s.mu.Lock()
			s.got = append(s.got, delivery{relay: relay, raw: m.Data(), msgID: m.Headers().Get("Nats-Msg-Id")})
			kill := !s.killed && n == s.ev.KillAt
			s.killed = s.killed || kill
			s.mu.Unlock()
			if kill {
				s.kill(relay, fmt.Sprintf("message %d, as it was read", n))
			}
		}
	}()
}

// once runs `relay --once` beside the running relays (which mostly hold
// the lock: it skips), at a settling.
func (s *sink) once(when string) {
	if s == nil {
		return
	}
	id := s.f.newExec() + "-once"
	if res := s.f.env(id).Run(context.Background(), s.relayArgs(id, true)...); res.Code != 0 && !faultExit(res) {
		s.f.t.Errorf("%s: relay --once exit %d: %s", when, res.Code, res.Out())
	}
	s.settled(when)
}

// finish stops the relays with SIGTERM, drains the outbox with `relay
// --once`, and checks what the sink received against the rows' history.
func (s *sink) finish() {
	if s == nil {
		return
	}
	f := s.f
	defer s.close()
	s.endFaults()
	close(s.gated)
	s.gating.Wait()
	s.replaying.Wait()
	s.mu.Lock()
	s.stopping = true
	for _, p := range s.relays {
		_ = p.Signal(syscall.SIGCONT) // in case a pause is not over
		_ = p.Signal(syscall.SIGTERM)
	}
	s.mu.Unlock()
	s.wg.Wait()
	var outs []string
	for _, id := range sortedKeys(s.ended) {
		res := s.ended[id]
		outs = append(outs, res.Stdout)
		if res.Code != 0 && res.Code != -1 && !strings.Contains(res.Stdout, "lock: redis unavailable") && !faultExit(res) {
			f.t.Errorf("relay %s exit %d: %s", id, res.Code, res.Stdout)
		}
	}
	// The final drain: a relay that is not skipped (a killed relay's lease
	// may still run) must leave nothing undelivered.
	for attempt := 0; ; attempt++ {
		id := f.newExec() + "-drain"
		res := f.env(id).Run(context.Background(), s.relayArgs(id, true)...)
		if res.Code != 0 {
			f.t.Errorf("the final relay --once exit %d: %s", res.Code, res.Out())
			return
		}
		if !strings.Contains(res.Out(), "relay skipped") {
			break
		}
		if attempt == 20 {
			f.t.Errorf("the final relay --once was skipped 20 times: %s", res.Out())
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	s.logFaulted(outs)
	switch s.ev.Sink {
	case sinkNATS:
		s.readAll()
	case sinkRabbitMQ:
		s.readQueue()
	}
	s.check(outs)
}

// readAll waits until the NATS consumer has read every message of the
// stream, and stops it.
func (s *sink) readAll() {
	info, err := s.stream.Info(context.Background())
	if err != nil {
		s.f.t.Errorf("nats stream info: %v", err)
		return
	}
	read := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.got)
	}
	if !proctest.Eventually(20*time.Second, func() bool { return uint64(read()) >= info.State.Msgs }) {
		s.f.t.Errorf("the consumer read %d messages of the stream's %d", read(), info.State.Msgs)
	}
	s.consumer.Stop()
	<-s.consumed
}

// consumeRabbitMQ declares the feed's exchange (a durable topic exchange)
// and its durable queue, bound to it on the entity's routing key, which
// readQueue reads after the final drain; and, to kill the relay that
// published the KillAt-th message as a consumer reads it, consumes a
// queue of this connection bound alike while the feed runs.
func (s *sink) consumeRabbitMQ() {
	f := s.f
	name := testenv.RandomName("guarantee_")
	s.exchange, s.queue = name, name
	var err error
	if s.amqpConn, err = amqp.Dial(testenv.AMQPURL()); err != nil {
		f.t.Fatalf("rabbitmq: %v", err)
	}
	var watch *amqp.Channel
	var w amqp.Queue
	var msgs <-chan amqp.Delivery
	s.amqpCh, err = s.amqpConn.Channel()
	if err == nil {
		err = s.amqpCh.ExchangeDeclare(name, amqp.ExchangeTopic, true, false, false, false, nil)
	}
	if err == nil {
		_, err = s.amqpCh.QueueDeclare(name, true, false, false, false, nil)
	}
	if err == nil {
		err = s.amqpCh.QueueBind(name, "contracts", name, false, nil)
	}
	if err == nil {
		watch, err = s.amqpConn.Channel()
	}
	if err == nil {
		w, err = watch.QueueDeclare("", false, true, true, false, nil)
	}
	if err == nil {
		err = watch.QueueBind(w.Name, "contracts", name, false, nil)
	}
	if err == nil {
		msgs, err = watch.Consume(w.Name, "", true, true, false, false, nil)
	}
	if err != nil {
		s.closeRabbitMQ()
		f.t.Fatalf("rabbitmq exchange and queue %s: %v", name, err)
	}
	s.consumed = make(chan struct{})
	go func() {
		defer close(s.consumed)
		n := 0
		for m := range msgs { // closed with the connection
			n++
			s.mu.Lock()
			kill := !s.killed && n == s.ev.KillAt
			s.killed = s.killed || kill
			s.mu.Unlock()
			if kill {
				s.kill(strings.TrimPrefix(m.Exchange, s.exchange+"."), fmt.Sprintf("message %d, as it was read", n))
			}
		}
	}()
}

// relayExchange declares the exchange relay id publishes to, as the relay
// declares it, bound to the feed's exchange: a message keeps it as the
// exchange it was published to, so the sink knows who delivered it.
func (s *sink) relayExchange(id string) string {
	x := s.exchange + "." + id
	s.amqpMu.Lock()
	defer s.amqpMu.Unlock()
	err := s.amqpCh.ExchangeDeclare(x, amqp.ExchangeTopic, true, false, false, false, nil)
	if err == nil {
		err = s.bindRelay(x)
	}
	if err != nil {
		s.f.t.Errorf("rabbitmq exchange %s of relay %s: %v", x, id, err)
	}
	s.exchanges = append(s.exchanges, x)
	return x
}

// readQueue reads every message of the feed's durable queue, after the
// final drain, as a consumer does: its message_id and body, from the
// relay whose exchange it was published to. A message that is not a
// persistent JSON one on the entity's routing key is wrong.
func (s *sink) readQueue() {
	var got []delivery
	var wrong []string
	s.amqpMu.Lock()
	for {
		m, ok, err := s.amqpCh.Get(s.queue, true)
		if err != nil {
			s.f.t.Errorf("read rabbitmq queue %s: %v", s.queue, err)
			break
		}
		if !ok {
			break
		}
		relay := strings.TrimPrefix(m.Exchange, s.exchange+".")
		got = append(got, delivery{relay: relay, raw: m.Body, msgID: m.MessageId})
		if m.DeliveryMode != amqp.Persistent || m.ContentType != "application/json" || m.RoutingKey != "contracts" {
			wrong = append(wrong, fmt.Sprintf("a message from relay %s: delivery mode %d, content type %q, routing key %q, want a persistent application/json one on contracts",
				relay, m.DeliveryMode, m.ContentType, m.RoutingKey))
		}
	}
	s.amqpMu.Unlock()
	s.mu.Lock()
	s.got = append(s.got, got...)
	s.refused = append(s.refused, wrong...)
	s.mu.Unlock()
}

// closeRabbitMQ deletes the feed's queue and exchanges, and closes the
// connection (which stops the watch consumer).
func (s *sink) closeRabbitMQ() {
	if s.amqpConn == nil {
		return
	}
	s.amqpMu.Lock()
	if ch, err := s.amqpConn.Channel(); err == nil {
		_, _ = ch.QueueDelete(s.queue, false, false, false)
		for _, x := range append(s.exchanges, s.exchange) {
			_ = ch.ExchangeDelete(x, false, false)
		}
	}
	s.amqpMu.Unlock()
	s.amqpConn.Close()
	if s.consumed != nil {
		<-s.consumed
	}
}

// close stops the sink and drops the triggers.
func (s *sink) close() {
	if s.srv != nil {
		s.srv.Close()
	}
	if s.nc != nil {
		if s.consumer != nil {
			s.consumer.Stop()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if s.stream != nil {
			_ = s.stream.Purge(ctx)
			if js, err := jetstream.New(s.nc); err == nil {
				_ = js.DeleteStream(ctx, s.stream.CachedInfo().Config.Name)
			}
		}
		s.nc.Close()
	}
	s.closeRabbitMQ()
	for _, q := range changeTriggers(s.f.w.postgres())[:3] {
		_ = s.f.w.st.DB().Exec(q).Error
	}
}

// change is one change of a row, as its trigger logged it or an event
// carries it.
type change struct {
	id      string // the event's id ("" for the row's)
	op      string
	version int64
	data    map[string]any
}

func (c change) String() string {
	b, _ := json.Marshal(c.data)
	return fmt.Sprintf("%s v%d %s", c.op, c.version, b)
}

// check checks, after the final drain, what the sink received: every
// event decodes, carries the id its identity computes, and one id always
// the same body; duplicates only after a relay fault; the outbox holds
// exactly the events received, none undelivered; and, per key, the
// events without duplicates, in the order received, are the changes the
// row went through, one for one (op, version, every column), with
// versions that only go up (a delete at the version it deletes, a restore
// lower only for a record the ERP recreated lower), each a version the ERP
// made of the record with its data, the last one the row as it is.
func (s *sink) check(outs []string) {
	f := s.f
	s.mu.Lock()
	got, faults, refused := s.got, s.faults, s.refused
	s.mu.Unlock()
	lost := 0
	for _, out := range outs {
		lost += strings.Count(out, "relay lock lost")
	}
	if lost > 0 {
		faults = append(faults, fmt.Sprintf("relays lost their lock %d time(s)", lost))
	}
	var bad []string
	add := func(format string, args ...any) {
		if len(bad) < 12 {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	for _, r := range refused {
		add("%s", r)
	}
	raws := map[string][]byte{}
	events := map[string][]change{} // erp_id -> events, first deliveries in order
	dups := 0
	for _, d := range got {
		var b outbox.Body
		dec := json.NewDecoder(bytes.NewReader(d.raw))
		dec.UseNumber()
		if err := dec.Decode(&b); err != nil {
			add("an event from relay %s does not decode: %v: %s", d.relay, err, d.raw)
			continue
		}
		if s.ev.Sink != sinkWebhook && d.msgID != b.ID {
			add("a message from relay %s has message id %q (message_id, Nats-Msg-Id), its event's id is %s", d.relay, d.msgID, b.ID)
		}
		if prev, ok := raws[b.ID]; ok {
			dups++
			if !bytes.Equal(prev, d.raw) {
				add("two bodies of event %s: %s and %s", b.ID, prev, d.raw)
			}
			continue
		}
		raws[b.ID] = d.raw
		erpID, err := eventKey(b)
		if err != nil {
			add("event %s: %v", d.raw, err)
			continue
		}
		events[erpID] = append(events[erpID], change{id: b.ID, op: b.Op, version: b.Version, data: b.Data})
	}
	if dups > 0 && len(faults) == 0 {
		add("%d events delivered twice, and no relay was killed, paused or lost its lock", dups)
	}
	ops := map[string]int{}
	for _, evs := range events {
		for _, e := range evs {
			ops[e.op]++
		}
	}
	f.t.Logf("events: %d received, %d distinct (%v), %d duplicates; relay faults: %s", len(got), len(raws), ops, dups, tally(faults))
	if s.ev.Replays {
		f.t.Logf("events: %s", s.replays())
	}
	s.checkOutbox(raws, add)
	history, err := rowHistory(f.w)
	if err != nil {
		f.t.Errorf("read the rows' history: %v", err)
		return
	}
	rows, err := finalRows(f.w)
	if err != nil {
		f.t.Errorf("read contracts: %v", err)
		return
	}
	for _, erpID := range sortedKeys(union(events, history)) {
		evs, hist := events[erpID], history[erpID]
		for i := range max(len(evs), len(hist)) {
			switch {
			case i >= len(evs):
				add("%s went through %s (change %d of %d), and no event says so", erpID, hist[i], i+1, len(hist))
			case i >= len(hist):
				add("%s: event %s is no change of the row (it went through %d)", erpID, evs[i], len(hist))
			case evs[i].op != hist[i].op || evs[i].version != hist[i].version || !reflect.DeepEqual(evs[i].data, hist[i].data):
				add("%s: event %d is %s, the row's change %d was %s", erpID, i+1, evs[i], i+1, hist[i])
			default:
				continue
			}
			break
		}
		s.checkOrder(erpID, evs, add)
		if r, ok := rows[erpID]; ok && len(evs) > 0 {
			last := evs[len(evs)-1]
			if last.version != r.version || !reflect.DeepEqual(last.data, r.data) || (last.op == outbox.OpDelete) != (r.op == outbox.OpDelete) {
				add("%s: the last event is %s, the row is %s", erpID, last, r)
			}
		} else if ok {
			add("%s: a row (%s) and no event", erpID, r)
		}
	}
	s.consumeBySeq(got, rows, add)
	if len(bad) > 0 {
		f.t.Errorf("the change events the %s received are not the rows' changes: %s", s.ev.Sink, strings.Join(bad, "; "))
	}
}

// checkOrder checks the events of one key: an insert first and never
// again, an update above the version before it (or at it, with other
// data, for a record the ERP changed at its version), a delete at the version
// it deletes, a restore after a delete (below it only for a record the ERP
// recreated at a lower version), each a version the ERP made of the record
// with the data it carries.
func (s *sink) checkOrder(erpID string, evs []change, add func(string, ...any)) {
	var prev change
	for i, e := range evs {
		var wrong bool
		switch e.op {
		case outbox.OpInsert:
			wrong = i > 0
		case outbox.OpUpdate:
			wrong = i == 0 || prev.op == outbox.OpDelete || e.version <= prev.version && !s.sameVersionUpdate(erpID, e, prev)
		case outbox.OpDelete:
			wrong = i == 0 || prev.op == outbox.OpDelete || e.version != prev.version
		case outbox.OpRestore:
			wrong = i == 0 || prev.op != outbox.OpDelete || e.version < prev.version && !s.f.erp.wasReborn(erpID)
		default:
			wrong = true
		}
		if wrong {
			add("%s: event %d, %s, after %s", erpID, i+1, e, prev)
		}
		made := false
		for _, r := range s.f.erp.made(erpID, e.version) {
			made = made || reflect.DeepEqual(contractData(r), e.data)
		}
		if !made {
			add("%s: event %s carries no version the ERP made", erpID, e)
		}
		prev = e
	}
}

// contractData is the data of a change event of the contract of record r,
// as erpmock.ContractOf serves it and contracts stores it.
func contractData(r record) map[string]any {
	region, no, _ := erpmock.SplitContractID(r.ID)
	d := map[string]any{
		"region": region, "no": strconv.FormatInt(no, 10), "customer": r.Member, "plan": r.Product, "status": r.Status,
		"starts_at": outbox.FormatTime(r.Starts), "ends_at": nil, "signed_on": outbox.FormatDate(r.Starts.UTC()),
		"amount": erpmock.ContractAmount(r.Version), "balance": erpmock.ContractBalance(r.Version),
		"serial": strconv.FormatInt(erpmock.ContractSerial(r.Version), 10),
	}
	if r.Ends != nil {
		d["ends_at"] = outbox.FormatTime(*r.Ends)
	}
	return d
}

// eventKey is the erp_id of an event of contracts: its key's region and
// no (a string), which its data must repeat.
func eventKey(b outbox.Body) (string, error) {
	region, ok1 := b.Key["region"].(string)
	no, ok2 := b.Key["no"].(string)
	n, err := strconv.ParseInt(no, 10, 64)
	if b.Entity != "contracts" || !ok1 || !ok2 || err != nil || len(b.Key) != 2 {
		return "", fmt.Errorf("entity %q key %v: want the key (region, no) of contracts, no an int64 as a string", b.Entity, b.Key)
	}
	if b.Data["region"] != region || b.Data["no"] != no {
		return "", fmt.Errorf("key %v, data %v", b.Key, b.Data)
	}
	// Its id is checked against its identity in checkOutbox, where the
	// outbox row holds the key's life, which the body does not carry.
	return erpmock.ContractID(region, n), nil
}

// checkOutbox checks that the outbox holds the events received (raws: id
// -> body), each delivered, and no other, and that each event's id is the
// one its identity (entity, key, version, op, life) computes.
func (s *sink) checkOutbox(raws map[string][]byte, add func(string, ...any)) {
	rows, err := s.f.w.st.DB().Raw("SELECT " + outbox.StoredColumns + ", delivered_at IS NULL FROM erpsync_events ORDER BY id").Rows()
	if err != nil {
		add("read the outbox: %v", err)
		return
	}
	defer rows.Close()
	seen := map[string]bool{}
	var pending, lost []string
	for rows.Next() {
		var st outbox.Stored
		var undelivered bool
		if err := rows.Scan(append(st.Dest(), &undelivered)...); err != nil {
			add("read the outbox: %v", err)
			return
		}
		id, entity, key, op, version, life, body := st.ID, st.Entity, st.Key, st.Op, st.Version, st.Life, st.Body()
		if want := outbox.ID(entity, key, version, op, life); id != want {
			add("event %s has the id %s, its identity (%s %s v%d %s life %d) computes %s", body, id, entity, key, version, op, life, want)
		}
		seen[id] = true
		if undelivered {
			pending = append(pending, string(body))
		}
		switch raw, ok := raws[id]; {
		case !ok && !undelivered:
			lost = append(lost, string(body))
		case ok && !bytes.Equal(raw, body):
			add("event %s was received as %s", body, raw)
		}
	}
	if len(pending) > 0 {
		add("%d events left undelivered after the final drain, the first %s", len(pending), pending[0])
	}
	if len(lost) > 0 {
		add("%d events marked delivered were not received, the first %s", len(lost), lost[0])
	}
	for _, id := range sortedKeys(raws) {
		if !seen[id] {
			add("event %s was received and is not in the outbox", raws[id])
		}
	}
}

// rowHistory reads the changes of each row of contracts that the triggers
// logged, in order.
func rowHistory(w *world) (map[string][]change, error) {
	return changesOf(w, "SELECT erp_id, op, erp_version, data FROM guarantee_row_changes ORDER BY seq")
}

// finalRows reads every row of contracts as a change: its data, its
// version, and op delete for a soft-deleted row.
func finalRows(w *world) (map[string]change, error) {
	all, err := changesOf(w, "SELECT CONCAT(region, no), CASE WHEN deleted_at IS NULL THEN 'live' ELSE 'delete' END, erp_version, "+eventData(w.postgres(), "")+" FROM contracts")
	out := make(map[string]change, len(all))
	for id, cs := range all {
		out[id] = cs[0]
	}
	return out, err
}

func changesOf(w *world, query string) (map[string][]change, error) {
	rows, err := w.st.DB().Raw(query).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]change{}
	for rows.Next() {
		var id string
		var c change
		var data []byte
		if err := rows.Scan(&id, &c.op, &c.version, &data); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &c.data); err != nil {
			return nil, fmt.Errorf("row data %s: %w", data, err)
		}
		out[id] = append(out[id], c)
	}
	return out, rows.Err()
}

// tally lists what, each distinct one once with its count.
func tally(what []string) string {
	n := map[string]int{}
	var out []string
	for _, w := range what {
		if n[w]++; n[w] == 1 {
			out = append(out, w)
		}
	}
	for i, w := range out {
		if n[w] > 1 {
			out[i] = fmt.Sprintf("%s (%d times)", w, n[w])
		}
	}
	return strings.Join(out, ", ")
}

// union is the keys of a and b.
func union[A, B any](a map[string]A, b map[string]B) map[string]bool {
	out := make(map[string]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
