package demo

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
	st, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
