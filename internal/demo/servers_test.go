package demo

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/lock"
)

// TestEmbeddedRedisRunsLockScripts runs every lock script on the embedded
// Redis: TIME, string.format('%.0f'), SET NX PX, PEXPIRE, PTTL and the
// multi-key scripts, and shows that a lease runs out with the wall clock.
func TestEmbeddedRedisRunsLockScripts(t *testing.T) {
	r, err := startRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	ctx := context.Background()
	locks := lock.New(rdb, &lock.Options{Prefix: "t:"})

	asked := time.Now()
	l, err := locks.Obtain(ctx, "a", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The first token comes from TIME in microseconds, stored without an
	// exponent.
	if now := time.Now().UnixMicro(); l.Fence() < now-60e6 || l.Fence() > now+60e6 {
		t.Errorf("fence %d, want about %d (TIME in microseconds)", l.Fence(), now)
	}
	// The epoch counter holds it; the counter, the bound of the epoch,
	// the multiple of 500 at or above it (see lock's obtain.lua).
	// The epoch lives 10 ms: on a loaded machine it may be over already.
	stored, err := rdb.Get(ctx, "t:server:fence:epoch").Result()
	if over := errors.Is(err, redis.Nil) && time.Since(asked) >= 10*time.Millisecond; !over && (err != nil || stored != strconv.FormatInt(l.Fence(), 10)) {
		t.Errorf("epoch counter %q (%v), want %d", stored, err, l.Fence())
	}
	bound, err := rdb.Get(ctx, "t:server:fence").Int64()
	if err != nil || bound%500 != 0 || bound < l.Fence() || bound >= l.Fence()+500 {
		t.Errorf("fence counter %d (%v), want the multiple of 500 at or above %d", bound, err, l.Fence())
	}
	if _, err := locks.Obtain(ctx, "a", time.Minute, nil); !errors.Is(err, lock.ErrNotObtained) {
		t.Errorf("second Obtain = %v, want ErrNotObtained", err)
	}
	if err := l.Refresh(ctx, 2*time.Minute); err != nil {
		t.Errorf("Refresh: %v", err)
	}
	if ttl, err := l.TTL(ctx); err != nil || ttl < time.Minute {
		t.Errorf("TTL = %v, %v; want over a minute after Refresh", ttl, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}

	many, err := locks.ObtainMany(ctx, []string{"a", "b", "c"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range many {
		if m == nil {
			t.Fatalf("ObtainMany: lock %d not granted", i)
		}
		if i > 0 && m.Fence() <= many[i-1].Fence() {
			t.Errorf("ObtainMany fences %d then %d, want increasing", many[i-1].Fence(), m.Fence())
		}
	}
	if many[0].Fence() <= l.Fence() {
		t.Errorf("fence %d after %d, want increasing", many[0].Fence(), l.Fence())
	}
	if notHeld, err := locks.ReleaseMany(ctx, many); err != nil || notHeld != 0 {
		t.Errorf("ReleaseMany = %d, %v", notHeld, err)
	}

	// A lease left behind runs out by itself.
	if _, err := locks.Obtain(ctx, "left", 200*time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200*time.Millisecond + 3*expireEvery)
	if _, err := locks.Obtain(ctx, "left", time.Second, nil); err != nil {
		t.Errorf("Obtain after the lease ran out: %v", err)
	}
}

// TestEmbeddedMySQLFailedStatementLeavesNoStaleSession: after a statement
// fails, its connection sees the other connections' commits again, and the
// UNIQUE index still holds (see serialHandler.rollback).
func TestEmbeddedMySQLFailedStatementLeavesNoStaleSession(t *testing.T) {
	ctx := context.Background()
	st := embeddedStore(t, "erpsync_failed")
	db, err := st.DB().DB()
	if err != nil {
		t.Fatal(err)
	}
	c1, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	c2, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	const ins = "INSERT INTO memberships (erp_id, member_id, product_code, status, starts_at, erp_version, erp_updated_at, fence_token, created_at, updated_at)" +
		" VALUES (?, 'U', 'P', 'active', UTC_TIMESTAMP(3), 1, UTC_TIMESTAMP(3), 1, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))"
	if _, err := c1.ExecContext(ctx, ins, "A"); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.ExecContext(ctx, ins, "A"); err == nil {
		t.Fatal("second insert of A: no error, want a duplicate key")
	}
	if _, err := c2.ExecContext(ctx, ins, "B"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := c1.QueryRowContext(ctx, "SELECT COUNT(*) FROM memberships").Scan(&n); err != nil || n != 2 {
		t.Errorf("after a failed statement the connection sees %d rows (%v), want 2", n, err)
	}
	if _, err := c1.ExecContext(ctx, ins, "B"); err == nil {
		t.Error("insert of B over the other connection's B: no error, want a duplicate key")
	}
	var rows, distinct int
	if err := c2.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT erp_id) FROM memberships").Scan(&rows, &distinct); err != nil || rows != 2 || distinct != 2 {
		t.Errorf("%d rows, %d erp_ids (%v); want 2 and 2", rows, distinct, err)
	}
}

// TestEmbeddedMySQLTakesTheStoreLiterals: the store writes its values into
// the statement text (hex with a utf8mb4 introducer for anything but plain
// ASCII); the embedded server reads them back as they were.
func TestEmbeddedMySQLTakesTheStoreLiterals(t *testing.T) {
	ctx := context.Background()
	st := embeddedStore(t, "erpsync_literals")
	at := time.Date(2025, 3, 4, 5, 6, 7, 123e6, time.UTC)
	names := []string{"plain", "it's", `back\slash`, "ünïcødé 日本", "emoji 🎉"}
	var ms []store.Membership
	for i, s := range names {
		ms = append(ms, store.Membership{ErpID: "E" + strconv.Itoa(i), MemberID: s, ProductCode: "P", Status: "active",
			StartsAt: at, Version: 1, UpdatedAt: at, Fence: 1})
	}
	if err := st.Insert(ctx, ms); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		var got string
		if err := st.DB().Raw("SELECT member_id FROM memberships WHERE erp_id = ?", m.ErpID).Row().Scan(&got); err != nil || got != m.MemberID {
			t.Errorf("%s: member_id %q (%v), want %q", m.ErpID, got, err, m.MemberID)
		}
	}
	if err := st.Insert(ctx, ms[:1]); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("second insert: %v, want ErrDuplicate", err)
	}
}

// embeddedStore returns a store on a migrated database of an embedded
// MySQL server of the test's own.
func embeddedStore(t *testing.T, name string) *store.Store {
	t.Helper()
	ctx := context.Background()
	dsn := StartMySQLForTest(t).DSN(name)
	if _, err := store.Migrate(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, dsn, &store.Options{NoLoadData: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestEmbeddedMySQLKeepsTheOutbox: writers with events on the embedded
// server, many at once as the demo's instances are, each guarded upsert in
// a transaction with its events (SELECT ... FOR UPDATE, the upsert, the
// read back, the outbox INSERT). Each key's events must be the story of
// its row: an insert first, versions rising, the last one at the row's
// version, each (key, version) once; the UNIQUE index on the event's
// identity drops a change recorded twice; the relay's reads and marks run.
func TestEmbeddedMySQLKeepsTheOutbox(t *testing.T) {
	ctx := context.Background()
	st := embeddedStore(t, "erpsync_outbox").For(eventsTable)
	const keys, writers, top = 60, 4, 6
	at := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	row := func(k int, v int64) store.Membership {
		return store.Membership{ErpID: "K" + strconv.Itoa(k), MemberID: "U" + strconv.FormatInt(v, 10), ProductCode: "P", Status: "ACTIVE",
			StartsAt: at, Version: v, UpdatedAt: at.Add(time.Duration(v) * time.Second), Fence: 1}
	}
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			// Chunks of 10 keys at random versions, then every key at top.
			for round := range 2*keys/10 + keys/10 {
				var ms []store.Membership
				for k := range 10 {
					key := (round*10 + k) % keys
					v := int64(1 + rng.IntN(top-1))
					if round >= 2*keys/10 {
						v = top
					}
					ms = append(ms, row(key, v))
				}
				if err := st.Upsert(ctx, ms); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	db, err := st.DB().DB()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.QueryContext(ctx, "SELECT entity_key, op, version FROM erpsync_events ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	story := map[string][]string{}
	last := map[string]int64{}
	n := 0
	for rows.Next() {
		var key, op string
		var v int64
		if err := rows.Scan(&key, &op, &v); err != nil {
			t.Fatal(err)
		}
		n++
		prev, seen := last[key]
		if seen == (op == "insert") || op != "insert" && op != "update" || v <= prev {
			t.Errorf("key %s: %s v%d after %v", key, op, v, story[key])
		}
		story[key] = append(story[key], op+" v"+strconv.FormatInt(v, 10))
		last[key] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	var stored int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM memberships WHERE erp_version = ?", top).Scan(&stored); err != nil || stored != keys || len(last) != keys {
		t.Errorf("%d rows at version %d (%v), %d keys with events; want %d", stored, top, err, len(last), keys)
	}
	for k, v := range last {
		if v != top {
			t.Errorf("key %s: last event at version %d, the row at %d: %v", k, v, top, story[k])
		}
	}

	// A change recorded again is dropped by the UNIQUE index.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	again := outbox.Event{Entity: "memberships", Key: map[string]any{"erp_id": "K0"}, Op: outbox.OpUpdate, Version: top, RunID: "r", Data: map[string]any{}}
	if err := outbox.NewInsertRecorder().Record(ctx, tx, []outbox.Event{again}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	ob := outbox.New(db)
	pending, err := ob.Pending(ctx, 1000)
	if err != nil || len(pending) != n {
		t.Fatalf("%d pending (%v), want the %d recorded", len(pending), err, n)
	}
	if err := ob.MarkDelivered(ctx, 7, []int64{pending[0].Seq, pending[1].Seq}); err != nil {
		t.Fatal(err)
	}
	if err := ob.MarkDelivered(ctx, 6, []int64{pending[2].Seq}); !errors.Is(err, outbox.ErrFenced) {
		t.Errorf("mark under an older token: %v, want ErrFenced", err)
	}
	stats, err := ob.Stats(ctx)
	if err != nil || stats.Pending() != int64(n-2) || len(stats.Entities) != 1 || stats.Entities[0].Delivered != 2 {
		t.Errorf("stats %+v (%v), want %d pending and 2 delivered", stats, err, n-2)
	}
}

// TestEmbeddedMySQLServesTheRelayFirst: while a transaction holds the
// server's turn, writers queue for it; the relay's connection (firstUser),
// queued last, writes first once the transaction commits, and the others
// all write after it. Several rounds, since the order among waiters that
// the priority did not fix is the scheduler's.
func TestEmbeddedMySQLServesTheRelayFirst(t *testing.T) {
	ctx := context.Background()
	m := StartMySQLForTest(t)
	open := func(dsn string) *sql.DB {
		st, err := store.Open(ctx, dsn, &store.Options{NoLoadData: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		db, err := st.DB().DB()
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	if _, err := store.Migrate(ctx, m.DSN("erpsync_first")); err != nil {
		t.Fatal(err)
	}
	others, first := open(m.DSN("erpsync_first")), open(m.FirstDSN("erpsync_first"))
	if _, err := others.ExecContext(ctx, "CREATE TABLE turns (id BIGINT AUTO_INCREMENT PRIMARY KEY, round INT NOT NULL, who VARCHAR(16) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	// waitFor waits until n connections wait for the turn, first of them
	// of firstUser.
	waitFor := func(n, first int) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			h := m.serial
			h.mu.Lock()
			w, f := h.waiting, h.first
			h.mu.Unlock()
			if w == n && f == first {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d connections wait for the turn (%d of them first), want %d (%d)", w, f, n, first)
			}
		}
	}
	const writers = 6
	for round := range 10 {
		tx, err := others.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO turns (round, who) VALUES (?, 'holder')", round); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, writers+1)
		write := func(i int, db *sql.DB, who string) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = db.ExecContext(ctx, "INSERT INTO turns (round, who) VALUES (?, ?)", round, who)
			}()
		}
		for i := range writers {
			write(i, others, "other")
		}
		waitFor(writers, 0)
		write(writers, first, "relay")
		waitFor(writers+1, 1)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		rows, err := others.QueryContext(ctx, "SELECT who FROM turns WHERE round = ? ORDER BY id", round)
		if err != nil {
			t.Fatal(err)
		}
		var order []string
		for rows.Next() {
			var who string
			if err := rows.Scan(&who); err != nil {
				t.Fatal(err)
			}
			order = append(order, who)
		}
		rows.Close()
		if len(order) != writers+2 || order[0] != "holder" || order[1] != "relay" {
			t.Errorf("round %d: writes in the order %v, want the holder's, the relay's, then the others'", round, order)
		}
	}
}

// TestEmbeddedMySQLUTCTimestamp: the cheaper UTC_TIMESTAMP (provider)
// answers the time as go-mysql-server's, whatever the precision, and
// rejects what go-mysql-server's rejects.
func TestEmbeddedMySQLUTCTimestamp(t *testing.T) {
	ctx := context.Background()
	st := embeddedStore(t, "erpsync_utc")
	db, err := st.DB().DB()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SELECT UTC_TIMESTAMP()", "SELECT UTC_TIMESTAMP(0)", "SELECT UTC_TIMESTAMP(3)", "SELECT UTC_TIMESTAMP(6)"} {
		before := time.Now().UTC().Truncate(time.Second)
		var got time.Time
		if err := db.QueryRowContext(ctx, q).Scan(&got); err != nil {
			t.Errorf("%s: %v", q, err)
			continue
		}
		if after := time.Now().UTC(); got.Before(before) || got.After(after) || got.Location() != time.UTC {
			t.Errorf("%s: %v, want UTC between %v and %v", q, got, before, after)
		}
	}
	for _, q := range []string{"SELECT UTC_TIMESTAMP(7)", "SELECT UTC_TIMESTAMP(-1)", "SELECT UTC_TIMESTAMP('x')", "SELECT UTC_TIMESTAMP(1, 2)"} {
		var got any
		if err := db.QueryRowContext(ctx, q).Scan(&got); err == nil {
			t.Errorf("%s: %v, want an error", q, got)
		}
	}
}
