package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// orderRow is a document of orders (company 1000, order no) at version,
// its status, and items of the given quantities, line numbers from 1.
func orderRow(no, version, fence int64, status string, qty ...int) store.Row {
	var items entity.Lines
	for i, q := range qty {
		items = append(items, []entity.Value{{I: int64(i + 1)}, {S: "M"}, {S: strconv.Itoa(q) + ".000"}, {Null: true}})
	}
	return store.Row{Key: "1000" + entity.KeySeparator + strconv.FormatInt(no, 10), Vals: []entity.Value{{S: "1000"}, {I: no}, {S: status}, {Null: true}},
		Version: version, Fence: fence, UpdatedAt: time.UnixMilli(1_700_000_000_000 + version), RunID: "r", Children: []entity.Lines{items, {}}}
}

// bodies reads the outbox's events of entity, in id order, as consumers
// receive them.
func bodies(t *testing.T, s *store.Store, entity string) []outbox.Body {
	t.Helper()
	rows, err := s.DB().Raw("SELECT "+outbox.StoredColumns+" FROM erpsync_events WHERE entity = ? ORDER BY id", entity).Rows()
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []outbox.Body
	for rows.Next() {
		var st outbox.Stored
		if err := rows.Scan(st.Dest()...); err != nil {
			t.Fatal(err)
		}
		var b outbox.Body
		if err := json.Unmarshal(st.Body(), &b); err != nil {
			t.Fatalf("event %s: %v", st.Body(), err)
		}
		if b.Seq != st.Seq || b.ID != st.ID {
			t.Fatalf("event %s: seq %d, id %s in its row", st.Body(), st.Seq, st.ID)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// tableData reads every row of orders as an event's data carries it, and
// whether it is soft-deleted, by key text.
func tableData(t *testing.T, s *store.Store) map[string]outbox.Body {
	t.Helper()
	out := map[string]outbox.Body{}
	lines := map[string][]entity.Lines{}
	for c := range 2 {
		err := s.ScanLines(context.Background(), c, nil, func(parent string, ls entity.Lines) error {
			if lines[parent] == nil {
				lines[parent] = make([]entity.Lines, 2)
			}
			lines[parent][c] = ls
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err := s.ScanRows(context.Background(), func(st *store.Stored) error {
		items := []map[string]any{}
		for _, l := range lines[st.Key][0:min(1, len(lines[st.Key]))] {
			for _, line := range l {
				items = append(items, map[string]any{"line_no": float64(line[0].I), "material": line[1].S, "quantity": line[2].S, "note": nil})
			}
		}
		op := "live"
		if st.Deleted {
			op = outbox.OpDelete
		}
		out[st.Key] = outbox.Body{Op: op, Version: st.Version, Data: map[string]any{
			"company": st.Vals[0].S, "order_no": strconv.FormatInt(st.Vals[1].I, 10), "status": st.Vals[2].S, "amount": nil, "items": toAny(items), "texts": []any{}}}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func toAny(ms []map[string]any) []any {
	out := make([]any, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out
}

// bodyKey is the key text of an event of orders.
func bodyKey(b outbox.Body) string {
	return fmt.Sprint(b.Key["company"]) + entity.KeySeparator + fmt.Sprint(b.Key["order_no"])
}

// TestRepairIsAChangeWithAnEvent: a document whose header field or lines
// differ at the version the row holds is repaired, and the repair records
// an update event at that version with an id of its own; a repair that
// finds the row equal, at another version, soft-deleted or under a newer
// fencing token changes nothing and records nothing. Applying the events
// by seq leaves what the table holds.
func TestRepairIsAChangeWithAnEvent(t *testing.T) {
	t.Parallel()
	s := setup(t)
	e := orders(t)
	e.Events = true
	st := entityStore(t, s, e)
	ctx := context.Background()
	if err := st.InsertRows(ctx, []store.Row{orderRow(1, 3, 5, "OPEN", 1, 2), orderRow(2, 3, 5, "OPEN", 1)}); err != nil {
		t.Fatal(err)
	}
	if done, err := st.SoftDelete(ctx, []store.Tombstone{{ErpID: orderRow(2, 3, 5, "").Key, Version: 3, Fence: 5, RunID: "r"}}); err != nil || !done[0] {
		t.Fatalf("soft delete: %v %v", done, err)
	}
	repair := func(want bool, r store.Row) {
		t.Helper()
		done, err := st.Repair(ctx, []store.Row{r})
		if err != nil || done[0] != want {
			t.Fatalf("repair of %s v%d fence %d: %v %v, want %v", r.Key, r.Version, r.Fence, done, err, want)
		}
	}
	repair(true, orderRow(1, 3, 5, "OPEN", 1, 7, 3))  // lines changed at the version
	repair(false, orderRow(1, 3, 5, "OPEN", 1, 7, 3)) // equal now
	repair(true, orderRow(1, 3, 6, "HOLD", 1, 7, 3))  // a header field, a newer lock
	repair(true, orderRow(1, 3, 6, "OPEN", 1, 7, 3))  // and back: a change again
	repair(false, orderRow(1, 2, 6, "X", 1))          // a lower version: never back
	repair(false, orderRow(1, 4, 6, "X", 1))          // a higher one is a run's write
	repair(false, orderRow(1, 3, 5, "X", 1))          // an older fencing token
	repair(false, orderRow(2, 3, 6, "X", 1))          // soft-deleted
	evs := bodies(t, s, "orders")
	var ops []string
	ids := map[string]bool{}
	for _, b := range evs {
		ops = append(ops, fmt.Sprintf("%s %s@%d", bodyKey(b), b.Op, b.Version))
		ids[b.ID] = true
	}
	k1, k2 := orderRow(1, 0, 0, "").Key, orderRow(2, 0, 0, "").Key
	want := []string{k1 + " insert@3", k2 + " insert@3", k2 + " delete@3", k1 + " update@3", k1 + " update@3", k1 + " update@3"}
	if !reflect.DeepEqual(ops, want) || len(ids) != len(evs) {
		t.Fatalf("events %q (%d ids), want %q, each its own id", ops, len(ids), want)
	}
	consume(t, evs, tableData(t, st))
}

// consume applies evs as the documented consumer does, each key's events
// in order with redeliveries of earlier ones among them: it keeps the last
// seq applied per key and skips an event at or below it. What it holds at
// the end must be the table (want, by key).
func consume(t *testing.T, evs []outbox.Body, want map[string]outbox.Body) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(len(evs)), 9))
	var stream []outbox.Body
	for i, b := range evs {
		stream = append(stream, b)
		if i > 0 && rng.IntN(3) == 0 {
			stream = append(stream, evs[rng.IntN(i)]) // a redelivery
		}
	}
	last := map[string]int64{}
	held := map[string]outbox.Body{}
	for _, b := range stream {
		k := bodyKey(b)
		if b.Seq <= last[k] {
			continue
		}
		last[k] = b.Seq
		held[k] = b
	}
	for k, w := range want {
		h, ok := held[k]
		if !ok {
			t.Errorf("%s: the table holds %s v%d and no event says so", k, w.Op, w.Version)
			continue
		}
		gotOp := "live"
		if h.Op == outbox.OpDelete {
			gotOp = outbox.OpDelete
		}
		if gotOp != w.Op || h.Version != w.Version || !reflect.DeepEqual(h.Data, w.Data) {
			t.Errorf("%s: the consumer holds %s v%d %v, the table %s v%d %v", k, h.Op, h.Version, h.Data, w.Op, w.Version, w.Data)
		}
	}
}

// TestSeqIncreasesPerKey: writers in two stores of their own, one that
// records events with a load and one with the INSERT, write the same few
// documents at once: upserts of versions new and old, restores, soft
// deletes and repairs. Every event's seq is its outbox id, and a consumer
// that applies each key's events by seq (skipping any at or below the last
// it applied, redeliveries among them) ends with what the table holds,
// deletes and restores included.
func TestSeqIncreasesPerKey(t *testing.T) {
	t.Parallel()
	s, dsn := testenv.MigratedStore(t)
	e := orders(t)
	e.Events = true
	loads := entityStore(t, s, e)
	other, err := store.Open(context.Background(), dsn, &store.Options{NoLoadData: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tbl, err := store.Compile(e)
	if err != nil {
		t.Fatal(err)
	}
	inserts := other.For(tbl)
	ctx := context.Background()
	const keys = 3
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for w := range 4 {
		st := []*store.Store{loads, inserts}[w%2]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 77))
			for range 60 {
				no := 1 + rng.Int64N(keys)
				v := 1 + rng.Int64N(12)
				status := []string{"OPEN", "HOLD", "DONE"}[rng.IntN(3)]
				r := orderRow(no, v, 1, status, rng.IntN(9)+1, rng.IntN(9)+1)
				var err error
				switch rng.IntN(4) {
				case 0:
					err = st.UpsertRows(ctx, []store.Row{r})
				case 1:
					_, err = st.RestoreRows(ctx, []store.Row{r})
				case 2:
					var cur map[string]store.Current
					if cur, err = st.Versions(ctx, []string{r.Key}); err == nil && cur[r.Key].Version > 0 {
						_, err = st.SoftDelete(ctx, []store.Tombstone{{ErpID: r.Key, Version: cur[r.Key].Version, Fence: 1, RunID: "r"}})
					}
				default:
					var cur map[string]store.Current
					if cur, err = st.Versions(ctx, []string{r.Key}); err == nil && cur[r.Key].Version > 0 {
						r.Version = cur[r.Key].Version
						r.UpdatedAt = time.UnixMilli(1_700_000_000_000 + r.Version)
						_, err = st.Repair(ctx, []store.Row{r})
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	evs := bodies(t, s, "orders")
	ops := map[string]int{}
	for _, b := range evs {
		ops[b.Op]++
	}
	t.Logf("%d events: %v", len(evs), ops)
	if ops[outbox.OpDelete] == 0 || ops[outbox.OpRestore] == 0 || ops[outbox.OpUpdate] == 0 {
		t.Fatalf("events %v: want deletes, restores and updates", ops)
	}
	consume(t, evs, tableData(t, loads))
}
