package guarantee

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/store"
)

// The writes of an events feed that must record no event, and the changes
// at a version that must record one: a writer of the test that replays
// rows of contracts through the store's upsert (the statement and
// transaction of a sync write: most writes of a run never reach it, the
// syncer reads its rows under their locks first and leaves those current),
// records changed by the ERP without a new version, which only a
// reconcile repairs, and the consumer that applies each key's events by
// seq.

// genEventWrites draws, from a generator of its own (every other choice of
// the feed stays that of its seed), whether seed's events feed replays rows
// through the upsert while it runs (seven feeds of eight: Replays) and how
// many records the ERP changes at their version after the waves (in two
// feeds of three: InPlace). A feed with such changes ends its settlings
// with a reconcile, which repairs them.
func genEventWrites(seed uint64, sc *scenario) {
	ev := sc.Typed.Events
	r := rand.New(rand.NewPCG(seed, 0x5eb1a7))
	ev.Replays = r.IntN(8) > 0
	if r.IntN(3) > 0 {
		ev.InPlace = 1 + r.IntN(3)
	}
	sc.Reconcile = sc.Reconcile || ev.InPlace > 0
}

// contractsStore is a store that writes the feed's contracts as a sync of
// events.yaml does: its table compiled from the file's entity, events on.
func (s *sink) contractsStore() (*store.Store, error) {
	f, err := entity.Load((&typedSpec{Events: s.ev}).config())
	if err != nil {
		return nil, err
	}
	tbl, err := store.Compile(f.Entity("contracts"))
	if err != nil {
		return nil, err
	}
	return s.f.w.st.For(tbl), nil
}

// replayWrites, in a feed with Replays, writes rows of contracts back
// through the store's upsert every 20 ms until stop is closed, each as a
// write the guards refuse or that changes nothing: the row as it is (a
// replay of its own version, at its own fencing token), one version lower
// with another plan (a stale copy), its version with another plan (a
// replay that lost the race), or one version higher under a fencing token
// lower than the row's (a writer whose lock was taken over). None may
// change a row or record an event: check finds an event that no change of
// the row matches.
func (s *sink) replayWrites(stop <-chan struct{}) {
	defer s.replaying.Done()
	st, err := s.contractsStore()
	if err != nil {
		s.f.t.Errorf("replays: %v", err)
		return
	}
	plan := slices.IndexFunc(st.Table().Entity().Columns, func(c entity.Column) bool { return c.Name == "plan" })
	rng := rand.New(rand.NewPCG(s.f.sc.ERPSeed, 0x7e91a5))
	ctx := context.Background()
	for {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		var rows []store.Row
		err := st.ScanRows(ctx, func(r *store.Stored) error {
			if rng.IntN(3) == 0 {
				row := r.Row
				row.Vals = slices.Clone(r.Vals)
				rows = append(rows, row)
			}
			return nil
		})
		if err != nil || len(rows) == 0 {
			continue
		}
		for i := range rows {
			r := &rows[i]
			r.RunID = "replay"
			kind := rng.IntN(4)
			switch kind {
			case 1:
				r.Version--
				r.Vals[plan] = entity.Value{S: "stale"}
			case 2:
				r.Vals[plan] = entity.Value{S: "lost"}
			case 3:
				r.Version++
				r.Fence--
				r.Vals[plan] = entity.Value{S: "fenced"}
			}
			s.mu.Lock()
			s.replayed[kind]++
			s.mu.Unlock()
		}
		if err := st.UpsertRows(ctx, rows); err != nil {
			s.f.t.Errorf("replays: upsert: %v", err)
			return
		}
	}
}

// replays says what replayWrites wrote.
func (s *sink) replays() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.replayed
	return fmt.Sprintf("%d rows replayed through the upsert as they were, %d one version lower, %d at their version with other data, %d one version higher under an older fencing token",
		r[0], r[1], r[2], r[3])
}

