package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// orders is an entity with two children: items, keyed by an int32 line
// number, and texts, keyed by a language and a kind (a composite line key
// with a string), over a composite parent key with a string and an int64.
func orders(t testing.TB) *entity.Entity {
	col := func(name, ty string, nullable bool) entity.Column {
		return entity.Column{Name: name, From: []string{name}, Type: typ(t, ty), Nullable: nullable}
	}
	return &entity.Entity{
		Name: "orders", Key: []string{"company", "order_no"},
		UpdatedAt: []string{"ChangedAt"}, Version: []string{"Version"},
		Columns: []entity.Column{
			col("company", "string(4)", false),
			col("order_no", "int64", false),
			col("status", "string(10)", false),
			col("amount", "decimal(15,2)", true),
		},
		Children: []*entity.Child{
			{Name: "items", Table: "order_items", From: []string{"Items"}, Key: []string{"line_no"}, Columns: []entity.Column{
				col("line_no", "int32", false),
				col("material", "string(40)", false),
				col("quantity", "decimal(13,3)", false),
				col("note", "text", true),
			}},
			{Name: "texts", Table: "order_texts", From: []string{"Texts"}, Key: []string{"lang", "kind"}, Columns: []entity.Column{
				col("lang", "string(2)", false),
				col("kind", "int32", false),
				col("body", "string(80)", true),
			}},
		},
	}
}

// modelDoc is the reference model of one document: its row and the lines
// of the version it holds, in served order.
type modelDoc struct {
	modelRow
	mark  int64
	lines []entity.Lines
}

// TestDocumentWritesMatchAModel is the guarantee of documents as a
// property: random sequences of the writes the sync makes of documents
// (multi-row inserts, guarded multi-row upserts mixing winners, losers,
// new rows and replays of a row's own version with other lines, single
// guarded updates, restores, soft deletes and quarantine marks), whose
// lines are added, changed, removed and reordered between versions, leave
// the parent table equal to a reference model and each child table
// holding, for each parent, exactly the lines of the version its row
// holds, at that version: a losing write changes no line, a soft delete
// or a mark keeps them, a restore writes those it comes back with.
// ERPSYNC_PROPERTY_SEED replays one sequence.
//
// With events, every change records one event whose data carries the
// lines under each child's name: the lines written, in served order, or,
// for a delete, the lines the row held.
func TestDocumentWritesMatchAModel(t *testing.T) {
	t.Parallel()
	for _, events := range []bool{false, true} {
		t.Run(fmt.Sprintf("events=%v", events), func(t *testing.T) {
			t.Parallel()
			documentModel(t, events)
		})
	}
}

