package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/erpsync/erpsync/internal/ctxtime"
	"github.com/erpsync/erpsync/internal/dberr"
)

// connPatience bounds how long a pool that holds one connection or none
// waits while the server has none to spare; regrowAfter is how long a
// pool shrunk to the connections it had stays so.
const (
	connPatience = 30 * time.Second
	regrowAfter  = 5 * time.Second
)

// patientConnector connects as its Connector does, and takes a refusal
// for having no connection to spare (full: the server's max_connections,
// or a user's or database's connection limit) as back-pressure, not as
// the failure of the statement that asked: several erpsync processes
// beside an application can ask for more connections than the server
// allows at one moment.
//
//   - A pool that holds two connections or more is bounded to them (for
//     regrowAfter), and the statement is run again by database/sql
//     (driver.ErrBadConn) on one of them as it comes free.
//   - A pool that holds one or none tries again, with a pause that grows
//     to a second, for up to connPatience or the end of ctx: other
//     clients' connections come free as they end. One is not enough to
//     wait for: it may be the relay's listener (outbox.Listen), which a
//     pool never gets back.
type patientConnector struct {
	driver.Connector
	full    func(error) bool
	pool    *sql.DB
	size    int          // the pool's own bound
	pending atomic.Int64 // Connect calls under way
	mu      sync.Mutex
	shrunk  bool
}

// patientPool opens a pool of at most size connections made by c, patient
// while full says the server has none to spare.
func patientPool(c driver.Connector, full func(error) bool, size int) *sql.DB {
	p := &patientConnector{Connector: c, full: full, size: size}
	p.pool = sql.OpenDB(p)
	p.pool.SetMaxOpenConns(size)
	p.pool.SetMaxIdleConns(size)
	return p.pool
}

func (p *patientConnector) Connect(ctx context.Context) (driver.Conn, error) {
	p.pending.Add(1)
	defer p.pending.Add(-1)
	deadline := time.Now().Add(connPatience)
	for pause := 20 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		c, err := p.Connector.Connect(ctx)
		if err == nil || !p.full(err) {
			return c, err
		}
		if p.shrink() {
			return nil, fmt.Errorf("%w: %w", driver.ErrBadConn, err)
		}
		if time.Now().Add(pause).After(deadline) || ctxtime.Sleep(ctx, pause) != nil {
			return nil, err
		}
	}
}

// shrink bounds the pool to the connections it holds, when it holds two
// or more, until regrowAfter has passed, and reports whether it did.
func (p *patientConnector) shrink() bool {
	held := p.pool.Stats().OpenConnections - int(p.pending.Load())
	if held < 2 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pool.SetMaxOpenConns(held)
	if !p.shrunk {
		p.shrunk = true
		time.AfterFunc(regrowAfter, p.regrow)
	}
	return true
}

// regrow gives the pool its own bound back.
func (p *patientConnector) regrow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shrunk = false
	p.pool.SetMaxOpenConns(p.size)
	p.pool.SetMaxIdleConns(p.size)
}

// mysqlFull reports whether MySQL refused a connection for its limits:
// 1040 (max_connections), 1203 (max_user_connections) or 1226 (an
// account's MAX_USER_CONNECTIONS).
func mysqlFull(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1040 || me.Number == 1203 || me.Number == 1226)
}

// pgFull reports whether PostgreSQL refused a connection for its limits
// (too_many_connections).
func pgFull(err error) bool { return dberr.PgCode(err) == pgTooManyConnections }