// changeInPlace changes a field (the customer) of each of the records ids
// that the ERP holds, valid, without a new version or updated_at: a change
// an ERP makes without moving its change markers, which no run takes (its
// version guard sees the version the row holds) and a reconcile repairs.
// It returns the records it changed.
func (e *erpSim) changeInPlace(ids []string) []string {
	return e.changeAtVersion(ids, func(r *record) { r.Member = fmt.Sprintf("U%d-same-version", e.rng.IntN(1000)) })
}

// changeAtVersion changes each of the records ids that the ERP holds,
// valid, with change (e.mu held), at their version and updated_at. It
// returns the records it changed.
func (e *erpSim) changeAtVersion(ids []string, change func(*record)) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, id := range ids {
		old, ok := e.cur[id]
		if _, bad := e.bad[id]; !ok || bad {
			continue
		}
		e.touch(id)
		n := old
		change(&n)
		e.put(n)
		out = append(out, id)
	}
	return out
}

// someLive returns up to n records with a live row, drawn by a generator
// of the feed's ERP seed and stream.
func (f *feed) someLive(n int, stream uint64) []string {
	live, err := f.w.versionsWhere(context.Background(), f.tabs[0], "deleted_at IS NULL")
	if err != nil {
		f.t.Errorf("read live rows: %v", err)
		return nil
	}
	ids := sortedKeys(live)
	rng := rand.New(rand.NewPCG(f.sc.ERPSeed, stream))
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	return ids[:min(n, len(ids))]
}

// inPlace, in an events feed with InPlace, changes that many records with
// a live row at their version on the frozen ERP (REST face only: the OData
// face's version may be its updated_at), and settles: the settling's
// reconcile must repair each row to the ERP's copy, and record an update
// event of each at its version.
func (f *feed) inPlace() {
	if f.sink == nil || f.sink.ev.InPlace == 0 || f.erp.face != nil {
		return
	}
	changed := f.erp.changeInPlace(f.someLive(f.sink.ev.InPlace, 0x1ace))
	if len(changed) == 0 {
		return
	}
	f.sink.mu.Lock()
	for _, id := range changed {
		f.sink.inPlace[id] = true
	}
	f.sink.mu.Unlock()
	f.t.Logf("in place: %v changed at their version", changed)
	f.settle("after records changed at their version")
}

// sameVersionUpdate reports whether e, an update at the version of the
// event before it (prev), is a repair of a record the ERP changed at its
// version: its data differs from prev's.
func (s *sink) sameVersionUpdate(erpID string, e, prev change) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inPlace[erpID] && e.version == prev.version && !reflect.DeepEqual(e.data, prev.data)
}

// consumeBySeq applies the events received (got, in the order received,
// redeliveries included) as the documented consumer does: per key, it
// keeps the last seq it applied and skips an event at or below it; deletes
// and restores are applied like any other. What it holds at the end must
// be the table: each row's version and data, live or soft-deleted.
func (s *sink) consumeBySeq(got []delivery, rows map[string]change, add func(string, ...any)) {
	last := map[string]int64{}
	held := map[string]change{}
	for _, d := range got {
		var b outbox.Body
		dec := json.NewDecoder(bytes.NewReader(d.raw))
		dec.UseNumber()
		if err := dec.Decode(&b); err != nil {
			continue // check says so
		}
		erpID, err := eventKey(b)
		if err != nil {
			continue
		}
		if b.Seq <= 0 {
			add("%s: event %s has no seq", erpID, d.raw)
			continue
		}
		if b.Seq <= last[erpID] {
			continue
		}
		last[erpID] = b.Seq
		held[erpID] = change{id: b.ID, op: b.Op, version: b.Version, data: b.Data}
	}
	for _, erpID := range sortedKeys(union(held, rows)) {
		h, ok := held[erpID]
		r, row := rows[erpID]
		switch {
		case !ok:
			add("%s: the consumer applying by seq holds nothing, the table %s", erpID, r)
		case !row:
			add("%s: the consumer applying by seq holds %s, the table no row", erpID, h)
		case h.version != r.version || !reflect.DeepEqual(h.data, r.data) || (h.op == outbox.OpDelete) != (r.op == outbox.OpDelete):
			add("%s: the consumer applying by seq holds %s (seq %s), the table %s", erpID, h, strconv.FormatInt(last[erpID], 10), r)
		}
	}
}
