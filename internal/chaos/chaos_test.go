//go:build chaos

package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/lock"
)

const since = "2024-01-01T00:00:00Z" // before every record of the feed

// world is one scenario: its row in the table, its Env, the mock's
// counters at the start and the version watcher.
type world struct {
	*proctest.Env
	row    *row
	before erpmock.Stats
	watch  *proctest.Watcher
}

// setup starts scenario name (order places it in the table) on a fresh
// database and mock, with the watcher running.
func setup(t *testing.T, order int, name string, opt erpmock.Options) *world {
	t.Helper()
	r := scenario(t, order, name)
	e := proctest.New(t, bin, opt)
	return &world{Env: e, row: r, before: e.Mock.Stats(), watch: e.Watch()}
}

// finish counts the ERP's injected faults and ends the scenario (see
// finish in main_test.go).
func (w *world) finish(t *testing.T) {
	t.Helper()
	w.row.erpFaults(w.before, w.Mock.Stats())
	finish(t, w.row, w.Env, w.watch)
}

// rerun runs `erpsync run` (args are extra flags) until it succeeds: a run
// that died keeps its job lock until the lock's TTL, and a run meanwhile
// skips. It fails the test after a minute of skips.
func (w *world) rerun(t *testing.T, args ...string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rerun.json")
	var last proctest.Result
	ok := proctest.Eventually(time.Minute, func() bool {
		last = w.Run(context.Background(), append([]string{"run", "--report", path}, args...)...)
		if last.Code != 0 {
			return false
		}
		rep, err := proctest.ReadReport(path)
		return err == nil && rep["status"] == "succeeded"
	})
	if !ok {
		t.Fatalf("no rerun succeeded within a minute; last exit %d: %s", last.Code, last.Out())
	}
}

// settle ends a scenario whose last step is a rerun: the rerun must
// succeed and bring the table to the truth.
func (w *world) settle(t *testing.T) {
	t.Helper()
	w.rerun(t)
	w.finish(t)
}

// midRun starts a run and a backfill of the whole feed while records
// change, calls inject once they have written rows, and returns how each
// ended. The changes stop once both have ended.
func (w *world) midRun(t *testing.T, rows int64, inject func(victims []*proctest.Proc)) []proctest.Result {
	t.Helper()
	slow := w.Mock.Faults().Latency
	w.Mock.SetFaults(erpmock.Faults{Latency: slow, ChangeRate: 2})
	victims := []*proctest.Proc{
		w.Start("run", "--page-size", "50", "--lock-ttl", "3s"),
		w.Start("backfill", "--since", since, "--page-size", "50", "--lock-ttl", "3s"),
	}
	w.WaitRows(rows)
	inject(victims)
	var res []proctest.Result
	for _, v := range victims {
		res = append(res, v.Wait())
	}
	w.Mock.SetFaults(erpmock.Faults{})
	return res
}

// exitedZeroOrOne fails the test unless every process under a fault ended
// as the contract allows: 0 (done, or interrupted cleanly) or 1 (failed).
func exitedZeroOrOne(t *testing.T, res []proctest.Result) {
	t.Helper()
	for i, r := range res {
		if r.Code != 0 && r.Code != 1 {
			t.Errorf("process %d exit %d, want 0 or 1:\n%s", i, r.Code, r.Stdout)
		}
		t.Logf("process %d under the fault: exit %d", i, r.Code)
	}
}

// downAtStart runs `run` and a backfill with extra flags that point at a
// dependency that is down: each must exit 2 with want (a prefix) as its
// last line on stderr (oneLine: its only line), and write nothing. It
// returns what they printed.
func (w *world) downAtStart(t *testing.T, want string, oneLine bool, extra ...string) string {
	t.Helper()
	var out strings.Builder
	for _, args := range [][]string{{"run"}, {"backfill", "--since", since}} {
		res := w.Run(context.Background(), append(args, extra...)...)
		lines := proctest.Lines(res.Stderr)
		if res.Code != 2 || len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], want) || (oneLine && len(lines) != 1) {
			t.Errorf("%v: exit %d, want 2 and %q (one line: %v) on stderr:\n%s", args, res.Code, want, oneLine, res.Out())
		}
		t.Logf("%v: exit %d:\n%s", args, res.Code, res.Stderr)
		out.WriteString(res.Out())
	}
	if n := w.Count("SELECT COUNT(*) FROM %s", "memberships"); n != 0 {
		t.Errorf("%d rows written", n)
	}
	if n := w.Count("SELECT COUNT(*) FROM %s WHERE status = 'running'", "sync_runs"); n != 0 {
		t.Errorf("%d runs recorded as running", n)
	}
	return out.String()
}

