package demo

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	sqle "github.com/dolthub/go-mysql-server"
	"github.com/dolthub/go-mysql-server/memory"
	gmsserver "github.com/dolthub/go-mysql-server/server"
	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/expression"
	"github.com/dolthub/go-mysql-server/sql/expression/function"
	"github.com/dolthub/go-mysql-server/sql/types"
	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/sqltypes"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"
	"github.com/sirupsen/logrus"
)

// embeddedRedis is miniredis on a loopback port. miniredis expires keys
// only when told to (FastForward); a real Redis expires them with the wall
// clock, and a lock of a crashed holder must run out. A ticker moves the
// TTLs with the clock every expireEvery. (miniredis's ClockTTL does this on
// every command instead, sorting every key each time: with the demo's tens
// of thousands of lock and fence keys, the lock scripts then took seconds.)
type embeddedRedis struct {
	m    *miniredis.Miniredis
	stop chan struct{}
	done chan struct{}
}

const expireEvery = 100 * time.Millisecond

func startRedis() (*embeddedRedis, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("start embedded redis: %w", err)
	}
	r := &embeddedRedis{m: m, stop: make(chan struct{}), done: make(chan struct{})}
	go r.expire()
	return r, nil
}

func (r *embeddedRedis) expire() {
	defer close(r.done)
	tick := time.NewTicker(expireEvery)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case now := <-tick.C:
			r.m.FastForward(now.Sub(last))
			last = now
		case <-r.stop:
			return
		}
	}
}

func (r *embeddedRedis) Addr() string { return r.m.Addr() }

func (r *embeddedRedis) Close() {
	close(r.stop)
	<-r.done
	r.m.Close()
}

// embeddedMySQL is go-mysql-server with an in-memory catalog, speaking the
// MySQL protocol on a loopback port. The clients are unchanged: the same
// driver, pool and statements as against MySQL, store.Migrate included,
// each sync instance with its own connection pool.
//
// These things differ from a real server, all for the in-memory tables or
// go-mysql-server's cost:
//   - They are not safe for concurrent writes (two sessions edit one table's
//     rows in place; go-mysql-server's README says so), so the server runs
//     one command at a time over all connections (serialHandler), the
//     relay's first (firstUser).
//   - They have no index structure: every lookup, and every UNIQUE check of
//     an inserted row, scans the table. The cost of the demo grows with the
//     square of the records (5,000 take seconds, 20,000 minutes), hence the
//     smaller default on the embedded servers. See analyzerWithoutIndexScans
//     for the one planner change that keeps the scans cheap.
//   - The DSN sets the connection collation to utf8mb4_bin, binary as the
//     key columns' utf8mb4_0900_bin is (the driver cannot name that one):
//     with a case-insensitive one, each comparison converted both sides,
//     which made inserts up to five times slower.
//   - UTC_TIMESTAMP(n) is planned without building a session (provider).
type embeddedMySQL struct {
	srv    *gmsserver.Server
	serial *serialHandler
	addr   string
	done   chan struct{}
}

func startMySQL() (*embeddedMySQL, error) {
	// go-mysql-server logs through logrus's standard logger: keep its
	// start-up warnings (secure_file_priv) and connection lines out of the
	// demo's output. Nothing else in erpsync uses logrus.
	logrus.SetLevel(logrus.ErrorLevel)

	pro := memory.NewDBProvider()
	engine := sqle.New(analyzerWithoutIndexScans(provider{pro}), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start embedded mysql: %w", err)
	}
	cfg := gmsserver.Config{
		Protocol: "tcp",
		Address:  ln.Addr().String(),
		Listener: ln,
		Version:  "8.0.33-go-mysql-server",
	}
	var sh *serialHandler
	serial := func(h mysql.Handler) (mysql.Handler, error) {
		sh = newSerialHandler(h)
		return sh, nil
	}
	srv, err := gmsserver.NewServerWithHandler(cfg, engine, sql.NewContext, memory.NewSessionBuilder(pro), nil, serial)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("start embedded mysql: %w", err)
	}
	e := &embeddedMySQL{srv: srv, serial: sh, addr: ln.Addr().String(), done: make(chan struct{})}
	go func() {
		defer close(e.done)
		_ = srv.Start()
	}()
	return e, nil
}

// analyzerWithoutIndexScans is go-mysql-server's default analyzer less the
// rule that plans index lookups (optimizeJoins, whose last step is
// costedIndexScans). The in-memory tables answer an index lookup by
// scanning every row and testing it against every range, so that
// store.Versions's "erp_id IN (100 ids)" cost 100 comparisons a row: 3,000
// records took 55 s instead of 10 s. Without the rule the query is a scan
// with one hash lookup a row. The statements keep their meaning; none of
// erpsync's has a join. If a later go-mysql-server renames the rule, the
// analyzer stays the default one and the demo is only slower.
func analyzerWithoutIndexScans(pro sql.DatabaseProvider) *analyzer.Analyzer {
	b := analyzer.NewBuilder(pro)
	for id := analyzer.RuleId(0); id < 1024; id++ {
		if id.String() == "optimizeJoins" {
			b.RemoveOnceAfterRule(id)
		}
	}
	return b.Build()
}