func documentModel(t *testing.T, events bool) {
	s := setup(t)
	ctx := context.Background()
	e := orders(t)
	e.Events = events
	st := entityStore(t, s, e)
	rng := testenv.PropertyRand(t, 11)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

	keys := make([][2]string, 10)
	for i := range keys {
		keys[i] = [2]string{fmt.Sprint(1000 + i%2), fmt.Sprint(9_007_199_254_740_990 + i)}
	}
	model := map[string]*modelDoc{}
	sent := map[string][]store.Row{} // every row written of a key: what a replay replays

	// items and texts derive a version's lines from the model's: some
	// kept, some changed, some removed, some added, in a shuffled order.
	items := func(prev entity.Lines) entity.Lines {
		var out entity.Lines
		used := map[int64]bool{}
		for _, l := range prev {
			switch rng.IntN(4) {
			case 0: // removed
				continue
			case 1: // changed
				l = slices.Clone(l)
				l[2] = entity.Value{S: fmt.Sprintf("%d.%03d", rng.IntN(1000), rng.IntN(1000))}
				l[3] = entity.Value{Null: true}
			}
			used[l[0].I] = true
			out = append(out, l)
		}
		for range rng.IntN(4) {
			n := 1 + rng.Int64N(30)
			if used[n] {
				continue
			}
			used[n] = true
			note := entity.Value{Null: true}
			if rng.IntN(2) == 0 {
				note = entity.Value{S: "Müller's\nnote " + strconv.Itoa(rng.IntN(100))}
			}
			out = append(out, []entity.Value{{I: n}, {S: fmt.Sprintf("MAT-%d", rng.IntN(100))}, {S: fmt.Sprintf("%d.%03d", rng.IntN(100), rng.IntN(1000))}, note})
		}
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		return out
	}
	texts := func(prev entity.Lines) entity.Lines {
		var out entity.Lines
		used := map[string]bool{}
		for _, l := range prev {
			if rng.IntN(3) == 0 {
				continue
			}
			if rng.IntN(2) == 0 {
				l = slices.Clone(l)
				l[2] = entity.Value{S: fmt.Sprintf("text %d", rng.IntN(100))}
			}
			used[l[0].S+l[1].Text(entity.Int32)] = true
			out = append(out, l)
		}
		for range rng.IntN(3) {
			// "de" and "DE" are two lines: a line key string compares exactly.
			lang, kind := []string{"de", "DE", "en", "fr"}[rng.IntN(4)], int64(rng.IntN(3))
			if used[lang+strconv.FormatInt(kind, 10)] {
				continue
			}
			used[lang+strconv.FormatInt(kind, 10)] = true
			body := entity.Value{Null: true}
			if rng.IntN(3) > 0 {
				body = entity.Value{S: fmt.Sprintf("Grüße %d", rng.IntN(100))}
			}
			out = append(out, []entity.Value{{S: lang}, {I: kind}, body})
		}
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		return out
	}
	row := func(k [2]string) store.Row {
		key := entity.KeyText(k[:])
		if h := sent[key]; len(h) > 0 && rng.IntN(4) == 0 {
			// A replay of a row sent before: a stale header, or the
			// row's own version, sometimes with other lines.
			r := h[rng.IntN(len(h))]
			if rng.IntN(2) == 0 {
				r.Children = []entity.Lines{items(r.Children[0]), texts(r.Children[1])}
			}
			return r
		}
		// Versions and fences near the row's: winners and losers alike.
		prev, version, fence := []entity.Lines{nil, nil}, 1+rng.Int64N(3), 1+rng.Int64N(3)
		if m := model[key]; m != nil {
			prev = m.lines
			version, fence = max(1, m.version+rng.Int64N(6)-2), max(1, m.fence+rng.Int64N(4)-1)
		}
		no, _ := strconv.ParseInt(k[1], 10, 64)
		amount := entity.Value{Null: true}
		if rng.IntN(3) > 0 {
			amount = entity.Value{S: decimalText(rng.Int64N(1e9) - 5e8)}
		}
		r := store.Row{Key: key, Vals: []entity.Value{{S: k[0]}, {I: no}, {S: []string{"OPEN", "SHIPPED", "PAID"}[rng.IntN(3)]}, amount},
			Version: version, Fence: fence, UpdatedAt: base.Add(time.Duration(rng.IntN(1000)) * time.Millisecond),
			Children: []entity.Lines{items(prev[0]), texts(prev[1])}}
		sent[key] = append(sent[key], r)
		return r
	}
	lands := func(r store.Row, update bool) bool {
		if m := model[r.Key]; m != nil {
			return m.lands(r, update)
		}
		return !update
	}
	var changes []string // the events the model expects, in order of recording
	// One event a change of one identity (key, version, op, life); a
	// restore starts the key's next life.
	seen := map[string]bool{}
	lives := map[string]int{}
	change := func(key, op string, version int64, lines []entity.Lines) {
		if op == "restore" {
			lives[key]++
		}
		id := fmt.Sprintf("%s %s@%d", key, op, version)
		if life := fmt.Sprintf("%s life %d", id, lives[key]); !seen[life] {
			seen[life] = true
			changes = append(changes, id+eventLines(e, lines, op == "delete"))
		}
	}
	tally := map[string]int{} // what the steps did, to show they tried every case
	apply := func(r store.Row, update bool) {
		op, mark := "insert", int64(0)
		if m := model[r.Key]; m != nil {
			op, mark = "update", m.mark
			if m.deleted {
				op = "restore"
			}
			if r.Version >= m.mark || update && m.deleted {
				mark = 0
			}
		}
		change(r.Key, op, r.Version, r.Children)
		tally[op]++
		model[r.Key] = &modelDoc{modelRow: modelRow{vals: r.Vals, version: r.Version, fence: r.Fence, updated: store.Millis(r.UpdatedAt)}, mark: mark, lines: r.Children}
	}
	// trace logs what a step wrote: a failing step's output tells the
	// story that led to it.
	trace := func(step int, what string, rows []store.Row) {
		var b strings.Builder
		for _, r := range rows {
			fmt.Fprintf(&b, " %s v%d f%d lines %d+%d;", strings.ReplaceAll(r.Key, entity.KeySeparator, "/"), r.Version, r.Fence, len(r.Children[0]), len(r.Children[1]))
		}
		t.Logf("step %d: %s%s", step, what, b.String())
	}
	for step := range 250 {
		switch op := rng.IntN(7); op {
		case 0: // insert of documents the caller read as absent
			var rows []store.Row
			for _, k := range keys {
				if model[entity.KeyText(k[:])] == nil && rng.IntN(3) == 0 {
					rows = append(rows, row(k))
				}
			}
			trace(step, "insert", rows)
			if err := st.InsertRows(ctx, rows); err != nil {
				t.Fatalf("step %d: insert: %v", step, err)
			}
			for _, r := range rows {
				apply(r, false)
			}
		case 1: // a guarded multi-row upsert: winners, losers, replays, new ones
			var rows []store.Row
			in := map[string]bool{}
			for range 1 + rng.IntN(6) {
				r := row(keys[rng.IntN(len(keys))])
				if !in[r.Key] {
					in[r.Key] = true
					rows = append(rows, r)
				}
			}
			trace(step, "upsert", rows)
			if err := st.UpsertRows(ctx, rows); err != nil {
				t.Fatalf("step %d: upsert: %v", step, err)
			}
			for _, r := range rows {
				if lands(r, false) {
					apply(r, false)
				} else {
					tally["lost"]++
				}
			}
		case 2, 3: // a single guarded update, or a restore
			r := row(keys[rng.IntN(len(keys))])
			if model[r.Key] == nil {
				continue
			}
			want := lands(r, true)
			trace(step, []string{2: "update", 3: "restore"}[op], []store.Row{r})
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
				t.Fatalf("step %d: update: %v", step, err)
			}
			if got != want {
				t.Fatalf("step %d: update of %q v%d f%d reported %v, the model says %v", step, r.Key, r.Version, r.Fence, got, want)
			}
			if want {
				apply(r, true)
			} else {
				tally["lost"]++
			}
		case 4: // a soft delete at the version the caller read
			k := entity.KeyText(keys[rng.IntN(len(keys))][:])
			m := model[k]
			if m == nil {
				continue
			}
			ts := store.Tombstone{ErpID: k, Version: m.version, Fence: m.fence + rng.Int64N(2) - rng.Int64N(2)}
			t.Logf("step %d: soft delete %s v%d f%d", step, strings.ReplaceAll(k, entity.KeySeparator, "/"), ts.Version, ts.Fence)
			done, err := st.SoftDelete(ctx, []store.Tombstone{ts})
			if err != nil {
				t.Fatalf("step %d: soft delete: %v", step, err)
			}
			if want := !m.deleted && ts.Fence >= m.fence; done[0] != want {
				t.Fatalf("step %d: soft delete of %q f%d reported %v, the model says %v", step, k, ts.Fence, done[0], want)
			}
			if done[0] {
				m.deleted = true
				tally["delete"]++
				change(k, "delete", m.version, m.lines)
			}
		case 6: // a write that fails after its first child's lines: all of it undone
			r := row(keys[rng.IntN(len(keys))])
			bad := r
			bad.Children = []entity.Lines{r.Children[0], append(slices.Clone(r.Children[1]), []entity.Value{{S: "xx"}})}
			trace(step, "failing upsert", []store.Row{bad})
			err := st.UpsertRows(ctx, []store.Row{bad})
			if want := lands(r, false); (err != nil) != want {
				t.Fatalf("step %d: upsert of a bad line: %v, the model says it lands: %v", step, err, want)
			}
			if err != nil {
				tally["failed"]++
			}
		case 5: // a quarantine mark: keeps the data and the lines
			k := entity.KeyText(keys[rng.IntN(len(keys))][:])
			m := model[k]
			if m == nil {
				continue
			}
			mk := store.Mark{ErpID: k, Version: 1 + rng.Int64N(9), Fence: m.fence + rng.Int64N(2) - rng.Int64N(2)}
			t.Logf("step %d: mark %s v%d f%d", step, strings.ReplaceAll(k, entity.KeySeparator, "/"), mk.Version, mk.Fence)
			done, err := st.MarkQuarantined(ctx, []store.Mark{mk})
			if err != nil {
				t.Fatalf("step %d: mark: %v", step, err)
			}
			c := store.Current{Version: m.version, Deleted: m.deleted, Mark: m.mark}
			if want := mk.Fence >= m.fence && c.Marks(mk.Version, time.Time{}); done[0] != want {
				t.Fatalf("step %d: mark of %q v%d f%d reported %v, the model says %v", step, k, mk.Version, mk.Fence, done[0], want)
			}
			if done[0] {
				m.mark, m.fence = mk.Version, mk.Fence
				tally["mark"]++
			}
		}
		compareDocuments(t, step, s, st, e, model)
		if events {
			compareDocumentEvents(t, step, s, e, changes)
		}
	}
	t.Logf("writes: %v", tally)
	if tally["lost"] == 0 || tally["failed"] == 0 || tally["restore"] == 0 || tally["update"] == 0 || tally["delete"] == 0 {
		t.Fatalf("the steps missed a case: %v", tally)
	}
}