// lockedIDs returns the erp_ids whose record lock is held under prefix.
func lockedIDs(t *testing.T, rdb *redis.Client, prefix string) []string {
	keys, err := rdb.Keys(context.Background(), prefix+"*").Result()
	if err != nil {
		t.Fatalf("redis keys: %v", err)
	}
	var ids []string
	for _, k := range keys {
		if !lock.IsCounter(k) {
			ids = append(ids, strings.TrimPrefix(strings.Trim(strings.TrimPrefix(k, prefix), "{}"), "rec:"))
		}
	}
	return ids
}

// freezeHolding stops p with SIGSTOP while it holds the record lock of a
// record it has not written yet (its row is absent or below want), and
// returns those erp_ids. To catch it there, it holds memberships locked
// (Env.LockTable): the workers that got their record locks block on the
// table, p is stopped, the table is released. A pause during a Redis call
// would not do: the call times out when p wakes and the chunk is locked
// again, fresh.
func freezeHolding(t *testing.T, e *proctest.Env, rdb *redis.Client, p *proctest.Proc, want map[string]int64) []string {
	t.Helper()
	ctx := context.Background()
	var held []string
	ok := proctest.Eventually(2*time.Minute, func() bool {
		unlock, err := e.LockTable(ctx, "memberships")
		if err != nil {
			t.Fatal(err)
		}
		var locked []string
		proctest.Eventually(5*time.Second, func() bool {
			locked = lockedIDs(t, rdb, e.Prefix)
			return len(locked) > 0
		})
		// Let the lock calls in flight return: a key exists before its
		// reply reaches p, and a reply p sleeps through times out when it
		// wakes (the chunk is then locked again, fresh). p's workers can
		// take no further locks: each holds a chunk and waits for the one
		// write slot or the table. Then read the keys again: the workers
		// that took their locks in that second hold them too.
		time.Sleep(time.Second)
		locked = lockedIDs(t, rdb, e.Prefix)
		p.Signal(syscall.SIGSTOP)
		if err := unlock(); err != nil {
			t.Fatalf("unlock memberships: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // statements sent before the stop land
		held = held[:0]
		for _, id := range locked {
			var v int64
			err := e.DB.QueryRow("SELECT erp_version FROM "+e.Table("memberships")+" WHERE erp_id = ?", id).Scan(&v)
			if errors.Is(err, sql.ErrNoRows) || (err == nil && v < want[id]) {
				held = append(held, id)
			}
		}
		if len(held) > 0 {
			return true
		}
		p.Signal(syscall.SIGCONT)
		return false
	})
	if !ok {
		t.Fatal("never caught the process holding the lock of a record it had not written")
	}
	return held
}

func truthVersions(m *erpmock.Mock) map[string]int64 {
	want := map[string]int64{}
	for _, r := range m.Truth() {
		want[r.ErpID] = r.Version
	}
	return want
}

// pauseBackfill starts a backfill, freezes it while it holds records it
// has not written (freezeHolding), waits until every record lock it held
// has expired, calls meanwhile, and wakes it. The woken backfill must
// succeed with its refused writes counted as refusedBy in its report.
func pauseBackfill(t *testing.T, w *world, refusedBy string, meanwhile func()) {
	t.Helper()
	rdb := testenv.Redis(t)
	report := filepath.Join(t.TempDir(), "frozen.json")
	// One write statement at a time: while the table is locked, one
	// worker's INSERT waits on it and the other workers wait their turn
	// holding their chunks' locks, unwritten, as a worker does when a pause
	// takes it between its grant and its write.
	frozen := w.Start("backfill", "--since", since, "--page-size", "50", "--chunk-size", "50",
		"--workers", "4", "--db-writers", "1", "--lock-ttl", "2s", "--report", report)
	w.WaitRows(300)
	held := freezeHolding(t, w.Env, rdb, frozen, truthVersions(w.Mock))
	w.row.fault("SIGSTOP 1 (past a 2s TTL)")
	if !proctest.Eventually(time.Minute, func() bool { return len(lockedIDs(t, rdb, w.Prefix)) == 0 }) {
		t.Fatal("the frozen backfill's record locks never expired")
	}
	meanwhile()
	frozen.Signal(syscall.SIGCONT)
	res := frozen.Wait()
	rep, err := proctest.ReadReport(report)
	if err != nil {
		t.Fatal(err)
	}
	refused, _ := rep[refusedBy].(float64)
	w.row.fault("woken: exit %d, %s %v", res.Code, refusedBy, refused)
	if res.Code != 0 || rep["status"] != "succeeded" || refused < 1 {
		t.Errorf("woken backfill: exit %d, status %v, %s %v; want 0, succeeded, > 0\n%s", res.Code, rep["status"], refusedBy, refused, res.Stdout)
	}
	t.Logf("woken backfill held %d unwritten records: inserted %v, updated %v, unchanged %v, unique_violations %v, stale_rejected %v",
		len(held), rep["inserted"], rep["updated"], rep["unchanged"], rep["unique_violations"], rep["stale_rejected"])
}

func TestSIGKILLMidRun(t *testing.T) {
	t.Parallel()
	w := setup(t, 1, "SIGKILL mid-run, then a rerun", erpmock.Options{Records: 4000, Seed: 101, Faults: erpmock.Faults{Latency: 30 * time.Millisecond}})
	res := w.midRun(t, 1000, func(victims []*proctest.Proc) {
		for _, v := range victims {
			v.Signal(syscall.SIGKILL)
		}
		w.row.fault("SIGKILL %d", len(victims))
	})
	for i, r := range res {
		if r.Code != -1 {
			t.Errorf("killed process %d exited %d: %s", i, r.Code, r.Stdout)
		}
	}
	w.Mock.Change(100)
	if res := w.Run(context.Background(), "backfill", "--since", since, "--page-size", "200"); res.Code != 0 {
		t.Fatalf("backfill after the kill exit %d: %s", res.Code, res.Out())
	}
	w.settle(t)
}

func TestSIGSTOPBackfillPastItsLockTTL(t *testing.T) {
	t.Parallel()
	w := setup(t, 2, "SIGSTOP a backfill past its lock TTL; records change; another run writes them; SIGCONT",
		erpmock.Options{Records: 3000, Seed: 102, Faults: erpmock.Faults{Latency: 20 * time.Millisecond}})
	// What happens: the records it held unwritten when it froze were
	// written meanwhile by the other run, at their latest version and a
	// newer fencing token. Its inserts of them hit the UNIQUE index and the
	// guarded update leaves the rows alone (unique_violations); it does not
	// fail. A refusal by the fence alone (stale_rejected) needs it to hold a
	// newer version than the row: see the lagging-replica scenario.
	pauseBackfill(t, w, "unique_violations", func() {
		w.Mock.Change(400)
		if res := w.Run(context.Background(), "run", "--lock-ttl", "1s"); res.Code != 0 {
			t.Fatalf("the run beside the frozen backfill exit %d: %s", res.Code, res.Out())
		}
	})
	// The table is the truth without any further run: nothing the woken
	// backfill wrote with its expired locks took a row back.
	w.finish(t)
}

// The fence at work: a backfill frozen past its TTL holds newer versions
// than the rows a run writes meanwhile from a lagging ERP replica (older
// versions, newer fencing tokens). When it wakes, the version guard alone
// would let its writes in; the fence refuses them (stale_rejected), and it
// writes them again under fresh locks.
func TestSIGSTOPBackfillAgainstALaggingReplica(t *testing.T) {
	t.Parallel()
	opt := erpmock.Options{Records: 3000, Seed: 110, Faults: erpmock.Faults{Latency: 20 * time.Millisecond}}
	w := setup(t, 3, "SIGSTOP a backfill past its lock TTL; a run from a lagging ERP replica writes older versions; SIGCONT", opt)
	replica := httptest.NewServer(erpmock.New(opt)) // the same records, never changed
	t.Cleanup(replica.Close)
	w.Mock.Change(3000) // every record is one version ahead of the replica
	pauseBackfill(t, w, "stale_rejected", func() {
		if res := w.Run(context.Background(), "run", "--lock-ttl", "1s", "--erp-url", replica.URL); res.Code != 0 {
			t.Fatalf("the run from the replica exit %d: %s", res.Code, res.Out())
		}
	})
	w.finish(t)
}

// eventsConfig writes a config file that declares the memberships of the
// built-in table with change events on, read from the world's ERP, and
// migrates its outbox. Its writes are transactions of several statements:
// the rows, then their events.
func (w *world) eventsConfig(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "memberships-events.yaml")
	yaml := `erp:
  kind: rest
  url: ` + w.ERPURL + `
events:
  sink: webhook
  url: http://127.0.0.1:1/hook
entities:
  - name: memberships
    table: memberships
    source: memberships
    key: erp_id
    updated_at: updated_at
    version: version
    events: true
    columns:
      - {name: erp_id,       type: string(64), pattern: "^[A-Za-z0-9._-]+$"}
      - {name: member_id,    type: string(64), pattern: "."}
      - {name: product_code, type: string(32), pattern: "."}
      - {name: status,       type: string(16), values: {ACTIVE: ACTIVE, SUSPENDED: SUSPENDED, CANCELLED: CANCELLED, EXPIRED: EXPIRED}}
      - {name: starts_at,    type: datetime}
      - {name: ends_at,      type: datetime, nullable: true, not_before: starts_at}
`
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := w.Run(context.Background(), "migrate", "--config", file); r.Code != 0 {
		t.Fatalf("migrate --config exit %d: %s", r.Code, r.Out())
	}
	return file
}

// A backfill frozen inside a transaction holds its rows uncommitted, and
// their locks: on PostgreSQL every other writer of those rows would wait
// until it wakes, for as long as it sleeps (lock_timeout is 0); on MariaDB
// for innodb_lock_wait_timeout (50s) a statement, each try. erpsync's
// sessions carry idle_in_transaction_session_timeout on PostgreSQL and
// idle_transaction_timeout on MariaDB (the lock TTL, at least 10s), so the
// server ends the frozen session and rolls its transaction back: a run
// started once the frozen backfill's record locks expired writes those
// records and finishes while it still sleeps. Woken, the backfill finds
// its session gone and writes its records again under fresh locks. MySQL
// has no such setting: its waits time out after innodb_lock_wait_timeout.
func TestSIGSTOPInsideATransaction(t *testing.T) {
	t.Parallel()
	if !testenv.Postgres() && !testenv.MariaDB(t) {
		t.Skip("MySQL has no idle-transaction timeout: its waits end after innodb_lock_wait_timeout")
	}
	w := setup(t, 11, "SIGSTOP a backfill inside a transaction (change events on) past its lock TTL; a run writes its rows meanwhile; SIGCONT",
		erpmock.Options{Records: 5000, Seed: 111, Faults: erpmock.Faults{Latency: 20 * time.Millisecond}})
	file := w.eventsConfig(t)
	rdb := testenv.Redis(t)
	report := filepath.Join(t.TempDir(), "frozen.json")
	frozen := w.Start("backfill", "--config", file, "--since", since, "--page-size", "50", "--chunk-size", "50",
		"--workers", "4", "--db-writers", "1", "--lock-ttl", "2s", "--report", report)
	w.WaitRows(300)
	// Frozen where it holds records unwritten, and inside a transaction:
	// a session of it idle in one (its INSERT landed once the table was
	// free, and it sleeps before its COMMIT).
	idleInTx := "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'erpsync' AND state = 'idle in transaction'"
	if !testenv.Postgres() {
		// A session of the scenario's database idle (Sleep) with an
		// InnoDB transaction open.
		idleInTx = `SELECT COUNT(*) FROM information_schema.INNODB_TRX t
 JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
 WHERE p.DB = '` + w.DBName + `' AND p.COMMAND = 'Sleep'`
	}
	var held []string
	for try := 0; ; try++ {
		held = freezeHolding(t, w.Env, rdb, frozen, truthVersions(w.Mock))
		var idle int
		if err := w.DB.QueryRow(idleInTx).Scan(&idle); err != nil {
			t.Fatal(err)
		}
		if idle > 0 {
			break
		}
		if try == 20 {
			t.Fatal("never froze the backfill inside a transaction")
		}
		frozen.Signal(syscall.SIGCONT)
	}
	w.row.fault("SIGSTOP 1 inside a transaction (past a 2s TTL)")
	if !proctest.Eventually(time.Minute, func() bool { return len(lockedIDs(t, rdb, w.Prefix)) == 0 }) {
		t.Fatal("the frozen backfill's record locks never expired")
	}
	w.Mock.Change(400)
	// Without the timeout the run waits on the frozen transaction's rows
	// until the deadline kills it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	started := time.Now()
	res := w.Run(ctx, "run", "--config", file, "--lock-ttl", "1s")
	cancel()
	if res.Code != 0 {
		t.Fatalf("the run beside the frozen backfill exit %d after %s (held back by its transaction?): %s", res.Code, time.Since(started).Round(time.Second), res.Out())
	}
	t.Logf("the run beside the frozen backfill (%d records held unwritten) took %s", len(held), time.Since(started).Round(time.Second))
	frozen.Signal(syscall.SIGCONT)
	woken := frozen.Wait()
	rep, err := proctest.ReadReport(report)
	if err != nil {
		t.Fatal(err)
	}
	w.row.fault("woken: exit %d", woken.Code)
	if woken.Code != 0 || rep["status"] != "succeeded" {
		t.Errorf("woken backfill: exit %d, status %v; want 0, succeeded\n%s", woken.Code, rep["status"], woken.Stdout)
	}
	w.rerun(t, "--config", file)
	w.finish(t)
	// Every row's version has its change event: the rolled-back
	// transaction took its events with it, and the writes made again
	// recorded theirs.
	if n := w.Count(`SELECT COUNT(*) FROM %s m WHERE NOT EXISTS (SELECT 1 FROM `+w.Table("erpsync_events")+` e
 WHERE e.entity = 'memberships' AND e.entity_key = CONCAT('{"erp_id":"', m.erp_id, '"}') AND e.version = m.erp_version)`, "memberships"); n != 0 {
		t.Errorf("%d rows have no change event at their version", n)
	}
}

func TestRedisRestartedEmptyMidRun(t *testing.T) {
	t.Parallel()
	w := setup(t, 4, "Redis restarted empty mid-run", erpmock.Options{Records: 4000, Seed: 103, Faults: erpmock.Faults{Latency: 30 * time.Millisecond}})
	rd := proctest.StartRedis(t)
	w.Extra = append(w.Extra, "ERPSYNC_REDIS_ADDR="+rd.Addr)
	exitedZeroOrOne(t, w.midRun(t, 1000, func([]*proctest.Proc) {
		rd.Kill()
		time.Sleep(300 * time.Millisecond) // let the processes meet the dead server
		rd.Start()
		w.row.fault("Redis restarts 1")
	}))
	w.settle(t)
}

func TestRedisDownAtStart(t *testing.T) {
	t.Parallel()
	w := setup(t, 5, "Redis down at start (exit 2, nothing written)", erpmock.Options{Records: 500, Seed: 104})
	rd := proctest.StartRedis(t)
	rd.Kill()
	w.row.fault("Redis down 1")
	w.downAtStart(t, "erpsync: redis unavailable", true, "--redis-addr", rd.Addr)
	w.settle(t)
}

// database is the name of the matrix's database in the scenarios' names.
func database() string {
	if testenv.Postgres() {
		return "PostgreSQL"
	}
	return "MySQL"
}

func TestDatabaseConnectionsKilledMidRun(t *testing.T) {
	t.Parallel()
	w := setup(t, 6, database()+" connections killed mid-run, then a rerun", erpmock.Options{Records: 4000, Seed: 105, Faults: erpmock.Faults{Latency: 30 * time.Millisecond}})
	exitedZeroOrOne(t, w.midRun(t, 800, func([]*proctest.Proc) {
		killed, rounds := 0, 5
		for range rounds {
			killed += w.KillSessions()
			time.Sleep(300 * time.Millisecond) // let them reconnect and write
		}
		kill := "KILL CONNECTION"
		if w.Postgres {
			kill = "pg_terminate_backend"
		}
		w.row.fault("%s %d (%d rounds)", kill, killed, rounds)
		if killed == 0 {
			t.Error("found no erpsync session to kill")
		}
	}))
	w.settle(t)
}

func TestDatabaseDownAtStart(t *testing.T) {
	t.Parallel()
	w := setup(t, 7, database()+" down at start (exit 2, one line)", erpmock.Options{Records: 500, Seed: 106})
	w.row.fault("%s down 1", database())
	dead, says := "root@tcp("+proctest.FreeAddr(t)+")/"+w.DBName+"?parseTime=true", "erpsync: mysql"
	if w.Postgres {
		dead, says = "postgres://root@"+proctest.FreeAddr(t)+"/"+w.DBName+"?sslmode=disable", "erpsync: postgresql"
	}
	w.downAtStart(t, says, true, testenv.DSNFlag(dead), dead)
	w.settle(t)
}

func TestERPFaultsAllAtOnce(t *testing.T) {
	t.Parallel()
	w := setup(t, 8, "ERP: 10% 5xx, 3% 429, 2% truncated, 2% hangs past --erp-timeout", erpmock.Options{Records: 3000, Seed: 107})
	w.Mock.SetFaults(erpmock.Faults{ErrorRate: 0.10, RateLimitRate: 0.03, TruncateRate: 0.02,
		HangRate: 0.02, Hang: 30 * time.Second, RetryAfter: 1})
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i, args := range [][]string{{"run"}, {"backfill", "--since", since}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			report := filepath.Join(dir, fmt.Sprintf("r%d.json", i))
			// One request in six fails: erpsync's default of 6 retries
			// gives up on one in 0.17^7 (about 250,000), and a process
			// makes about 170; 12 retries keep the failures to the ones
			// the test is about.
			res := w.Run(context.Background(), append(args, "--page-size", "20", "--erp-timeout", "1s", "--erp-retries", "12", "--report", report)...)
			rep, err := proctest.ReadReport(report)
			if res.Code != 0 || err != nil || rep["status"] != "succeeded" || rep["erp_retries"] == 0.0 {
				t.Errorf("%v under ERP faults: exit %d, report %v (%v); want 0, succeeded after retries\n%s", args, res.Code, rep, err, res.Out())
			}
		}()
	}
	wg.Wait()
	w.finish(t)
}

