// Package proctest drives the built erpsync binary as OS processes in tests:
// one scenario's database, ERP mock and lock prefix (Env), child processes
// with their output (Proc), a watcher that proves no row's erp_version ever
// went down (Watcher), the table's state against the ERP's truth (Check),
// and redis-server instances a test can kill and restart (Redis).
//
// It talks to the real database (MariaDB/MySQL, or PostgreSQL in the
// matrix) and Redis that internal/testenv names; nothing is faked but the
// ERP, which is an in-process erpmock. A test can kill the erpsync sessions
// without killing its own: on MySQL the harness's handle has no default
// database and names every table with the scenario's, so its connections
// never show up in PROCESSLIST under that database; on PostgreSQL its
// sessions are named erpsync-harness, erpsync's erpsync.
//
// proctest does not promise anything about timing: every wait polls a
// condition up to a generous limit, and the figures it returns are counts,
// never durations to assert on.
package proctest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/internal/verify"
)

// Env is one scenario's world: a fresh migrated database, an erpmock served
// over HTTP, and a job name and lock prefix no other test uses.
type Env struct {
	T      testing.TB
	Bin    string // the erpsync binary
	DSN    string // the scenario's database, for erpsync
	DBName string
	ERPURL string
	Mock   *erpmock.Mock
	Job    string
	Prefix string // --lock-prefix
	// DB is the harness's own handle (testenv.SQLDB: '?' placeholders on
	// both databases). On MySQL it has no default database, so queries name
	// tables as DBName.table (see Table); on PostgreSQL it is connected to
	// the scenario's database.
	DB *sql.DB
	// Postgres says the scenario's database is PostgreSQL (the matrix's
	// ERPSYNC_TEST_DB=postgres).
	Postgres bool
	// Extra is appended to the environment of every process (KEY=VALUE).
	Extra []string

	mu    sync.Mutex
	procs int // erpsync processes started, migrate and verify excluded
}

// New sets up an Env for bin with an erpmock built from opt, and migrates
// the database with `erpsync migrate`. Everything is removed when the test
// ends.
func New(t testing.TB, bin string, opt erpmock.Options) *Env {
	t.Helper()
	dsn := testenv.DSN(t)
	pg, dbName, harness := harnessOf(t, dsn)
	e := &Env{
		T: t, Bin: bin, DSN: dsn, DBName: dbName, Postgres: pg,
		Mock:   erpmock.New(opt),
		Job:    testenv.RandomName("chaos-"),
		Prefix: testenv.RandomName("chaos:") + ":",
	}
	srv := httptest.NewServer(e.Mock)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { dropKeys(testenv.RedisAddr(), e.Prefix) })
	e.ERPURL = srv.URL
	if r := e.Run(context.Background(), "migrate"); r.Code != 0 {
		t.Fatalf("migrate exit %d: %s", r.Code, r.Out())
	}
	e.DB = testenv.SQLDB(t, harness)
	return e
}

// harnessOf tells the database of dsn (pg), the name of its database and
// the DSN of the harness's handle on it: on MySQL with no default
// database, on PostgreSQL dsn itself.
func harnessOf(t testing.TB, dsn string) (pg bool, dbName, harness string) {
	t.Helper()
	if store.DialectOf(dsn) == store.Postgres {
		cfg, err := store.ParsePostgresDSN(dsn)
		if err != nil {
			t.Fatalf("parse dsn: %v", err)
		}
		return true, cfg.Database, dsn
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("parse dsn: %v", err)
	}
	dbName = cfg.DBName
	cfg.DBName = ""
	return false, dbName, cfg.FormatDSN()
}

// On returns an Env of the same scenario (binary, ERP, job and lock
// prefix) whose DSN and harness handle name the database of dsn, another
// one on the same server, which must exist.
func (e *Env) On(dsn string) *Env {
	e.T.Helper()
	pg, dbName, harness := harnessOf(e.T, dsn)
	return &Env{
		T: e.T, Bin: e.Bin, DSN: dsn, DBName: dbName, Postgres: pg, DB: testenv.SQLDB(e.T, harness),
		ERPURL: e.ERPURL, Mock: e.Mock, Job: e.Job, Prefix: e.Prefix, Extra: e.Extra,
	}
}

