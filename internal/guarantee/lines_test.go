package guarantee

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/outbox"
)

// The documents feeds with change events: the ERP changes the lines of
// documents at their version (neither the header's version nor its
// updated_at moves, as SAP's often do not when only items change), which
// no run takes and a reconcile repairs, with one update event each that
// carries the new lines; and a consumer that applies the outbox's events
// by seq must end holding every document, its lines included, as the
// table does.

// docEventsSpec is what a documents feed with events does after its
// waves.
type docEventsSpec struct {
	// LinesInPlace is how many documents with a live row the ERP changes
	// the lines of at their version (erpmock.OrderLinesAt's next
	// revision).
	LinesInPlace int
}

func (d *docEventsSpec) String() string {
	return fmt.Sprintf("the lines of %d documents changed at their version after the waves", d.LinesInPlace)
}

// genDocEvents draws, from a generator of its own (every other choice of
// the feed stays that of its seed), whether seed's documents feed records
// change events (two feeds of three) and how many documents' lines the ERP
// changes at their version after the waves. Such a feed ends its settlings
// with a reconcile, which repairs them.
func genDocEvents(seed uint64, sc *scenario) {
	r := rand.New(rand.NewPCG(seed, 0x11e5))
	if r.IntN(3) == 0 {
		return
	}
	sc.Typed.DocEvents = &docEventsSpec{LinesInPlace: 1 + r.IntN(3)}
	sc.Reconcile = true
}

// changeLines changes the lines of the documents of ids that the ERP
// holds, valid, at their version: the next revision of their lines, with
// neither version nor updated_at moving. It returns the records it
// changed.
func (e *erpSim) changeLines(ids []string) []string {
	return e.changeAtVersion(ids, func(r *record) { r.Lines++ })
}

// linesInPlace, in a documents feed with events, changes the lines of
// LinesInPlace documents with a live row at their version on the frozen
// ERP (REST face only) and settles: the settling's compare holds the
// table's lines to the ERP's revision, and checkDocEvents the events
// recorded since the change and those of the whole feed.
func (f *feed) linesInPlace() {
	if f.sc.Typed == nil || f.sc.Typed.DocEvents == nil {
		return
	}
	ctx := context.Background()
	var mark int64 // the last seq before the change
	if err := f.w.st.DB().WithContext(ctx).Raw("SELECT COALESCE(MAX(id), 0) FROM erpsync_events").Scan(&mark).Error; err != nil {
		f.t.Errorf("read the outbox: %v", err)
		return
	}
	var changed []string
	if f.erp.face == nil {
		changed = f.erp.changeLines(f.someLive(f.sc.Typed.DocEvents.LinesInPlace, 0x11e5))
	}
	if len(changed) > 0 {
		f.t.Logf("lines: %v changed at their version", changed)
		f.settle("after documents' lines changed at their version")
	}
	f.checkDocEvents(mark, changed)
}

// docEvent is an event of a document as the model compares it: its op,
// version and fields, and its lines as "pos material qty".
type docEvent struct {
	seq     int64
	op      string
	version int64
	data    map[string]any
	lines   []string
}

func (d docEvent) String() string {
	b, _ := json.Marshal(d.data)
	return fmt.Sprintf("%s v%d %s lines [%s]", d.op, d.version, b, strings.Join(d.lines, "; "))
}

