package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// modelRow is the reference model of one row of a typed table.
type modelRow struct {
	vals    []entity.Value
	version int64
	fence   int64
	updated time.Time
	deleted bool
}

// TestTableWritesMatchAModel is the guarantee of a typed entity's table
// as a property: random sequences of the writes the sync makes (multi-row
// inserts of absent rows, guarded upserts, single guarded updates,
// restores, soft deletes), with random versions, fencing tokens and
// values over a composite key, leave the table equal to a reference model
// that applies the rules one by one: a write lands only with a higher
// version (or, on a soft-deleted row, one that restores it) and a fencing
// token no older than the row's; a losing write changes nothing; every
// value reads back exactly as written (decimals to the last digit, int64
// past 2^53, dates, NULLs). ERPSYNC_PROPERTY_SEED replays one sequence.
//
// With events (entity.Events), every write that changes a row must record
// exactly one change event in the outbox, in the same transaction: per
// key, the model's changes in order (insert, update, restore, delete,
// each at its version), none for a write that changed nothing.
func TestTableWritesMatchAModel(t *testing.T) {
	t.Parallel()
	for _, events := range []bool{false, true} {
		t.Run(fmt.Sprintf("events=%v", events), func(t *testing.T) {
			t.Parallel()
			tableModel(t, events)
		})
	}
}

func tableModel(t *testing.T, events bool) {
	s := setup(t)
	e := customers(t)
	e.Events = events
	st := entityStore(t, s, e)
	if err := writeAgainstModel(s, st, e, testenv.PropertyRand(t, 7)); err != nil {
		t.Fatal(err)
	}
}

// TestTableModelCatchesAWeakenedUpsert shows that the model above catches
// a guarded upsert that lost half its guard, in the dialect of the
// matrix's database: one without the version guard (the fence alone),
// which writes an older version over a newer one, and one without the
// fence, which lets a stale lock holder write. Each mutant's sequence
// must fail the comparison with the model; the same sequences pass on
// the real upsert (TestTableWritesMatchAModel).
func TestTableModelCatchesAWeakenedUpsert(t *testing.T) {
	t.Parallel()
	for _, name := range store.Mutants {
		for _, events := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/events=%v", name, events), func(t *testing.T) {
				t.Parallel()
				s := setup(t)
				e := customers(t)
				e.Events = events
				migrateEntities(t, s, e)
				tbl, err := store.Compile(e)
				if err != nil {
					t.Fatal(err)
				}
				err = writeAgainstModel(s, s.For(tbl.Mutant(name)), e, testenv.PropertyRand(t, 7))
				if err == nil {
					t.Fatalf("the model took 300 writes through an upsert with %s for the real one", name)
				}
				t.Logf("caught: %v", err)
			})
		}
	}
}