// compareDocuments fails t unless the parent table holds the model's rows
// and each child table, for each of them, exactly the lines of the version
// the row holds, at that version, and no other line.
func compareDocuments(t *testing.T, step int, s *store.Store, st *store.Store, e *entity.Entity, model map[string]*modelDoc) {
	t.Helper()
	rows := make(map[string]*modelRow, len(model))
	for k, m := range model {
		rows[k] = &m.modelRow
	}
	compareTable(t, step, st, rows)
	ctx := context.Background()
	for c, ch := range e.Children {
		got := map[string]string{}
		var last []string
		err := st.ScanLines(ctx, c, nil, func(parent string, lines entity.Lines) error {
			if _, dup := got[parent]; dup {
				return fmt.Errorf("parent %q passed twice", parent)
			}
			p := entity.SplitKey(parent, 2)
			if last != nil && !keyBefore(last, p) {
				return fmt.Errorf("parent %q after %q", parent, entity.KeyText(last))
			}
			last = p
			for i := 1; i < len(lines); i++ {
				if !lineBefore(lines[i-1], lines[i], len(ch.Key)) {
					return fmt.Errorf("%q: line %v after %v", parent, lines[i], lines[i-1])
				}
			}
			got[parent] = linesText(lines, true)
			return nil
		})
		if err != nil {
			t.Fatalf("step %d: scan lines: %v", step, err)
		}
		// Of a scope, and of given keys: the same documents' lines.
		var scoped, some []string
		err = st.Scoped(map[string]string{"company": "1001"}).ScanLines(ctx, c, nil, func(parent string, lines entity.Lines) error {
			scoped = append(scoped, parent+": "+linesText(lines, true))
			return nil
		})
		if err != nil {
			t.Fatalf("step %d: scan lines of a scope: %v", step, err)
		}
		var asked []string
		for k := range model {
			if len(asked) < 3 {
				asked = append(asked, k)
			}
		}
		err = st.ScanLines(ctx, c, asked, func(parent string, lines entity.Lines) error {
			some = append(some, parent+": "+linesText(lines, true))
			return nil
		})
		if err != nil {
			t.Fatalf("step %d: scan lines of keys: %v", step, err)
		}
		var wantScoped, wantSome []string
		for k, v := range got {
			if strings.HasPrefix(k, "1001"+entity.KeySeparator) {
				wantScoped = append(wantScoped, k+": "+v)
			}
			if slices.Contains(asked, k) {
				wantSome = append(wantSome, k+": "+v)
			}
		}
		slices.Sort(scoped)
		slices.Sort(wantScoped)
		slices.Sort(some)
		slices.Sort(wantSome)
		if !slices.Equal(scoped, wantScoped) || !slices.Equal(some, wantSome) {
			t.Fatalf("step %d: %s of company 1001: %q, want %q; of %q: %q, want %q", step, ch.Name, scoped, wantScoped, asked, some, wantSome)
		}
		for k, m := range model {
			want := linesText(m.lines[c], true)
			if len(m.lines[c]) == 0 {
				want = ""
			}
			if got[k] != want {
				t.Fatalf("step %d: %s of %q (v%d, deleted %v):\n%s\nthe model's:\n%s", step, ch.Name, k, m.version, m.deleted, got[k], want)
			}
			delete(got, k)
		}
		for k := range got {
			t.Fatalf("step %d: %s of %q, which the model has not: %s", step, ch.Name, k, got[k])
		}
		var stale int64
		q := fmt.Sprintf("SELECT COUNT(*) FROM %s l JOIN orders o USING (company, order_no) WHERE l.erp_version <> o.erp_version", ch.Table)
		if err := s.DB().Raw(q).Scan(&stale).Error; err != nil || stale != 0 {
			t.Fatalf("step %d: %d lines of %s at another version than their parent's (%v)", step, stale, ch.Table, err)
		}
	}
}

