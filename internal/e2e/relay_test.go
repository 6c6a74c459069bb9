package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/redisproc"
	"github.com/erpsync/erpsync/internal/testenv"
)

// relayEnv is an Env whose outbox holds events: n versions of each key.
func relayEnv(t *testing.T, keys []string, n int) (*env, *sql.DB) {
	t.Helper()
	e := setup(t, erpmock.Options{Records: 1})
	db := testenv.SQLDB(t, e.DSN)
	ctx := context.Background()
	for v := 1; v <= n; v++ {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var evs []outbox.Event
		for _, k := range keys {
			evs = append(evs, outbox.Event{Entity: "customers", Key: map[string]any{"customer": k}, Op: outbox.OpUpdate, Version: int64(v), RunID: "r",
				Data: map[string]any{"customer": k}})
		}
		rec := new(outbox.Recorder) // outbox.Record's, a load first
		if e.Postgres {
			rec = outbox.NewPostgresRecorder()
		}
		if err := rec.Record(ctx, tx, evs); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return e, db
}

func pendingEvents(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM erpsync_events WHERE delivered_at IS NULL").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// posts is a webhook receiver's record of the POSTs it took: each body's
// event ids.
type posts struct {
	mu    sync.Mutex
	batch [][]string
}

func (p *posts) add(body []byte) error {
	var evs []outbox.Body
	if err := json.Unmarshal(body, &evs); err != nil {
		return err
	}
	var ids []string
	for _, e := range evs {
		ids = append(ids, e.ID)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.batch = append(p.batch, ids)
	return nil
}

func (p *posts) all() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.batch)
}

// count is how many events the POSTs carried, redeliveries included.
func (p *posts) count() int {
	n := 0
	for _, b := range p.all() {
		n += len(b)
	}
	return n
}

// recordingHook is a webhook that takes every POST and records it.
func recordingHook(t *testing.T) (*posts, *httptest.Server) {
	got := &posts{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := got.add(body); err != nil {
			t.Error(err)
		}
	}))
	t.Cleanup(srv.Close)
	return got, srv
}

