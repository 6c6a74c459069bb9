package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/outbox/outboxtest"
)

// setup is a fresh database of the test matrix with the outbox's tables.
func setup(t *testing.T) (*outboxtest.DB, *outbox.Outbox) {
	t.Helper()
	db := outboxtest.Open(t)
	return db, db.Outbox
}

func record(t *testing.T, db *outboxtest.DB, evs ...outbox.Event) {
	t.Helper()
	db.Record(t, evs...)
}

func ev(key string, version int64, op string) outbox.Event {
	return outbox.Event{Entity: "customers", Key: map[string]any{"company": "1000", "customer": key}, Op: op, Version: version, RunID: "run-1",
		Data: map[string]any{"company": "1000", "customer": key, "credit_limit": "1234.50", "founded_on": "2020-01-31"}}
}

func TestIDIsDeterministic(t *testing.T) {
	a := outbox.ID("customers", `{"customer":"C1"}`, 7, outbox.OpInsert, 0)
	if b := outbox.ID("customers", `{"customer":"C1"}`, 7, outbox.OpInsert, 0); a != b {
		t.Fatalf("ids %s and %s of one change", a, b)
	}
	for _, other := range []string{
		outbox.ID("customers", `{"customer":"C1"}`, 8, outbox.OpInsert, 0),
		outbox.ID("customers", `{"customer":"C1"}`, 7, outbox.OpUpdate, 0),
		outbox.ID("customers", `{"customer":"C2"}`, 7, outbox.OpInsert, 0),
		outbox.ID("vendors", `{"customer":"C1"}`, 7, outbox.OpInsert, 0),
		outbox.ID("customers", `{"customer":"C1"}`, 7, outbox.OpInsert, 1),
	} {
		if other == a {
			t.Fatalf("two changes share the id %s", a)
		}
	}
	if len(a) != 36 || a[14] != '5' {
		t.Fatalf("id %s is not a UUID v5", a)
	}
}

func TestRecordDropsDuplicates(t *testing.T) {
	db, ob := setup(t)
	ctx := context.Background()
	record(t, db, ev("C1", 1, outbox.OpInsert), ev("C2", 1, outbox.OpInsert))
	// A replay of the page and an overlapping run: the same changes again.
	record(t, db, ev("C1", 1, outbox.OpInsert), ev("C1", 2, outbox.OpUpdate))
	record(t, db, ev("C2", 1, outbox.OpInsert))
	// The same version and op in the key's next life (after a restore) is
	// a change of its own; again, it is the same change.
	again := ev("C1", 2, outbox.OpUpdate)
	again.Life = 1
	record(t, db, again)
	record(t, db, again)
	ps, err := ob.Pending(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 4 {
		t.Fatalf("%d events recorded, want 4: %+v", len(ps), ps)
	}
	want := []struct {
		key string
		v   int64
		op  string
	}{{"C1", 1, "insert"}, {"C2", 1, "insert"}, {"C1", 2, "update"}, {"C1", 2, "update"}}
	if ps[2].ID == ps[3].ID {
		t.Fatalf("two lives of one change share the id %s", ps[2].ID)
	}
	for i, p := range ps {
		var b outbox.Body
		if err := json.Unmarshal(p.Body, &b); err != nil {
			t.Fatal(err)
		}
		if b.ID != p.ID || b.Key["customer"] != want[i].key || b.Version != want[i].v || b.Op != want[i].op || b.Data["credit_limit"] != "1234.50" || b.RunID != "run-1" {
			t.Errorf("event %d: %s", i, p.Body)
		}
	}
}

func TestRecordRollsBackWithItsTransaction(t *testing.T) {
	db, ob := setup(t)
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Recorder.Record(ctx, tx, []outbox.Event{ev("C1", 1, outbox.OpInsert)}); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	st, err := ob.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Pending() != 0 {
		t.Fatalf("%d pending after a rollback", st.Pending())
	}
	if err := db.Recorder.Record(ctx, nil, []outbox.Event{{Entity: "x", Op: "upsert"}}); err == nil {
		t.Fatal("an unknown op was recorded")
	}
}

func TestMarkDeliveredIsFenced(t *testing.T) {
	db, ob := setup(t)
	ctx := context.Background()
	record(t, db, ev("C1", 1, outbox.OpInsert), ev("C2", 1, outbox.OpInsert))
	ps, _ := ob.Pending(ctx, 10)
	if err := ob.MarkDelivered(ctx, 5, []int64{ps[0].Seq}); err != nil {
		t.Fatal(err)
	}
	// The relay whose lock expired holds an older token: it cannot mark.
	if err := ob.MarkDelivered(ctx, 4, []int64{ps[1].Seq}); !errors.Is(err, outbox.ErrFenced) {
		t.Fatalf("mark with an older token: %v, want ErrFenced", err)
	}
	st, err := ob.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Entities) != 1 || st.Entities[0].Pending != 1 || st.Entities[0].Delivered != 1 || st.OldestPendingAge() < 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := ob.MarkDelivered(ctx, 6, []int64{ps[1].Seq}); err != nil {
		t.Fatal(err)
	}
	if n, err := ob.Prune(ctx, time.Now().Add(time.Hour), 100); err != nil || n != 2 {
		t.Fatalf("pruned %d, %v; want 2", n, err)
	}
}