// keyBefore reports whether the orders key a sorts before b in the
// index: company as bytes, then order_no as a number.
func keyBefore(a, b []string) bool {
	if a[0] != b[0] {
		return a[0] < b[0]
	}
	x, _ := strconv.ParseInt(a[1], 10, 64)
	y, _ := strconv.ParseInt(b[1], 10, 64)
	return x < y
}

// lineBefore reports whether line a sorts before line b by their first n
// values, the line key: strings as bytes, numbers as numbers.
func lineBefore(a, b []entity.Value, n int) bool {
	for i := range n {
		switch {
		case a[i].S != b[i].S:
			return a[i].S < b[i].S
		case a[i].I != b[i].I:
			return a[i].I < b[i].I
		}
	}
	return false
}

// linesText writes lines one a line, sorted by their text when sorted.
func linesText(lines entity.Lines, sorted bool) string {
	out := make([]string, len(lines))
	for i, l := range lines {
		parts := make([]string, len(l))
		for j, v := range l {
			switch {
			case v.Null:
				parts[j] = "NULL"
			case v.S != "":
				parts[j] = strconv.Quote(v.S)
			default:
				parts[j] = strconv.FormatInt(v.I, 10)
			}
		}
		out[i] = strings.Join(parts, " | ")
	}
	if sorted {
		slices.Sort(out)
	}
	return strings.Join(out, "\n")
}