// TestRelayKilledBetweenDeliveryAndMark: a relay SIGKILLed after the
// webhook took a batch and before the mark delivers that batch again, with
// the same ids, and loses nothing.
func TestRelayKilledBetweenDeliveryAndMark(t *testing.T) {
	e, db := relayEnv(t, []string{"K1", "K2", "K3"}, 10)
	got := &posts{}
	var killed sync.Once
	var proc *proctest.Proc
	started := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := got.add(body); err != nil {
			t.Error(err)
		}
		first := false
		killed.Do(func() { first = true })
		if first {
			<-started
			proc.Cmd.Process.Kill() // SIGKILL: delivered, never marked
			time.Sleep(200 * time.Millisecond)
			w.WriteHeader(http.StatusOK)
			return
		}
	}))
	defer srv.Close()
	args := []string{"relay", "--events-sink", "webhook", "--events-url", srv.URL, "--events-unsigned", "--batch-size", "12", "--http-addr", "", "--lock-ttl", "1s"}
	proc = e.Start(append(args, "--once")...)
	close(started)
	if r := proc.Wait(); r.Code != -1 {
		t.Fatalf("the killed relay ended with %d: %s", r.Code, r.Out())
	}
	if n := pendingEvents(t, db); n != 30 {
		t.Fatalf("%d pending after the kill, want all 30", n)
	}
	// The dead relay's lock runs out after its --lock-ttl; the restarted
	// relay waits for it, then delivers.
	again := e.Start(append(args, "--poll", "50ms")...)
	if !proctest.Eventually(time.Minute, func() bool { return pendingEvents(t, db) == 0 }) {
		t.Fatalf("the restarted relay never delivered: %s", again.Wait().Out())
	}
	again.Signal(syscall.SIGTERM)
	if r := again.Wait(); r.Code != 0 {
		t.Fatalf("relay exit %d: %s", r.Code, r.Out())
	}
	batches := got.all()
	if len(batches) < 2 || !slices.Equal(batches[0], batches[1]) {
		t.Fatalf("the batch in hand at the kill was not delivered again with the same ids: %v", batches)
	}
	seen := map[string]bool{}
	for _, b := range batches[1:] {
		for _, id := range b {
			if seen[id] {
				t.Errorf("%s delivered twice after the restart", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != 30 || pendingEvents(t, db) != 0 {
		t.Fatalf("%d distinct events delivered, %d pending; want 30 and 0", len(seen), pendingEvents(t, db))
	}
}

// TestRelayRejectionExits1: a 400 stops the relay with one line, exit 1,
// the events left pending.
func TestRelayRejectionExits1(t *testing.T) {
	e, db := relayEnv(t, []string{"K1"}, 3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such entity", http.StatusBadRequest)
	}))
	defer srv.Close()
	r := e.Run(context.Background(), "relay", "--events-sink", "webhook", "--events-url", srv.URL, "--events-unsigned", "--http-addr", "", "--log-level", "error", "--log-format", "console")
	lines := proctest.Lines(r.Stderr)
	var ours []string
	for _, l := range lines {
		if strings.HasPrefix(l, "erpsync: ") {
			ours = append(ours, l)
		}
	}
	if r.Code != 1 || len(ours) != 1 || !strings.Contains(ours[0], "400") {
		t.Fatalf("exit %d, lines %q; want 1 and one line naming the 400", r.Code, lines)
	}
	if n := pendingEvents(t, db); n != 3 {
		t.Fatalf("%d pending, want 3", n)
	}
}

// TestRelayWebhookWantsASecret: a webhook without a secret is a usage
// error, exit 2 with one line, unless --events-unsigned says so.
func TestRelayWebhookWantsASecret(t *testing.T) {
	e, db := relayEnv(t, []string{"K1"}, 2)
	got, srv := recordingHook(t)
	args := []string{"relay", "--once", "--events-sink", "webhook", "--events-url", srv.URL, "--http-addr", ""}
	r := e.Run(context.Background(), args...)
	if r.Code != 2 || !strings.Contains(r.Stderr, "a webhook without a secret") || len(proctest.Lines(r.Stderr)) != 1 {
		t.Fatalf("relay without a secret: exit %d, want 2 and one line: %s", r.Code, r.Out())
	}
	if r := e.Run(context.Background(), append(args, "--events-unsigned")...); r.Code != 0 || got.count() != 2 || pendingEvents(t, db) != 0 {
		t.Fatalf("relay --events-unsigned: exit %d, %d delivered: %s", r.Code, got.count(), r.Out())
	}
}

// TestRelayProcesses: a relay that runs until SIGTERM serves its gauges;
// a second relay started meanwhile skips (exit 0); SIGTERM ends the first
// with exit 0; erpsync events lists the outbox.
func TestRelayProcesses(t *testing.T) {
	e, db := relayEnv(t, []string{"K1", "K2"}, 5)
	got, srv := recordingHook(t)
	addr := proctest.FreeAddr(t)
	args := []string{"relay", "--events-sink", "webhook", "--events-url", srv.URL, "--events-unsigned", "--poll", "50ms"}
	first := e.Start(append(args, "--http-addr", addr)...)
	if !proctest.Eventually(time.Minute, func() bool { return pendingEvents(t, db) == 0 }) {
		t.Fatalf("the relay never delivered: %s", first.Wait().Out())
	}
	var metrics string
	proctest.Eventually(10*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		metrics = string(b)
		return strings.Contains(metrics, "erpsync_events_pending 0")
	})
	for _, m := range []string{"erpsync_events_pending 0", "erpsync_events_oldest_pending_seconds 0"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %q", m)
		}
	}
	second := e.Run(context.Background(), append(args, "--once", "--http-addr", "", "--log-level", "info")...)
	if second.Code != 0 || !strings.Contains(second.Out(), "relay skipped") ||
		second.Stdout != "relay: skipped: another relay holds the lock (relay:events); delivered 0 events; none left pending\n" {
		t.Fatalf("second relay exit %d: %s", second.Code, second.Out())
	}
	if err := first.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := first.Wait(); r.Code != 0 {
		t.Fatalf("relay after SIGTERM exit %d: %s", r.Code, r.Out())
	}
	n := got.count()
	if n != 10 {
		t.Fatalf("%d events delivered, want 10", n)
	}
	out := e.Run(context.Background(), "events")
	if out.Code != 0 || !strings.Contains(out.Stdout, "customers") || !strings.Contains(out.Stdout, fmt.Sprint(10)) {
		t.Fatalf("events exit %d: %s", out.Code, out.Out())
	}
	t.Log(out.Stdout)
}

// TestScheduleRunsTheRelay: with a sink, schedule delivers the outbox
// beside its ticks, and --ticks still ends it.
func TestScheduleRunsTheRelay(t *testing.T) {
	e, db := relayEnv(t, []string{"K1", "K2"}, 3)
	got, srv := recordingHook(t)
	r := e.Run(context.Background(), "schedule", "--every", "1s", "--ticks", "2", "--http-addr", "", "--events-sink", "webhook", "--events-url", srv.URL, "--events-unsigned")
	if r.Code != 0 {
		t.Fatalf("schedule exit %d: %s", r.Code, r.Out())
	}
	n := got.count()
	if p := pendingEvents(t, db); p != 0 || n != 6 {
		t.Fatalf("%d pending, %d delivered after the schedule; want 0 and 6", p, n)
	}
}