// checkDocEvents checks the outbox of a documents feed with events: after
// mark (the last seq before changed's lines changed), exactly one update
// event of each record of changed, at the version its row holds, carrying
// the row's fields and the ERP's new lines, and no other event; and a
// consumer that applies every event of the outbox per key by seq,
// skipping one at or below the last it applied, holds each row as the
// table does: live or soft-deleted, its version, fields and lines.
func (f *feed) checkDocEvents(mark int64, changed []string) {
	events, err := f.docEvents()
	if err != nil {
		f.t.Errorf("read the outbox: %v", err)
		return
	}
	rows, err := finalRows(f.w)
	if err != nil {
		f.t.Errorf("read contracts: %v", err)
		return
	}
	lines, err := tableLines(f.w)
	if err != nil {
		f.t.Errorf("read contract_lines: %v", err)
		return
	}
	var bad []string
	add := func(format string, args ...any) {
		if len(bad) < 12 {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	table := func(erpID string) docEvent {
		r := rows[erpID]
		return docEvent{op: r.op, version: r.version, data: r.data, lines: lines[erpID]}
	}
	after := map[string][]docEvent{}
	for id, evs := range events {
		for _, e := range evs {
			if e.seq > mark {
				after[id] = append(after[id], e)
			}
		}
	}
	truth := f.erp.truth()
	for _, id := range sortedKeys(union(after, sliceSet(changed))) {
		evs := after[id]
		if !slices.Contains(changed, id) {
			add("%s: %d event(s) after the lines of other documents changed at their version, the first %s", id, len(evs), evs[0])
			continue
		}
		if len(evs) != 1 {
			add("%s: its lines changed at its version, and %d events were recorded since (want one update): %v", id, len(evs), evs)
			continue
		}
		e, row := evs[0], table(id)
		var want []string
		for _, l := range erpmock.OrderLinesAt(id, truth[id].Version, truth[id].Lines) {
			want = append(want, fmt.Sprintf("%d %s %s", l.Pos, l.Material, l.Qty))
		}
		if e.op != outbox.OpUpdate || e.version != row.version || !reflect.DeepEqual(e.data, row.data) || !slices.Equal(e.lines, want) {
			add("%s: the repair's event is %s, want an update at the row's v%d with its fields and the ERP's lines [%s]", id, e, row.version, strings.Join(want, "; "))
		}
	}
	// The consumer: the outbox's events in seq order, as a relay delivers
	// a key's.
	held, last := map[string]docEvent{}, map[string]int64{}
	for id, evs := range events {
		for _, e := range evs {
			if e.seq <= last[id] {
				continue
			}
			last[id] = e.seq
			held[id] = e
		}
	}
	for _, id := range sortedKeys(union(held, rows)) {
		h, ok := held[id]
		_, isRow := rows[id]
		r := table(id)
		switch {
		case !ok:
			add("%s: the consumer applying by seq holds nothing, the table %s", id, r)
		case !isRow:
			add("%s: the consumer applying by seq holds %s, the table no row", id, h)
		case h.version != r.version || !reflect.DeepEqual(h.data, r.data) || (h.op == outbox.OpDelete) != (r.op == outbox.OpDelete) ||
			!slices.Equal(h.lines, r.lines):
			add("%s: the consumer applying by seq holds %s (seq %d), the table %s", id, h, h.seq, r)
		}
	}
	n := 0
	for _, evs := range events {
		n += len(evs)
	}
	f.t.Logf("document events: %d recorded, %d since the lines of %d documents changed at their version", n, len(after), len(changed))
	if len(bad) > 0 {
		f.t.Errorf("the documents' change events are not the table's changes: %s", strings.Join(bad, "; "))
	}
}

// docEvents reads every event of the outbox as its relay would deliver
// it, by erp_id, in seq order.
func (f *feed) docEvents() (map[string][]docEvent, error) {
	rows, err := f.w.st.DB().Raw("SELECT " + outbox.StoredColumns + " FROM erpsync_events ORDER BY id").Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]docEvent{}
	for rows.Next() {
		var st outbox.Stored
		if err := rows.Scan(st.Dest()...); err != nil {
			return nil, err
		}
		var b outbox.Body
		dec := json.NewDecoder(bytes.NewReader(st.Body()))
		dec.UseNumber()
		if err := dec.Decode(&b); err != nil {
			return nil, fmt.Errorf("event %s: %w", st.Body(), err)
		}
		erpID, err := eventKey(b)
		if err != nil {
			return nil, fmt.Errorf("event %s: %w", st.Body(), err)
		}
		e := docEvent{seq: b.Seq, op: b.Op, version: b.Version, data: b.Data}
		ls, _ := e.data["lines"].([]any)
		for _, l := range ls {
			m, _ := l.(map[string]any)
			e.lines = append(e.lines, fmt.Sprintf("%v %v %v", m["pos"], m["material"], m["qty"]))
		}
		delete(e.data, "lines")
		out[erpID] = append(out[erpID], e)
	}
	return out, rows.Err()
}

// tableLines reads the lines of every document of contract_lines as
// "pos material qty", by position.
func tableLines(w *world) (map[string][]string, error) {
	rows, err := w.st.DB().Raw("SELECT CONCAT(region, no), pos, material, qty FROM contract_lines ORDER BY region, no, pos").Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var id, material, qty string
		var pos int32
		if err := rows.Scan(&id, &pos, &material, &qty); err != nil {
			return nil, err
		}
		out[id] = append(out[id], fmt.Sprintf("%d %s %s", pos, material, qty))
	}
	return out, rows.Err()
}

// sliceSet is the set of ids.
func sliceSet(ids []string) map[string]bool {
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out
}