// eventLines writes what an event's data should carry of each child's
// lines, as linesText does; a delete's lines sorted (read back from the
// table), the others in served order.
func eventLines(e *entity.Entity, lines []entity.Lines, sorted bool) string {
	var b strings.Builder
	for c, ch := range e.Children {
		var objs []string
		for _, l := range lines[c] {
			obj := map[string]any{}
			for j, col := range ch.Columns {
				v := l[j]
				switch {
				case v.Null:
					obj[col.Name] = nil
				case col.Type.Kind == entity.Int32:
					obj[col.Name] = v.I
				default:
					obj[col.Name] = v.S
				}
			}
			b, _ := json.Marshal(obj)
			objs = append(objs, string(b))
		}
		if sorted {
			slices.Sort(objs)
		}
		fmt.Fprintf(&b, " %s=[%s]", ch.Name, strings.Join(objs, ","))
	}
	return b.String()
}

// compareDocumentEvents fails t unless the outbox holds exactly the
// model's changes, in order, each with its lines.
func compareDocumentEvents(t *testing.T, step int, s *store.Store, e *entity.Entity, want []string) {
	t.Helper()
	rows, err := s.DB().Raw("SELECT "+outbox.StoredColumns+" FROM erpsync_events WHERE entity = ? ORDER BY id", e.Name).Rows()
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var bodies []string
	for rows.Next() {
		var st outbox.Stored
		if err := rows.Scan(st.Dest()...); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, string(st.Body()))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(bodies))
	for i, body := range bodies {
		var ev struct {
			Op      string
			Version int64
			Key     map[string]any
			Data    map[string]json.RawMessage
		}
		if err := json.Unmarshal([]byte(body), &ev); err != nil {
			t.Fatalf("event %s: %v", body, err)
		}
		key := entity.KeyText([]string{fmt.Sprint(ev.Key["company"]), fmt.Sprint(ev.Key["order_no"])})
		var b strings.Builder
		for _, ch := range e.Children {
			var objs []map[string]any
			if err := json.Unmarshal(ev.Data[ch.Name], &objs); err != nil || objs == nil {
				t.Fatalf("event %s: %s: %v (want an array)", body, ch.Name, err)
			}
			var texts []string
			for _, o := range objs {
				b, _ := json.Marshal(o)
				texts = append(texts, string(b))
			}
			if ev.Op == "delete" {
				slices.Sort(texts)
			}
			fmt.Fprintf(&b, " %s=[%s]", ch.Name, strings.Join(texts, ","))
		}
		got[i] = fmt.Sprintf("%s %s@%d%s", key, ev.Op, ev.Version, b.String())
	}
	if !slices.Equal(got, want) {
		for i := range max(len(got), len(want)) {
			var g, w string
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if g != w {
				t.Fatalf("step %d: event %d:\n%q\nthe model's:\n%q", step, i, g, w)
			}
		}
	}
}