// TestRelayWaitsForRedisAtStart: a relay that runs until SIGTERM, started
// while its Redis refuses connections, logs it, counts its failed lock
// attempts and waits; once a redis-server listens on that address it
// takes the lock and delivers everything. `relay --once` against the same
// refusing address exits 2 with one line, as every command does.
func TestRelayWaitsForRedisAtStart(t *testing.T) {
	e, db := relayEnv(t, []string{"K1", "K2"}, 3)
	got, srv := recordingHook(t)
	rs, err := redisproc.Start()
	if err != nil {
		t.Fatal(err)
	}
	addr := rs.Addr
	rs.Stop() // the address now refuses connections
	args := []string{"relay", "--events-sink", "webhook", "--events-url", srv.URL, "--events-unsigned", "--redis-addr", addr, "--poll", "50ms"}
	once := e.Run(context.Background(), append(args, "--once", "--http-addr", "")...)
	if once.Code != 2 || !strings.Contains(once.Stderr, "redis unavailable") {
		t.Fatalf("relay --once with Redis down: exit %d, want 2 naming Redis: %s", once.Code, once.Out())
	}
	ops := proctest.FreeAddr(t)
	proc := e.Start(append(args, "--http-addr", ops)...)
	failures := func() float64 { return sum(scrape(t, ops), "erpsync_relay_lock_failures_total", nil) }
	if !proctest.Eventually(time.Minute, func() bool { return failures() >= 2 }) {
		proc.Signal(syscall.SIGTERM)
		t.Fatalf("the relay did not wait for Redis: %s", proc.Wait().Out())
	}
	if n := pendingEvents(t, db); n != 6 {
		t.Fatalf("%d pending while Redis is down, want all 6", n)
	}
	_, port, _ := strings.Cut(addr, ":")
	up := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Process.Kill(); up.Wait() })
	if !proctest.Eventually(time.Minute, func() bool { return pendingEvents(t, db) == 0 }) {
		proc.Signal(syscall.SIGTERM)
		t.Fatalf("the relay never delivered once Redis was up: %s", proc.Wait().Out())
	}
	proc.Signal(syscall.SIGTERM)
	r := proc.Wait()
	if r.Code != 0 || !strings.Contains(r.Out(), "waiting for it") {
		t.Fatalf("relay exit %d, want 0 after logging the wait: %s", r.Code, r.Out())
	}
	n := got.count()
	if n != 6 {
		t.Fatalf("%d events delivered, want 6", n)
	}
}

// TestOutboxCommandsWithoutMemberships: a database migrated for a config
// file whose entities leave out the built-in memberships has no
// memberships table; relay, events and runs read erpsync's own tables
// alone and work there, with the file and without it. They refused to
// start ("table memberships does not exist; run erpsync migrate", which
// migrate cannot mend).
func TestOutboxCommandsWithoutMemberships(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 40, Seed: 5})
	got, srv := recordingHook(t)
	file := filepath.Join(t.TempDir(), "orders.yaml")
	events := "events:\n  sink: webhook\n  url: " + srv.URL + "\n  unsigned: true\n"
	body := strings.Replace(ordersFile, "    version: rev\n", "    version: rev\n    events: true\n", 1)
	if err := os.WriteFile(file, []byte(events+body), 0o600); err != nil {
		t.Fatal(err)
	}
	dsn := testenv.DSN(t)
	db := []string{testenv.DSNFlag(dsn), dsn}
	e.MustRun(append([]string{"migrate", "--config", file}, db...)...)
	e.MustRun(append([]string{"run", "--config", file}, db...)...)
	var recorded int
	if err := testenv.SQLDB(t, dsn).QueryRow("SELECT COUNT(*) FROM erpsync_events").Scan(&recorded); err != nil || recorded == 0 {
		t.Fatalf("the run recorded %d events (%v); want one per order", recorded, err)
	}
	for _, args := range [][]string{
		{"relay", "--once", "--config", file, "--http-addr", ""},
		{"events", "--config", file},
		{"events"},
		{"runs", "--config", file},
		{"runs", "--all-jobs"},
	} {
		r := e.Run(context.Background(), append(args, db...)...)
		if r.Code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.Code, r.Out())
		}
		if args[0] == "events" && !strings.Contains(r.Stdout, fmt.Sprintf("orders  0        %d", recorded)) {
			t.Errorf("%v printed %q; want orders with 0 pending and %d delivered", args, r.Stdout, recorded)
		}
	}
	if n := got.count(); n != recorded {
		t.Fatalf("the webhook took %d events, want the %d recorded", n, recorded)
	}
	// runs --status reads the entities' tables: it still checks them.
	if r := e.Run(context.Background(), append([]string{"runs", "--status"}, db...)...); r.Code != 2 || !strings.Contains(r.Stderr, "table memberships does not exist") {
		t.Errorf("runs --status without the file: exit %d: %s; want exit 2 naming the memberships table", r.Code, r.Out())
	}
}