// writeAgainstModel makes 300 random writes of e's rows through st (of
// s's database) and compares the table, and with events the outbox, with
// the reference model after each; the first difference is its error.
func writeAgainstModel(s, st *store.Store, e *entity.Entity, rng *mrand.Rand) error {
	ctx := context.Background()
	events := e.Events
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

	keys := make([][2]string, 12)
	for i := range keys {
		keys[i] = [2]string{fmt.Sprint(1000 + i%3), fmt.Sprintf("C%03d", i)}
	}
	row := func(k [2]string) store.Row {
		nullable := func(v entity.Value) entity.Value {
			if rng.IntN(4) == 0 {
				return entity.Value{Null: true}
			}
			return v
		}
		cents := rng.Int64N(1e15) - 5e14
		vals := []entity.Value{
			{S: k[0]}, {S: k[1]},
			{S: fmt.Sprintf("Name %d ü'\\", rng.IntN(1000))},
			nullable(entity.Value{S: decimalText(cents)}),
			{I: rng.Int64N(2)},
			nullable(entity.Value{S: base.AddDate(0, 0, rng.IntN(9000)-4500).Format(time.DateOnly)}),
			{I: 1<<53 + rng.Int64N(1e6) - 5e5},
			nullable(entity.Value{T: base.Add(time.Duration(rng.Int64N(1e12)) * time.Millisecond)}),
			nullable(entity.Value{S: "a note\nwith lines"}),
			nullable(entity.Value{S: `{"a":[1,2.50,"x"]}`}),
			{I: rng.Int64N(1<<31) - 1<<30},
		}
		return store.Row{Key: entity.KeyText(k[:]), Vals: vals, Version: 1 + rng.Int64N(8), Fence: 1 + rng.Int64N(8),
			UpdatedAt: base.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)}
	}
	model := map[string]*modelRow{}
	lands := func(r store.Row, update bool) bool { return model[r.Key].lands(r, update) }
	// changes are the events the model expects, by key: "op@version life
	// n", a
	// change of one identity (key, version, op, life) once; a restore
	// starts the key's next life.
	changes := map[string][]string{}
	seen := map[string]bool{}
	lives := map[string]int{}
	change := func(key, op string, version int64) {
		if op == "restore" {
			lives[key]++
		}
		id := fmt.Sprintf("%s %s@%d life %d", key, op, version, lives[key])
		if !seen[id] {
			seen[id] = true
			changes[key] = append(changes[key], fmt.Sprintf("%s@%d life %d", op, version, lives[key]))
		}
	}
	apply := func(r store.Row) {
		op := "insert"
		if m := model[r.Key]; m != nil && m.deleted {
			op = "restore"
		} else if m != nil {
			op = "update"
		}
		change(r.Key, op, r.Version)
		model[r.Key] = &modelRow{vals: r.Vals, version: r.Version, fence: r.Fence, updated: store.Millis(r.UpdatedAt)}
	}
	for step := range 300 {
		switch op := rng.IntN(5); op {
		case 0: // insert of rows the caller read as absent
			var rows []store.Row
			for _, k := range keys {
				if model[entity.KeyText(k[:])] == nil && rng.IntN(3) == 0 {
					rows = append(rows, row(k))
				}
			}
			if err := st.InsertRows(ctx, rows); err != nil {
				return fmt.Errorf("step %d: insert: %v", step, err)
			}
			for _, r := range rows {
				apply(r)
			}
		case 1: // a guarded multi-row upsert
			var rows []store.Row
			seen := map[string]bool{}
			for range 1 + rng.IntN(6) {
				r := row(keys[rng.IntN(len(keys))])
				if !seen[r.Key] {
					seen[r.Key] = true
					rows = append(rows, r)
				}
			}
			if err := st.UpsertRows(ctx, rows); err != nil {
				return fmt.Errorf("step %d: upsert: %v", step, err)
			}
			for _, r := range rows {
				if m := model[r.Key]; m == nil || lands(r, false) {
					apply(r)
				}
			}
		case 2, 3: // a single guarded update, or a restore
			r := row(keys[rng.IntN(len(keys))])
			if model[r.Key] == nil {
				continue
			}
			want := lands(r, true)
			var got bool
			var err error
			if op == 2 {
				got, err = st.UpdateRow(ctx, r)
			} else {
				var done []bool
				done, err = st.RestoreRows(ctx, []store.Row{r})
				if err == nil {
					got = done[0]
				}
			}
			if err != nil {
				return fmt.Errorf("step %d: update: %v", step, err)
			}
			if got != want {
				return fmt.Errorf("step %d: update of %q v%d f%d reported %v, the model says %v (row %+v)", step, r.Key, r.Version, r.Fence, got, want, *model[r.Key])
			}
			if want {
				apply(r)
			}
		case 4: // a soft delete at the version the caller read
			k := entity.KeyText(keys[rng.IntN(len(keys))][:])
			m := model[k]
			if m == nil {
				continue
			}
			ts := store.Tombstone{ErpID: k, Version: m.version, Fence: m.fence + rng.Int64N(2) - rng.Int64N(2)}
			done, err := st.SoftDelete(ctx, []store.Tombstone{ts})
			if err != nil {
				return fmt.Errorf("step %d: soft delete: %v", step, err)
			}
			if want := !m.deleted && ts.Fence >= m.fence; done[0] != want {
				return fmt.Errorf("step %d: soft delete of %q f%d reported %v, the model says %v", step, k, ts.Fence, done[0], want)
			}
			if done[0] {
				m.deleted = true
				change(k, "delete", m.version)
			}
		}
		if err := tableDiff(step, st, model); err != nil {
			return err
		}
		if events {
			if err := eventsDiff(step, s, e.Name, changes); err != nil {
				return err
			}
		}
	}
	if !events {
		var n int64
		if err := s.DB().Raw("SELECT COUNT(*) FROM erpsync_events").Scan(&n).Error; err != nil || n != 0 {
			return fmt.Errorf("an entity without events recorded %d (%v)", n, err)
		}
	}
	return nil
}