// LockTable holds the table name from every other session's reads and
// writes until unlock is called: LOCK TABLES ... WRITE on MySQL, LOCK
// TABLE ... IN ACCESS EXCLUSIVE MODE in a transaction on PostgreSQL.
func (e *Env) LockTable(ctx context.Context, name string) (unlock func() error, err error) {
	if e.Postgres {
		tx, err := e.DB.BeginTx(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, "LOCK TABLE "+e.Table(name)+" IN ACCESS EXCLUSIVE MODE"); err != nil {
			tx.Rollback()
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		return tx.Rollback, nil
	}
	conn, err := e.DB.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	if _, err := conn.ExecContext(ctx, "LOCK TABLES "+e.Table(name)+" WRITE"); err != nil {
		conn.Close()
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return func() error {
		defer conn.Close()
		_, err := conn.ExecContext(ctx, "UNLOCK TABLES")
		return err
	}, nil
}

// Tables returns the names of the scenario database's tables, sorted.
func (e *Env) Tables() []string {
	e.T.Helper()
	q := "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME"
	if e.Postgres {
		q = "SELECT table_name FROM information_schema.tables WHERE table_catalog = ? AND table_schema = current_schema() ORDER BY table_name"
	}
	var names []string
	e.each(q, func(rows *sql.Rows) error {
		var n string
		err := rows.Scan(&n)
		names = append(names, n)
		return err
	}, e.DBName)
	return names
}

// TableExists reports whether the scenario's database has the table name.
func (e *Env) TableExists(name string) bool {
	e.T.Helper()
	return slices.Contains(e.Tables(), name)
}

// TableDDL describes the table name as the database holds it, for
// comparing two tables: SHOW CREATE TABLE on MySQL; on PostgreSQL its
// columns in order (name, type, nullability, default, collation, identity)
// and the definitions of its indexes.
func (e *Env) TableDDL(name string) string {
	e.T.Helper()
	if !e.Postgres {
		var table, ddl string
		if err := e.DB.QueryRow("SHOW CREATE TABLE "+e.Table(name)).Scan(&table, &ddl); err != nil {
			e.T.Fatalf("show create table %s: %v", name, err)
		}
		return ddl
	}
	var b strings.Builder
	line := func(rows *sql.Rows) error {
		var s string
		err := rows.Scan(&s)
		b.WriteString(s + "\n")
		return err
	}
	e.each(`SELECT column_name || ' ' || format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END ||
		COALESCE(' DEFAULT ' || column_default, '') || COALESCE(' COLLATE ' || collation_name, '') || COALESCE(' ' || identity_generation, '')
		FROM information_schema.columns c JOIN pg_attribute a ON a.attrelid = to_regclass(c.table_name) AND a.attname = c.column_name
		WHERE c.table_catalog = ? AND c.table_schema = current_schema() AND c.table_name = ? ORDER BY c.ordinal_position`, line, e.DBName, name)
	e.each("SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = ? ORDER BY indexname", line, name)
	return b.String()
}

// Table returns name qualified with the scenario's database on MySQL, and
// name itself on PostgreSQL, whose harness handle is connected to it.
func (e *Env) Table(name string) string {
	if e.Postgres {
		return name
	}
	return "`" + e.DBName + "`." + name
}

// Cmd returns an erpsync command wired to the Env. Flags in args win over
// the environment it sets.
func (e *Env) Cmd(ctx context.Context, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, e.Bin, args...)
	c.Env = append(os.Environ(),
		testenv.DSNEnv(e.DSN)+"="+e.DSN,
		"ERPSYNC_REDIS_ADDR="+testenv.RedisAddr(),
		"ERPSYNC_ERP_URL="+e.ERPURL,
		"ERPSYNC_JOB="+e.Job,
		"ERPSYNC_LOCK_PREFIX="+e.Prefix,
		"ERPSYNC_LOG_LEVEL=warn",
		"ERPSYNC_LOG_FORMAT=json",
	)
	c.Env = append(c.Env, e.Extra...)
	if len(args) > 0 && args[0] != "migrate" && args[0] != "verify" {
		e.mu.Lock()
		e.procs++
		e.mu.Unlock()
	}
	return c
}

// Processes returns how many erpsync processes (migrate and verify
// excluded) the Env has started.
func (e *Env) Processes() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.procs
}

// Result is how a finished process ended.
type Result struct {
	Code           int
	Stdout, Stderr string
}

// Out is stdout and stderr together.
func (r Result) Out() string { return r.Stdout + r.Stderr }

// Run runs erpsync to completion.
func (e *Env) Run(ctx context.Context, args ...string) Result {
	e.T.Helper()
	c := e.Cmd(ctx, args...)
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	code, err := exitCode(c.Run())
	if err != nil {
		e.T.Fatalf("erpsync %v: %v", args, err)
	}
	return Result{Code: code, Stdout: out.String(), Stderr: errOut.String()}
}

// MustRun runs erpsync to completion and fails the test unless it exits 0.
func (e *Env) MustRun(args ...string) Result {
	e.T.Helper()
	r := e.Run(context.Background(), args...)
	if r.Code != 0 {
		e.T.Fatalf("erpsync %v: exit %d: %s", args, r.Code, r.Out())
	}
	return r
}