func TestWrongERPToken(t *testing.T) {
	t.Parallel()
	const token = "s3cret-erp-token"
	w := setup(t, 9, "wrong ERP token (exit 2, one line)", erpmock.Options{Records: 500, Seed: 108, Token: token})
	w.row.fault("wrong token 1")
	if out := w.downAtStart(t, "erpsync: erp at", true, "--erp-token", "not-"+token); strings.Contains(out, token) {
		t.Errorf("the token leaked: %s", out)
	}
	w.Extra = append(w.Extra, "ERPSYNC_ERP_TOKEN="+token)
	w.settle(t)
}

func TestSchedulesBackfillsAndARunAtOnce(t *testing.T) {
	t.Parallel()
	w := setup(t, 10, "2 schedules, 3 overlapping backfills and a run at once, records changing",
		erpmock.Options{Records: 5000, Seed: 109, Faults: erpmock.Faults{Latency: 5 * time.Millisecond}})
	w.Mock.SetFaults(erpmock.Faults{Latency: 5 * time.Millisecond, ChangeRate: 2})
	var schedules []*proctest.Proc
	for range 2 {
		schedules = append(schedules, w.Start("schedule", "--every", "1s", "--lock-ttl", "5s",
			"--page-size", "100", "--http-addr", proctest.FreeAddr(t)))
	}
	var wg sync.WaitGroup
	batch := [][]string{
		{"backfill", "--since", since, "--page-size", "100", "--workers", "4"},
		{"backfill", "--since", since, "--page-size", "100", "--workers", "4"},
		{"backfill", "--since", since, "--page-size", "200", "--workers", "4"},
		{"run", "--page-size", "100"},
	}
	for _, args := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res := w.Run(context.Background(), args...); res.Code != 0 {
				t.Errorf("%v exit %d: %s", args, res.Code, res.Out())
			}
		}()
	}
	wg.Wait()
	// The changes stop; a scheduled run that starts after them (with a
	// margin for requests in flight) brings the table to the truth.
	w.Mock.SetFaults(erpmock.Faults{})
	quiet := time.Now().UTC().Add(time.Second)
	if !proctest.Eventually(2*time.Minute, func() bool {
		return w.Count("SELECT COUNT(*) FROM %s WHERE mode = 'run' AND status = 'succeeded' AND started_at > ?", "sync_runs", quiet) > 0
	}) {
		t.Fatal("no scheduled run succeeded after the changes stopped")
	}
	for i, s := range schedules {
		s.Signal(syscall.SIGTERM)
		if res := s.Wait(); res.Code != 0 {
			t.Errorf("schedule %d after SIGTERM exit %d: %s", i, res.Code, res.Stdout)
		}
	}
	w.finish(t)
	// Runs: the backfills, the manual run and every scheduled tick.
	w.row.Runs = len(batch) - 1 + int(w.Count("SELECT COUNT(*) FROM %s WHERE mode = 'run'", "sync_runs"))
}