// provider is the in-memory databases, with a UTC_TIMESTAMP cheaper to
// plan. go-mysql-server's evaluates the precision argument in a new empty
// context, a session with every status and system variable: erpsync
// writes UTC_TIMESTAMP(3) in each row it inserts (a membership's
// timestamps, an event's recorded_at), and that was a third of the demo's
// CPU time. The value is the same: go-mysql-server ignores the precision
// when it evaluates, and the DATETIME(3) columns round.
type provider struct{ *memory.DbProvider }

// Function is the UTC_TIMESTAMP of provider; the other functions are
// go-mysql-server's.
func (provider) Function(_ *sql.Context, name string) (sql.Function, bool) {
	if name != "utc_timestamp" {
		return nil, false
	}
	return sql.FunctionN{Name: name, Fn: utcTimestamp}, true
}

// utcTimestamp is UTC_TIMESTAMP with a literal precision of 0 to 6 planned
// as UTC_TIMESTAMP(); any other arguments go to go-mysql-server's, which
// rejects them.
func utcTimestamp(args ...sql.Expression) (sql.Expression, error) {
	if len(args) == 1 {
		if lit, ok := args[0].(*expression.Literal); ok {
			if p, _, err := types.Int32.Convert(context.Background(), lit.Value()); err == nil && p.(int32) >= 0 && p.(int32) <= 6 {
				return function.NewUTCTimestamp()
			}
		}
	}
	return function.NewUTCTimestamp(args...)
}

func (e *embeddedMySQL) Addr() string { return e.addr }

// DSN is the DSN of database db on the embedded server.
func (e *embeddedMySQL) DSN(db string) string { return e.dsnOf("root", db) }

// FirstDSN is the DSN of database db for a connection that takes the turn
// before the others (see firstUser).
func (e *embeddedMySQL) FirstDSN(db string) string { return e.dsnOf(firstUser, db) }

func (e *embeddedMySQL) dsnOf(user, db string) string {
	return user + "@tcp(" + e.addr + ")/" + db + "?parseTime=true&collation=utf8mb4_bin"
}

func (e *embeddedMySQL) Close() {
	_ = e.srv.Close()
	<-e.done
}

// serialHandler runs the commands of every connection one at a time, and
// a transaction's commands as one: from START TRANSACTION (or BEGIN) to
// COMMIT or ROLLBACK, the connection keeps the server's turn. The
// in-memory tables give each transaction a snapshot and publish it whole
// at COMMIT, with no conflict check: two transactions that overlapped lost
// one's rows and recorded a key's change events out of order (a writer
// with events reads its rows FOR UPDATE, which these tables do not lock).
// Run one after the other, they are serializable.
type serialHandler struct {
	mysql.Handler
	mu   sync.Mutex // guards the fields below
	free *sync.Cond // signalled when the turn is given up
	busy bool       // a connection holds the turn
	// waiting counts the connections waiting for the turn, first those of
	// firstUser among them.
	waiting, first int
	// tx is the connection whose transaction holds the turn; nil when none.
	tx atomic.Pointer[mysql.Conn]
}

// firstUser is the user whose connections take the turn before the
// others waiting: the demo's relay and its pruning. After each statement
// that changes a table, the in-memory tables sort its rows again, and each
// row moved moves every index entry: marking 300 events delivered took
// 0.06 s in an outbox of 300, 1.3 s of 1,000 and 7 s of 2,000. So the
// relay must keep the outbox as small as the few batches in flight, and
// it fell behind while it waited behind every instance's turn.
const firstUser = "relay"

func newSerialHandler(h mysql.Handler) *serialHandler {
	s := &serialHandler{Handler: h}
	s.free = sync.NewCond(&s.mu)
	return s
}

// turn waits for c's turn, unless c's transaction holds it already.
func (h *serialHandler) turn(c *mysql.Conn) {
	if h.tx.Load() == c {
		return
	}
	first := c.User == firstUser
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waiting++
	if first {
		h.first++
	}
	for h.busy || !first && h.first > 0 {
		h.free.Wait()
	}
	h.waiting--
	if first {
		h.first--
	}
	h.busy = true
}

// release gives up the turn.
func (h *serialHandler) release() {
	h.mu.Lock()
	h.busy = false
	h.mu.Unlock()
	h.free.Broadcast()
}

// done ends c's turn after a command: a transaction that began keeps it,
// one that ended (or a failed statement, which serialHandler rolls back)
// gives it up.
func (h *serialHandler) done(ctx context.Context, c *mysql.Conn, query string, err error) {
	if err != nil {
		h.rollback(ctx, c)
	}
	switch held := h.tx.Load() == c; {
	case held && (err != nil || endsTx(query)):
		h.tx.Store(nil)
		h.release()
	case held:
	case err == nil && beginsTx(query):
		h.tx.Store(c)
	default:
		h.release()
	}
}