// lands applies the rules of a guarded write of r to the model's row m
// (nil: absent); update: through UpdateRow, which restores.
func (m *modelRow) lands(r store.Row, update bool) bool {
	switch {
	case m == nil:
		return !update
	case r.Fence < m.fence:
		return false
	case m.deleted:
		c := store.Current{Version: m.version, UpdatedAt: m.updated}
		return update && c.Restores(r.Version, r.UpdatedAt) || r.Version > m.version
	}
	return r.Version > m.version
}

// entityStore migrates e's tables on s and returns a Store that writes
// them.
func entityStore(t testing.TB, s *store.Store, e *entity.Entity) *store.Store {
	t.Helper()
	migrateEntities(t, s, e)
	tbl, err := store.Compile(e)
	if err != nil {
		t.Fatal(err)
	}
	return s.For(tbl)
}

// eventsDiff is nil when the outbox holds, per key and in order, exactly
// the changes the model expects, and the first difference otherwise.
func eventsDiff(step int, s *store.Store, name string, want map[string][]string) error {
	type ev struct {
		EventID, Op   string
		Key           string `gorm:"column:key_text"`
		Version, Life int64
	}
	var evs []ev
	if err := s.DB().Raw("SELECT event_id, entity_key AS key_text, op, version, life FROM erpsync_events WHERE entity = ? ORDER BY id", name).Scan(&evs).Error; err != nil {
		return err
	}
	got := map[string][]string{}
	for _, e := range evs {
		var k map[string]string
		if err := json.Unmarshal([]byte(e.Key), &k); err != nil {
			return fmt.Errorf("event key %s: %v", e.Key, err)
		}
		key := entity.KeyText([]string{k["company"], k["customer"]})
		got[key] = append(got[key], fmt.Sprintf("%s@%d life %d", e.Op, e.Version, e.Life))
		if id := outbox.ID(name, e.Key, e.Version, e.Op, e.Life); e.EventID != id {
			return fmt.Errorf("step %d: event %s %s@%d life %d has the id %s, its identity's is %s", step, e.Key, e.Op, e.Version, e.Life, e.EventID, id)
		}
	}
	if !reflect.DeepEqual(got, want) {
		for k := range want {
			if !slices.Equal(got[k], want[k]) {
				return fmt.Errorf("step %d: events of %q: %v, the model's changes %v", step, k, got[k], want[k])
			}
		}
		return fmt.Errorf("step %d: events %v, the model's changes %v", step, got, want)
	}
	return nil
}

// decimalText writes cents as a decimal(15,2) literal's canonical text.
func decimalText(cents int64) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	return fmt.Sprintf("%s%d.%02d", sign, cents/100, cents%100)
}

// compareTable fails t unless the table holds exactly the model's rows.
func compareTable(t *testing.T, step int, st *store.Store, model map[string]*modelRow) {
	t.Helper()
	if err := tableDiff(step, st, model); err != nil {
		t.Fatal(err)
	}
}

// tableDiff is nil when the table holds exactly the model's rows, and the
// first difference otherwise.
func tableDiff(step int, st *store.Store, model map[string]*modelRow) error {
	got := map[string]bool{}
	err := st.ScanRows(context.Background(), func(r *store.Stored) error {
		m := model[r.Key]
		got[r.Key] = true
		if m == nil {
			return fmt.Errorf("row %q is not in the model", r.Key)
		}
		if r.Version != m.version || r.Fence != m.fence || r.Deleted != m.deleted || !r.UpdatedAt.Equal(m.updated) {
			return fmt.Errorf("row %q: v%d f%d deleted %v updated %v, model v%d f%d deleted %v updated %v",
				r.Key, r.Version, r.Fence, r.Deleted, r.UpdatedAt, m.version, m.fence, m.deleted, m.updated)
		}
		for i, v := range r.Vals {
			w := m.vals[i]
			if !w.Null && !w.T.IsZero() {
				w.T = store.Millis(w.T)
			}
			if v != w {
				return fmt.Errorf("row %q column %d: %+v, model %+v", r.Key, i, v, w)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("step %d: %v", step, err)
	}
	if len(got) != len(model) {
		return fmt.Errorf("step %d: %d rows, the model has %d", step, len(got), len(model))
	}
	return nil
}