// exitCode turns the error of Wait into an exit code; a process killed by a
// signal gets -1. Only an error that is not about the exit is returned.
func exitCode(err error) (int, error) {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		return ee.ExitCode(), nil
	default:
		return 0, err
	}
}

// Proc is an erpsync process running in the background.
type Proc struct {
	Cmd  *exec.Cmd
	out  testenv.SyncBuffer
	done chan struct{}
	res  Result
}

// Start starts erpsync in the background. The process is killed when the
// test ends if it still runs.
func (e *Env) Start(args ...string) *Proc {
	e.T.Helper()
	p := &Proc{Cmd: e.Cmd(context.Background(), args...), done: make(chan struct{})}
	p.Cmd.Stdout, p.Cmd.Stderr = &p.out, &p.out
	if err := p.Cmd.Start(); err != nil {
		e.T.Fatalf("start erpsync %v: %v", args, err)
	}
	go func() {
		code, err := exitCode(p.Cmd.Wait())
		if err != nil {
			code = -1
		}
		p.res = Result{Code: code, Stdout: p.out.String()}
		close(p.done)
	}()
	e.T.Cleanup(func() {
		p.Cmd.Process.Signal(syscall.SIGCONT)
		p.Cmd.Process.Kill()
		<-p.done
	})
	return p
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.Cmd.Process.Signal(sig) }

// Wait waits for the process to end and returns how it ended (code -1: a
// signal ended it). Its combined output is in Result.Stdout.
func (p *Proc) Wait() Result {
	<-p.done
	return p.res
}