// beginsTx and endsTx tell the statements that open and close a
// transaction, as go-sql-driver sends them.
func beginsTx(query string) bool {
	q := strings.ToUpper(strings.TrimSpace(query))
	return strings.HasPrefix(q, "START TRANSACTION") || q == "BEGIN" || strings.HasPrefix(q, "BEGIN ")
}

func endsTx(query string) bool {
	q := strings.ToUpper(strings.TrimSpace(query))
	return strings.HasPrefix(q, "COMMIT") || strings.HasPrefix(q, "ROLLBACK")
}

func (h *serialHandler) ComInitDB(c *mysql.Conn, schemaName string) error {
	h.turn(c)
	defer h.done(context.Background(), c, "", nil)
	return h.Handler.ComInitDB(c, schemaName)
}

func (h *serialHandler) ComQuery(ctx context.Context, c *mysql.Conn, query string, callback mysql.ResultSpoolFn) error {
	if touchesNoTable(query) {
		err := h.Handler.ComQuery(ctx, c, query, callback)
		if err != nil {
			h.turn(c)
			h.done(ctx, c, query, err)
		}
		return err
	}
	h.turn(c)
	err := h.Handler.ComQuery(ctx, c, query, callback)
	h.done(ctx, c, query, err)
	return err
}

// rollback ends the transaction a failed statement leaves open. In
// autocommit, go-mysql-server does not end the statement's transaction when
// the statement fails (a UNIQUE violation, say), and the session keeps its
// snapshot of the in-memory tables: it no longer sees other connections'
// commits, and its next write publishes the stale snapshot, losing theirs
// (seen: another connection's row vanished, and the same erp_id was then
// inserted a second time past the UNIQUE index). Inside an explicit
// transaction, erpsync's writers roll back on any error, so ending it
// there loses nothing either: the client's ROLLBACK then finds none.
func (h *serialHandler) rollback(ctx context.Context, c *mysql.Conn) {
	discard := func(*sqltypes.Result, bool) error { return nil }
	_ = h.Handler.ComQuery(ctx, c, "ROLLBACK", discard)
}

// touchesNoTable reports whether query is a named-lock call (store.Migrate's
// GET_LOCK and RELEASE_LOCK). It runs outside the server's turn: GET_LOCK
// waits for another connection's RELEASE_LOCK, which needs that turn.
func touchesNoTable(query string) bool {
	q := strings.ToUpper(strings.TrimSpace(query))
	return strings.HasPrefix(q, "SELECT GET_LOCK(") || strings.HasPrefix(q, "SELECT RELEASE_LOCK(")
}

func (h *serialHandler) ComMultiQuery(ctx context.Context, c *mysql.Conn, query string, callback mysql.ResultSpoolFn) (string, error) {
	h.turn(c)
	rest, err := h.Handler.ComMultiQuery(ctx, c, query, callback)
	h.done(ctx, c, query, err)
	return rest, err
}

func (h *serialHandler) ComPrepare(ctx context.Context, c *mysql.Conn, query string, prepare *mysql.PrepareData) ([]*querypb.Field, error) {
	h.turn(c)
	defer h.done(ctx, c, "", nil)
	return h.Handler.ComPrepare(ctx, c, query, prepare)
}

func (h *serialHandler) ComStmtExecute(ctx context.Context, c *mysql.Conn, prepare *mysql.PrepareData, callback func(*sqltypes.Result) error) error {
	h.turn(c)
	err := h.Handler.ComStmtExecute(ctx, c, prepare, callback)
	h.done(ctx, c, prepare.PrepareStmt, err)
	return err
}

func (h *serialHandler) ComResetConnection(c *mysql.Conn) error {
	h.turn(c)
	defer h.done(context.Background(), c, "ROLLBACK", nil) // a reset ends the session's transaction
	return h.Handler.ComResetConnection(c)
}

// ConnectionClosed ends the connection's transaction with it: a client
// that dropped the connection mid-transaction gives up the turn. A
// connection without a transaction has nothing to roll back and closes
// without the turn: one closed while another's transaction held it waited
// for it as a statement does, counted among the waiting.
func (h *serialHandler) ConnectionClosed(c *mysql.Conn) {
	if h.tx.Load() != c {
		h.Handler.ConnectionClosed(c)
		return
	}
	// c's transaction holds the turn.
	defer h.done(context.Background(), c, "ROLLBACK", nil)
	h.Handler.ConnectionClosed(c)
}

// httpServer is a handler served over HTTP on a loopback port: erpmock,
// the webhook.
type httpServer struct {
	srv  *http.Server
	url  string
	done chan error
}

// serveHTTP serves h; what names it in an error.
func serveHTTP(h http.Handler, what string) (*httpServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", what, err)
	}
	s := &httpServer{
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		url:  "http://" + ln.Addr().String(),
		done: make(chan error, 1),
	}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

func (s *httpServer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.done // http.ErrServerClosed, or an accept error the demo has outlived
}