// Versions of a composite key with an int64 past 2^53 finds exactly the
// rows asked: the key's number is compared as a number, not as a string
// that MySQL would compare with it as a double.
func TestVersionsOfLargeIntegerKeys(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	e := orders(t)
	e.Children = nil
	st := entityStore(t, s, e)
	var rows []store.Row
	for i := range int64(3) {
		no := int64(9_007_199_254_740_995) + i
		rows = append(rows, store.Row{Key: entity.KeyText([]string{"1001", strconv.FormatInt(no, 10)}),
			Vals: []entity.Value{{S: "1001"}, {I: no}, {S: "OPEN"}, {Null: true}}, Version: 1 + i, Fence: 1, UpdatedAt: time.Now()})
	}
	if err := st.InsertRows(ctx, rows); err != nil {
		t.Fatal(err)
	}
	got, err := st.Versions(ctx, []string{rows[0].Key, rows[2].Key})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[rows[0].Key].Version != 1 || got[rows[2].Key].Version != 3 {
		t.Fatalf("versions of %q and %q: %+v", rows[0].Key, rows[2].Key, got)
	}
}

// Writers of interleaved documents at once (each its own keys, as the
// sync's record locks make them, in chunks whose keys interleave in the
// child tables' index) all succeed, and every document ends at its last
// version with that version's lines: a deadlock between them is retried,
// not returned.
func TestConcurrentDocumentWriters(t *testing.T) {
	t.Parallel()
	s := setup(t)
	st := entityStore(t, s, orders(t))
	ctx := context.Background()
	const writers, keys, versions = 6, 40, 40
	row := func(no, version int64) store.Row {
		var items entity.Lines
		for n := range (version + no/writers) % 5 {
			items = append(items, []entity.Value{{I: version + n}, {S: "M"}, {S: "1.000"}, {Null: true}})
		}
		return store.Row{Key: "1000" + entity.KeySeparator + strconv.FormatInt(no, 10), Vals: []entity.Value{{S: "1000"}, {I: no}, {S: "OPEN"}, {Null: true}},
			Version: version, Fence: 1, UpdatedAt: time.Now(), Children: []entity.Lines{items, {}}}
	}
	errs := make(chan error, writers*versions)
	var wg sync.WaitGroup
	for w := range int64(writers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := int64(1); v <= versions; v++ {
				var rows []store.Row
				for i := range int64(keys) {
					rows = append(rows, row(w+writers*i, v))
				}
				var err error
				switch {
				case v == 1:
					err = st.InsertRows(ctx, rows)
				case v%3 == 0:
					err = st.UpsertRows(ctx, rows)
				default:
					_, err = st.RestoreRows(ctx, rows)
				}
				if err != nil {
					errs <- fmt.Errorf("writer %d, version %d: %w", w, v, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	want := map[string]string{}
	for no := range int64(writers * keys) {
		if r := row(no, versions); len(r.Children[0]) > 0 {
			want[r.Key] = linesText(r.Children[0], true)
		}
	}
	got := map[string]string{}
	err := st.ScanLines(ctx, 0, nil, func(parent string, lines entity.Lines) error {
		got[parent] = linesText(lines, true)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("lines after the writers: %d documents, want %d", len(got), len(want))
	}
}