// Eventually polls cond every 20 ms until it holds or limit has passed, and
// reports whether it held.
func Eventually(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Count runs a query that returns one integer (like SELECT COUNT(*)); %s
// in query is replaced by the qualified table.
func (e *Env) Count(query, table string, args ...any) int64 {
	var n int64
	if err := e.DB.QueryRow(fmt.Sprintf(query, e.Table(table)), args...).Scan(&n); err != nil {
		e.T.Errorf("%s: %v", query, err)
	}
	return n
}

// WaitRows waits, up to a minute, until memberships has at least n rows.
func (e *Env) WaitRows(n int64) {
	e.T.Helper()
	ok := Eventually(time.Minute, func() bool {
		var got int64
		e.DB.QueryRow("SELECT COUNT(*) FROM " + e.Table("memberships")).Scan(&got)
		return got >= n
	})
	if !ok {
		e.T.Fatalf("memberships never reached %d rows", n)
	}
}

// Watcher polls a table (memberships unless WatchTable says otherwise) and
// remembers every time a row's erp_version went down between two polls.
type Watcher struct {
	stop  chan struct{}
	done  chan struct{}
	polls int
	downs []string
}

// Watch starts a Watcher of memberships; Stop ends it.
func (e *Env) Watch() *Watcher { return e.WatchTable("memberships", "erp_id") }

// WatchTable starts a Watcher of table, whose rows id (an SQL expression,
// like CONCAT(company, '/', customer) for a composite key) tells apart;
// Stop ends it.
func (e *Env) WatchTable(table, id string) *Watcher {
	w := &Watcher{stop: make(chan struct{}), done: make(chan struct{})}
	query := "SELECT " + id + ", erp_version FROM " + e.Table(table)
	go func() {
		defer close(w.done)
		seen := map[string]int64{}
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			if err := w.poll(e.DB, query, seen); err == nil {
				w.polls++
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	e.T.Cleanup(func() { w.Stop() })
	return w
}

func (w *Watcher) poll(db *sql.DB, query string, seen map[string]int64) error {
	rows, err := db.Query(query)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var v int64
		if err := rows.Scan(&id, &v); err != nil {
			return err
		}
		if prev, ok := seen[id]; ok && v < prev && len(w.downs) < 20 {
			w.downs = append(w.downs, fmt.Sprintf("%s: %d -> %d", id, prev, v))
		}
		seen[id] = max(seen[id], v)
	}
	return rows.Err()
}

// Stop ends the watcher (after one last poll) and returns how many polls
// it made and the versions that went down (empty: none did).
func (w *Watcher) Stop() (polls int, downs []string) {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	return w.polls, w.downs
}

// State compares memberships with the ERP's truth.
type State struct {
	Truth    int   // valid records in the ERP
	Rows     int64 // rows in memberships
	Distinct int64 // distinct erp_ids in memberships
	Missing  int   // in the truth, no row
	Stale    int   // a row at another version than the truth
	Unknown  int   // a row the truth does not have
	Example  string
}

// Duplicates is the number of rows beyond one per erp_id.
func (s State) Duplicates() int64 { return s.Rows - s.Distinct }

// OK reports whether the table is the truth, one row per erp_id.
func (s State) OK() bool {
	return s.Missing == 0 && s.Stale == 0 && s.Unknown == 0 && s.Duplicates() == 0 &&
		s.Rows == int64(s.Truth)
}

func (s State) String() string {
	return fmt.Sprintf("truth %d, rows %d (%d distinct), missing %d, stale %d, unknown %d%s",
		s.Truth, s.Rows, s.Distinct, s.Missing, s.Stale, s.Unknown, s.Example)
}

// Check reads the live rows of memberships (soft-deleted ones are absent)
// and compares them with the mock's truth.
func (e *Env) Check() State {
	e.T.Helper()
	truth := map[string]int64{}
	for _, r := range e.Mock.Truth() {
		truth[r.ErpID] = r.Version
	}
	s := State{Truth: len(truth)}
	if err := e.DB.QueryRow("SELECT COUNT(*), COUNT(DISTINCT erp_id) FROM "+e.Table("memberships")+" WHERE deleted_at IS NULL").Scan(&s.Rows, &s.Distinct); err != nil {
		e.T.Fatalf("count memberships: %v", err)
	}
	seen := map[string]bool{}
	e.each("SELECT erp_id, erp_version FROM "+e.Table("memberships")+" WHERE deleted_at IS NULL", func(rows *sql.Rows) error {
		var id string
		var v int64
		if err := rows.Scan(&id, &v); err != nil {
			return err
		}
		seen[id] = true
		want, ok := truth[id]
		switch {
		case !ok:
			s.Unknown++
			s.example("unknown " + id)
		case v != want:
			s.Stale++
			s.example(fmt.Sprintf("%s v%d, want v%d", id, v, want))
		}
		return nil
	})
	ids := make([]string, 0)
	for id := range truth {
		if !seen[id] {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	s.Missing = len(ids)
	if len(ids) > 0 {
		s.example("missing " + ids[0])
	}
	return s
}

func (s *State) example(what string) {
	if s.Example == "" {
		s.Example = "; e.g. " + what
	}
}

// Verify runs `erpsync verify --json --ignore-invalid` (the ERP's faults
// should be off) and returns its result and exit code: the rows against the
// feed's valid records, whatever invalid items the feed has.
func (e *Env) Verify(ctx context.Context) (*verify.Result, int) {
	e.T.Helper()
	r := e.Run(ctx, "verify", "--json", "--ignore-invalid")
	var res verify.Result
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		e.T.Fatalf("verify --json exit %d: %v\n%s", r.Code, err, r.Out())
	}
	return &res, r.Code
}

// ReadReport reads a run report written with --report.
func ReadReport(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("read report %s: %w", path, err)
	}
	return m, nil
}

// Sessions returns the ids of erpsync's connections to the scenario's
// database: on MySQL those whose current database is the scenario's (the
// harness's own have none), on PostgreSQL the backends named erpsync.
func (e *Env) Sessions() []int64 {
	var ids []int64
	query := "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ?"
	if e.Postgres {
		query = "SELECT pid FROM pg_stat_activity WHERE datname = ? AND application_name = 'erpsync'"
	}
	e.each(query, func(rows *sql.Rows) error {
		var id int64
		err := rows.Scan(&id)
		ids = append(ids, id)
		return err
	}, e.DBName)
	return ids
}

// each runs query on the harness's handle and calls fn for every row; an
// error fails the test.
func (e *Env) each(query string, fn func(*sql.Rows) error, args ...any) {
	e.T.Helper()
	rows, err := e.DB.Query(query, args...)
	if err != nil {
		e.T.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			e.T.Fatalf("%s: %v", query, err)
		}
	}
	if err := rows.Err(); err != nil {
		e.T.Fatalf("%s: %v", query, err)
	}
}

// KillSessions kills every erpsync connection to the scenario's database
// (KILL CONNECTION, pg_terminate_backend) and returns how many it killed.
func (e *Env) KillSessions() int {
	n := 0
	for _, id := range e.Sessions() {
		kill := fmt.Sprintf("KILL CONNECTION %d", id)
		if e.Postgres {
			kill = fmt.Sprintf("SELECT pg_terminate_backend(%d)", id)
		}
		// A session may end by itself between the read and the kill.
		if _, err := e.DB.Exec(kill); err == nil {
			n++
		}
	}
	return n
}

// FreeAddr returns a 127.0.0.1 address nothing listened on a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
}

// Lines returns the non-empty lines of s.
func Lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}