// TestPendingDeliversBodiesAsRecorded: an event recorded with its whole
// body, before the outbox stored payload, is read with that body byte for
// byte but for its seq, between events recorded since, whose bodies are built from their
// columns and payload. The body recorded differs on purpose from the one
// its columns would make.
func TestPendingDeliversBodiesAsRecorded(t *testing.T) {
	db, ob := setup(t)
	ctx := context.Background()
	record(t, db, ev("C1", 1, outbox.OpInsert))
	old := `{"id":"0b7e3c1e-5a56-5d0f-8c3e-4e2d2d6f7a10","entity":"customers","op":"update","key":{"company":"1000","customer":"C0"},"version":3,"run_id":"before","data":{"note":"as recorded"}}`
	if _, err := db.ExecContext(ctx, db.Q(`INSERT INTO erpsync_events (event_id, entity, entity_key, op, version, run_id, life, body, recorded_at)
VALUES ('0b7e3c1e-5a56-5d0f-8c3e-4e2d2d6f7a10', 'customers', '{"company":"1000","customer":"C0"}', 'update', 3, 'run-0', 0, ?, UTC_TIMESTAMP(3))`), old); err != nil {
		t.Fatal(err)
	}
	record(t, db, ev("C2", 1, outbox.OpInsert))
	ps, err := ob.Pending(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	// The body as recorded, with its seq after its version.
	withSeq := strings.Replace(old, `"version":3,`, `"version":3,"seq":`+strconv.FormatInt(ps[1].Seq, 10)+`,`, 1)
	if len(ps) != 3 || string(ps[1].Body) != withSeq {
		t.Fatalf("pending %+v, want the second event's body as recorded, with its seq: %s", ps, withSeq)
	}
	for _, i := range []int{0, 2} {
		e := ev([]string{"C1", "", "C2"}[i], 1, outbox.OpInsert)
		want, err := json.Marshal(outbox.Body{ID: ps[i].ID, Entity: e.Entity, Op: e.Op, Key: e.Key, Version: e.Version, Seq: ps[i].Seq, RunID: e.RunID, Data: e.Data})
		if err != nil {
			t.Fatal(err)
		}
		if string(ps[i].Body) != string(want) {
			t.Errorf("event %d: body\n%s\nwant\n%s", i, ps[i].Body, want)
		}
	}
}

// TestOneChangeRecordedConcurrentlyIsOneRow: two transactions record one
// change at once, the second while the first has not committed; the
// second waits for the first and drops its copy: one row.
func TestOneChangeRecordedConcurrentlyIsOneRow(t *testing.T) {
	db, ob := setup(t)
	ctx := context.Background()
	first := db.Uncommitted(t, ev("C1", 1, outbox.OpInsert))
	t.Cleanup(func() { first.Rollback() })
	done := make(chan error, 1)
	go func() {
		tx, err := db.BeginTx(ctx, nil)
		if err == nil {
			if err = db.Recorder.Record(ctx, tx, []outbox.Event{ev("C1", 1, outbox.OpInsert), ev("C2", 1, outbox.OpInsert)}); err == nil {
				err = tx.Commit()
			} else {
				tx.Rollback()
			}
		}
		done <- err
	}()
	waitForRecording(t, db)
	if err := first.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the second record: %v", err)
	}
	ps, err := ob.Pending(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].Key != `{"company":"1000","customer":"C1"}` || ps[1].Key != `{"company":"1000","customer":"C2"}` {
		t.Fatalf("pending %+v, want C1 once, then C2", ps)
	}
}

// waitForRecording waits until another session records into db's
// outbox: on PostgreSQL, until it waits for a lock; on MySQL, until its
// statement runs (a load that waits for a row lock is not listed among
// InnoDB's lock waits).
func waitForRecording(t *testing.T, db *outboxtest.DB) {
	t.Helper()
	q := `SELECT COUNT(*) FROM information_schema.PROCESSLIST
WHERE DB = DATABASE() AND ID <> CONNECTION_ID() AND INFO LIKE '%INTO%erpsync_events%'`
	if db.Postgres {
		q = "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		if err := db.QueryRow(q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no session records into the outbox")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSeqFollowsTheKeysLock: writers of one key, each in a transaction
// that locks the key's row, writes the next version and records its
// event after, as the store's writes do, record the key's versions in
// increasing seq, however many write at once. The key's row here is a
// row of erpsync_relay_fence, its token the key's version.
func TestSeqFollowsTheKeysLock(t *testing.T) {
	db, ob := setup(t)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, db.Q("INSERT INTO erpsync_relay_fence (name, fence_token, updated_at) VALUES ('K', 0, UTC_TIMESTAMP(3))")); err != nil {
		t.Fatal(err)
	}
	const writers, each = 6, 10
	errs := make(chan error, writers)
	for range writers {
		go func() {
			for range each {
				if err := writeNext(ctx, db); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	ps, err := ob.Pending(ctx, 2*writers*each)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != writers*each {
		t.Fatalf("%d events, want %d", len(ps), writers*each)
	}
	for i, p := range ps {
		if p.Version != int64(i+1) {
			t.Fatalf("seq %d holds version %d, want %d: the seqs of a key are not in its versions' order", p.Seq, p.Version, i+1)
		}
	}
}

// writeNext writes the next version of the key K: it locks K's row,
// raises its version and records the version's event.
func writeNext(ctx context.Context, db *outboxtest.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var v int64
	if err := tx.QueryRowContext(ctx, "SELECT fence_token FROM erpsync_relay_fence WHERE name = 'K' FOR UPDATE").Scan(&v); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE erpsync_relay_fence SET fence_token = fence_token + 1 WHERE name = 'K'"); err != nil {
		return err
	}
	if err := db.Recorder.Record(ctx, tx, []outbox.Event{ev("K", v+1, outbox.OpUpdate)}); err != nil {
		return err
	}
	return tx.Commit()
}
