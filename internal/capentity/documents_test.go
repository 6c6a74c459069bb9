package capentity

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/captest"
	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/proctest"
)

// ordersFile syncs OrdersService's SalesOrders as documents: the headers
// into sales_orders, their Items into sales_order_items, with a change
// event for every write (the webhook is never called: no relay runs).
const ordersFile = `erp:
  kind: odata
events: {sink: webhook, url: "http://127.0.0.1:9/erpsync"}
entities:
  - name: sales_orders
    source: SalesOrders
    key: [order_no]
    updated_at: ChangedAt
    version: ChangeCounter
    events: true
    columns:
      - {name: order_no,     from: OrderNo,     type: string(10)}
      - {name: company,      from: Company,     type: string(4)}
      - {name: customer,     from: Customer,    type: string(10)}
      - {name: order_date,   from: OrderDate,   type: date}
      - {name: total_amount, from: TotalAmount, type: "decimal(15,2)"}
      - {name: note,         from: Note,        type: string(80), nullable: true}
    children:
      - name: items
        table: sales_order_items
        from: Items
        key: [item_no]
        columns:
          - {name: item_no,    from: ItemNo,    type: int32}
          - {name: material,   from: Material,  type: string(40)}
          - {name: quantity,   from: Quantity,  type: "decimal(13,3)"}
          - {name: net_amount, from: NetAmount, type: "decimal(15,2)"}
          - {name: unit_price, from: UnitPrice, type: "decimal(28,8)"}
          - {name: batch,      from: Batch,     type: string(10), nullable: true}
`

// docEnv is an env whose ERP is OrdersService, with every version of every
// order the test has seen CAP hold.
type docEnv struct {
	*env
	mu sync.Mutex
	// seen maps an order number and a ChangeCounter to the order, with
	// its lines, as CAP held it at that version.
	seen map[string]map[int64]captest.Object
}

// setupOrders starts CAP with n seeded orders and opt, points erpsync at
// OrdersService through OData version v, migrates with ordersFile and
// remembers the seeded orders.
func setupOrders(t *testing.T, n int, opt captest.Options, v string) *docEnv {
	t.Helper()
	opt.Orders, opt.ReliablePaging = n, true
	e := &docEnv{env: setupOn(t, opt, v), seen: map[string]map[int64]captest.Object{}}
	e.ERPURL = e.cap.On(t, e.cap.OrdersURL, v)
	docs := e.documents()
	if len(docs) != n {
		t.Fatalf("CAP serves %d orders, want %d", len(docs), n)
	}
	for _, d := range docs {
		e.saw(d)
	}
	e.use(e.write("orders.yaml", ordersFile))
	return e
}

// documents returns every order of CAP with its lines.
func (e *docEnv) documents() []captest.Object {
	e.T.Helper()
	docs, err := e.cap.Orders.Documents(context.Background())
	if err != nil {
		e.T.Fatal(err)
	}
	return docs
}

// saw remembers order o at its version.
func (e *docEnv) saw(o captest.Object) {
	e.mu.Lock()
	defer e.mu.Unlock()
	no := o["OrderNo"].(string)
	if e.seen[no] == nil {
		e.seen[no] = map[int64]captest.Object{}
	}
	e.seen[no][versionOf(e.T, o)] = o
}

// versionOf returns an order's ChangeCounter.
func versionOf(t testing.TB, o captest.Object) int64 {
	t.Helper()
	n, err := json.Number(fmt.Sprint(o["ChangeCounter"])).Int64()
	if err != nil {
		t.Fatalf("order %v: ChangeCounter: %v", o["OrderNo"], err)
	}
	return n
}

// childEntity is child as an entity of its own, for keyOf.
func childEntity(c *entity.Child) *entity.Entity {
	return &entity.Entity{Key: c.Key, Columns: c.Columns}
}

// line is one row of a child table as text.
type line struct {
	parent  string // the parent's key text
	cols    []sql.NullString
	version int64
}

// lines returns the child table of ent, by parent key text and line key
// text joined by "|".
func (e *docEnv) lines(ent *entity.Entity) map[string]line {
	e.T.Helper()
	child := ent.Children[0]
	var sel []string
	for _, k := range ent.Key {
		sel = append(sel, columnText(e.Postgres, *ent.Column(k)))
	}
	for _, c := range child.Columns {
		sel = append(sel, columnText(e.Postgres, c))
	}
	rs, err := e.DB.Query("SELECT " + strings.Join(sel, ", ") + ", erp_version FROM " + e.Table(child.Table))
	if err != nil {
		e.T.Fatal(err)
	}
	defer rs.Close()
	out := map[string]line{}
	for rs.Next() {
		keys := make([]string, len(ent.Key))
		l := line{cols: make([]sql.NullString, len(child.Columns))}
		dst := make([]any, 0, len(sel)+1)
		for i := range keys {
			dst = append(dst, &keys[i])
		}
		for i := range l.cols {
			dst = append(dst, &l.cols[i])
		}
		if err := rs.Scan(append(dst, &l.version)...); err != nil {
			e.T.Fatal(err)
		}
		l.parent = strings.Join(keys, "|")
		k := l.parent + "|" + keyOf(childEntity(child), func(i int) string { return l.cols[i].String })
		if _, dup := out[k]; dup {
			e.T.Errorf("%s: line %s twice", child.Table, k)
		}
		out[k] = l
	}
	if err := rs.Err(); err != nil {
		e.T.Fatal(err)
	}
	return out
}

// wantLines returns the text the child table must hold for the lines of
// order o: by parent key text and line key text joined by "|".
func wantLines(t testing.TB, ent *entity.Entity, o captest.Object) (parent string, lines map[string][]sql.NullString) {
	t.Helper()
	child := ent.Children[0]
	parent = keyOf(ent, func(i int) string { return want(t, ent.Columns[i], o).String })
	ls, err := captest.Lines(o)
	if err != nil {
		t.Fatal(err)
	}
	lines = map[string][]sql.NullString{}
	for _, l := range ls {
		cols := make([]sql.NullString, len(child.Columns))
		for i, c := range child.Columns {
			cols[i] = want(t, c, l)
		}
		lines[parent+"|"+keyOf(childEntity(child), func(i int) string { return cols[i].String })] = cols
	}
	return parent, lines
}

// assertDocuments checks that the header table holds exactly docs as live
// rows (assertTable) and the child table exactly their lines, column for
// column as text, each line at its order's version: a line CAP removed is
// gone. Lines of soft-deleted orders are left out of the comparison; a
// line whose order has no row fails. It returns the number of
// soft-deleted orders.
func (e *docEnv) assertDocuments(ent *entity.Entity, docs []captest.Object) int {
	e.T.Helper()
	deleted := e.assertTable(ent, docs)
	child := ent.Children[0]
	got := e.lines(ent)
	fail := failer(e.T, child.Table+": ")
	live := map[string]bool{}
	lines := 0
	for _, o := range docs {
		parent, wants := wantLines(e.T, ent, o)
		live[parent] = true
		lines += len(wants)
		v, _ := version(e.T, ent, o)
		for k, w := range wants {
			l, ok := got[k]
			if !ok {
				fail("line %s missing", k)
				continue
			}
			for i, c := range child.Columns {
				if l.cols[i] != w[i] {
					fail("%s.%s: %s, CAP %s", k, c.Name, text(l.cols[i]), text(w[i]))
				}
			}
			if l.version != v {
				fail("%s: erp_version %d, its order's %d", k, l.version, v)
			}
		}
		for k, l := range got {
			if l.parent == parent {
				if _, ok := wants[k]; !ok {
					fail("line %s is there, but CAP's order %s has no such line", k, parent)
				}
			}
		}
	}
	headers := e.rows(ent)
	for k, l := range got {
		if live[l.parent] {
			continue
		}
		if h, ok := headers[l.parent]; !ok || !h.deleted {
			fail("line %s: its order %s is not in the table, or live but not in CAP", k, l.parent)
		}
	}
	e.T.Logf("%d orders and %d lines of CAP compared; %d orders soft-deleted", len(docs), lines, deleted)
	return deleted
}

// event is one row of the outbox.
type event struct {
	op      string
	version int64
	body    struct {
		Key  map[string]any `json:"key"`
		Data map[string]any `json:"data"`
	}
}

// events returns the outbox's events of entity name, in recording order.
func (e *docEnv) events(name string) []event {
	e.T.Helper()
	rs, err := e.DB.Query("SELECT "+outbox.StoredColumns+" FROM "+e.Table("erpsync_events")+" WHERE entity = ? ORDER BY id", name)
	if err != nil {
		e.T.Fatal(err)
	}
	defer rs.Close()
	var out []event
	for rs.Next() {
		var st outbox.Stored
		if err := rs.Scan(st.Dest()...); err != nil {
			e.T.Fatal(err)
		}
		ev := event{op: st.Op, version: st.Version}
		body := st.Body()
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&ev.body); err != nil {
			e.T.Fatalf("event body %s: %v", body, err)
		}
		out = append(out, ev)
	}
	if err := rs.Err(); err != nil {
		e.T.Fatal(err)
	}
	return out
}

// jsonText is the text of a JSON value of an event as MySQL's text of the
// column would read.
func jsonText(v any) sql.NullString {
	switch v := v.(type) {
	case nil:
		return sql.NullString{}
	case bool:
		return sql.NullString{String: map[bool]string{true: "1", false: "0"}[v], Valid: true}
	default:
		return sql.NullString{String: fmt.Sprint(v), Valid: true}
	}
}

// assertEvents checks the outbox of ent against the versions of the
// orders the test saw CAP hold: every insert, update and restore event
// carries its order's header and lines exactly as CAP held them at the
// event's version (no line more, none fewer); a delete event is of an
// order in deletedNos; and the current version of every order of docs has
// an event. It returns the number of events.
func (e *docEnv) assertEvents(ent *entity.Entity, docs []captest.Object, deletedNos []string) int {
	e.T.Helper()
	child := ent.Children[0]
	evs := e.events(ent.Name)
	fail := failer(e.T, "events: ")
	has := map[string]bool{}
	for _, ev := range evs {
		no, _ := ev.body.Key["order_no"].(string)
		has[fmt.Sprint(no, "@", ev.version)] = true
		if ev.op == "delete" {
			if !slices.Contains(deletedNos, no) {
				fail("a delete event of order %s, which CAP has", no)
			}
			continue
		}
		e.mu.Lock()
		o, ok := e.seen[no][ev.version]
		e.mu.Unlock()
		if !ok {
			fail("%s event of order %s at version %d, which the test never saw CAP hold", ev.op, no, ev.version)
			continue
		}
		for _, c := range ent.Columns {
			if got, w := jsonText(ev.body.Data[c.Name]), want(e.T, c, o); got != w {
				fail("%s event of %s@%d: %s %s, CAP %s", ev.op, no, ev.version, c.Name, text(got), text(w))
			}
		}
		_, wants := wantLines(e.T, ent, o)
		raw, ok := ev.body.Data[child.Name].([]any)
		if !ok {
			fail("%s event of %s@%d: data.%s is %T, want the lines", ev.op, no, ev.version, child.Name, ev.body.Data[child.Name])
			continue
		}
		if len(raw) != len(wants) {
			fail("%s event of %s@%d: %d lines, CAP had %d", ev.op, no, ev.version, len(raw), len(wants))
		}
		for _, r := range raw {
			m, _ := r.(map[string]any)
			cols := make([]sql.NullString, len(child.Columns))
			for i, c := range child.Columns {
				cols[i] = jsonText(m[c.Name])
			}
			k := no + "|" + keyOf(childEntity(child), func(i int) string { return cols[i].String })
			w, ok := wants[k]
			if !ok {
				fail("%s event of %s@%d: line %s, which CAP did not have", ev.op, no, ev.version, k)
				continue
			}
			for i, c := range child.Columns {
				if cols[i] != w[i] {
					fail("%s event of %s@%d: line %s.%s %s, CAP %s", ev.op, no, ev.version, k, c.Name, text(cols[i]), text(w[i]))
				}
			}
		}
	}
	for _, o := range docs {
		if k := fmt.Sprint(o["OrderNo"], "@", versionOf(e.T, o)); !has[k] {
			fail("no event of order %s at its current version", k)
		}
	}
	return len(evs)
}

// withDeleted returns docs and, for each order of deletedNos that the
// table holds, the order as CAP held it at the row's version: what the
// runs must have left before a reconcile soft-deletes them.
func (e *docEnv) withDeleted(ent *entity.Entity, docs []captest.Object, deletedNos []string) []captest.Object {
	e.T.Helper()
	rows := e.rows(ent)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, no := range deletedNos {
		r, ok := rows[no]
		if !ok {
			continue
		}
		o, ok := e.seen[no][r.version]
		if !ok {
			e.T.Errorf("order %s is at version %d, which the test never saw CAP hold", no, r.version)
			continue
		}
		docs = append(docs, o)
	}
	return docs
}

// docChanges counts what changeOrders did to CAP.
type docChanges struct {
	revised, created, deleted int
	deletedNos                []string
}

// changeOrders revises, creates and deletes orders, one every changePace,
// until ctx ends or changeBudget changes are made, remembering every
// version it makes: most changes are deep PATCHes that delete, change and
// add lines (captest's Revise), every tenth a new order with its lines,
// every 25th a DELETE. New orders are numbered "SN" and 6 digits from
// first. Every change is counted in e.changes as it is made.
func (e *docEnv) changeOrders(ctx context.Context, first int) docChanges {
	var ch docChanges
	var live []string
	e.mu.Lock()
	for no := range e.seen {
		live = append(live, no)
	}
	e.mu.Unlock()
	slices.Sort(live)
	next := first
	pace := time.NewTicker(changePace)
	defer pace.Stop()
	for i := 0; i < changeBudget && waitPace(ctx, pace); i++ {
		var o captest.Object
		var err error
		switch {
		case i%10 == 9:
			o, err = e.cap.Orders.Create(context.Background(), captest.NewOrder(fmt.Sprintf("SN%06d", next), next))
			live = append(live, fmt.Sprintf("SN%06d", next))
			next++
			ch.created++
		case i%25 == 24 && len(live) > 1:
			j := (i * 7) % len(live)
			err = e.cap.Orders.Delete(context.Background(), captest.Key{"OrderNo": live[j]})
			ch.deletedNos = append(ch.deletedNos, live[j])
			live = slices.Delete(live, j, j+1)
			ch.deleted++
		default:
			o, err = e.cap.Orders.Revise(context.Background(), live[(i*13)%len(live)], i)
			ch.revised++
		}
		if err != nil {
			e.T.Errorf("change %d: %v", i, err)
			return ch
		}
		if o != nil {
			e.saw(o)
		}
		e.changes.Add(1)
	}
	return ch
}

// TestDocumentsSync syncs 300 orders of 5 to 20 lines each: migrate, run
// and verify leave the header table equal to CAP row for row and the line
// table line for line (decimals of 28 digits exact, NULLs), with one insert
// event per order carrying its lines. Then CAP revises orders in deep
// PATCHes (lines deleted, changed and added; every line of one deleted),
// creates and deletes some; a run brings the tables to CAP again, the
// removed lines removed, and a reconcile (OData, no REST) soft-deletes the
// deleted orders; and every event carries the lines of its version. Lines
// changed by hand are found by verify and repaired by reconcile, with an
// event each.
func TestDocumentsSync(t *testing.T) {
	t.Parallel()
	captest.ForVersions(t, func(t *testing.T, v string) {
		e := setupOrders(t, 300, captest.Options{PageLimit: 50}, v)
		ent := e.file.Entity("sales_orders")
		if r := e.MustRun(e.cfg("migrate", "--plan")...); len(proctest.Lines(r.Stdout)) != 1 {
			t.Errorf("migrate --plan after migrate: %q, want the one line that says there is nothing to do", r.Stdout)
		}
		e.MustRun(e.cfg("run", "--page-size", "50")...)
		if r := e.Run(context.Background(), e.cfg("verify")...); r.Code != 0 {
			t.Errorf("verify exit %d: %s", r.Code, r.Out())
		}
		docs := e.documents()
		if d := e.assertDocuments(ent, docs); d != 0 {
			t.Errorf("%d orders soft-deleted", d)
		}
		if n := e.assertEvents(ent, docs, nil); n != len(docs) {
			t.Errorf("%d events after the first run of %d orders, want one each", n, len(docs))
		}

		ctx := context.Background()
		var deletedNos []string
		for i := range 40 {
			no := docs[(i*7)%len(docs)]["OrderNo"].(string)
			if slices.Contains(deletedNos, no) {
				continue
			}
			switch {
			case i%8 == 7:
				if err := e.cap.Orders.Delete(ctx, captest.Key{"OrderNo": no}); err != nil {
					t.Fatal(err)
				}
				deletedNos = append(deletedNos, no)
			case i%8 == 6:
				o, err := e.cap.Orders.Create(ctx, captest.NewOrder(fmt.Sprintf("SN%06d", i), i))
				if err != nil {
					t.Fatal(err)
				}
				e.saw(o)
			default:
				o, err := e.cap.Orders.Revise(ctx, no, i)
				if err != nil {
					t.Fatal(err)
				}
				e.saw(o)
			}
		}
		e.MustRun(e.cfg("run", "--page-size", "50")...)
		// Before reconcile, which repairs lines: the tables as the run left
		// them, the deleted orders still live.
		e.assertDocuments(ent, e.withDeleted(ent, e.documents(), deletedNos))
		e.MustRun(e.cfg("reconcile", "--max-delete", "10")...)
		if r := e.Run(ctx, e.cfg("verify")...); r.Code != 0 {
			t.Errorf("verify exit %d: %s", r.Code, r.Out())
		}
		docs = e.documents()
		if d := e.assertDocuments(ent, docs); d != len(deletedNos) {
			t.Errorf("%d orders soft-deleted, %d deleted in CAP", d, len(deletedNos))
		}
		n := e.assertEvents(ent, docs, deletedNos)
		t.Logf("%d events", n)

		// Lines changed by hand behind erpsync's back, headers untouched: one
		// deleted, one changed, one added. verify finds them, reconcile makes
		// the lines CAP's again and records an update event of each of the two
		// documents, at the version it holds, with its lines as repaired: the
		// consumers held the lines the table no longer has.
		lines := e.Table("sales_order_items")
		a, b := docs[0]["OrderNo"].(string), docs[1]["OrderNo"].(string)
		firstItem := func(order string) string {
			var item int64
			if err := e.DB.QueryRow("SELECT MIN(item_no) FROM "+lines+" WHERE order_no = ?", order).Scan(&item); err != nil {
				t.Fatal(err)
			}
			return strconv.FormatInt(item, 10)
		}
		firstA, firstB := firstItem(a), firstItem(b)
		for _, q := range []string{
			"DELETE FROM " + lines + " WHERE order_no = '" + a + "' AND item_no = " + firstA,
			"UPDATE " + lines + " SET quantity = quantity + 1 WHERE order_no = '" + b + "' AND item_no = " + firstB,
			"INSERT INTO " + lines + " (order_no, item_no, material, quantity, net_amount, unit_price, batch, erp_version) SELECT order_no, 99999, 'EXTRA', 1, 1, 1, NULL, erp_version FROM " + e.Table("sales_orders") + " WHERE order_no = '" + b + "'",
		} {
			if res, err := e.DB.Exec(q); err != nil {
				t.Fatal(err)
			} else if n, _ := res.RowsAffected(); n != 1 {
				t.Fatalf("%s: %d rows", q, n)
			}
		}
		if r := e.Run(ctx, e.cfg("verify")...); r.Code != 1 {
			t.Errorf("verify of lines changed by hand: exit %d, want 1: %s", r.Code, r.Out())
		}
		e.MustRun(e.cfg("reconcile", "--max-delete", "10")...)
		if d := e.assertDocuments(ent, docs); d != len(deletedNos) {
			t.Errorf("%d orders soft-deleted, %d deleted in CAP", d, len(deletedNos))
		}
		if m := e.assertEvents(ent, docs, deletedNos); m != n+2 {
			t.Errorf("%d events after the repair of the lines of 2 orders, %d before", m, n)
		}
		if r := e.Run(ctx, e.cfg("verify")...); r.Code != 0 {
			t.Errorf("verify after the repair: exit %d: %s", r.Code, r.Out())
		}
	})
}

// TestDocumentsOverlap runs a run and a backfill of the orders and a second
// run at once, while CAP revises orders in deep PATCHes, creates and
// deletes them. No order's version goes down meanwhile; a last run leaves
// every order's lines those of its row's version, and a reconcile the
// header and line tables equal to CAP, and every
// event carries the lines of its version, never another version's.
func TestDocumentsOverlap(t *testing.T) {
	t.Parallel()
	captest.ForVersions(t, func(t *testing.T, v string) {
		e := setupOrders(t, 300, captest.Options{PageLimit: 20}, v)
		ent := e.file.Entity("sales_orders")
		e.MustRun(e.cfg("run")...)
		watch := e.WatchTable("sales_orders", "order_no")
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var ch docChanges
		wg.Go(func() { ch = e.changeOrders(ctx, 0) })
		// At least one change of each kind before the processes start.
		proctest.Eventually(time.Minute, func() bool { return e.changes.Load() >= 30 })
		procs := []*proctest.Proc{
			e.Start(e.cfg("run", "--page-size", "20")...),
			e.Start(e.cfg("backfill", "--since", "2000-01-01T00:00:00Z", "--page-size", "20", "--workers", "3")...),
			e.Start(e.cfg("run", "--page-size", "20", "--workers", "2", "--chunk-size", "5")...),
		}
		for i, p := range procs {
			if r := p.Wait(); r.Code != 0 {
				t.Errorf("process %d exit %d: %s", i, r.Code, r.Out())
			}
		}
		stop()
		wg.Wait()
		if ch.revised == 0 || ch.created == 0 || ch.deleted == 0 {
			t.Fatalf("changes during the processes: %+v", ch)
		}
		t.Logf("changes while 3 processes ran: %d revised, %d created, %d deleted", ch.revised, ch.created, ch.deleted)
		e.MustRun(e.cfg("run")...)
		// Before reconcile, which repairs lines: the tables as the runs left
		// them, the deleted orders still live.
		e.assertDocuments(ent, e.withDeleted(ent, e.documents(), ch.deletedNos))
		e.MustRun(e.cfg("reconcile", "--max-delete", "100")...)
		if polls, downs := watch.Stop(); len(downs) > 0 {
			t.Errorf("erp_version went down (%d polls): %v", polls, downs)
		}
		docs := e.documents()
		if d := e.assertDocuments(ent, docs); d != ch.deleted {
			t.Errorf("%d orders soft-deleted, %d deleted in CAP", d, ch.deleted)
		}
		t.Logf("%d events", e.assertEvents(ent, docs, ch.deletedNos))
		if r := e.Run(context.Background(), e.cfg("verify")...); r.Code != 0 {
			t.Errorf("verify exit %d: %s", r.Code, r.Out())
		}
	})
}

// TestDocumentsKilledRun kills a run of 1,000 orders with SIGKILL
// mid-write, once it has saved a checkpoint: every order it wrote has
// exactly the lines of its version, none half-written. Orders revised
// after the kill come in too: the next runs, once the job lock has
// expired, end with both tables equal to CAP and the events carrying
// their lines.
func TestDocumentsKilledRun(t *testing.T) {
	t.Parallel()
	captest.ForVersions(t, func(t *testing.T, v string) {
		const n = 1000
		e := setupOrders(t, n, captest.Options{PageLimit: 10}, v)
		ent := e.file.Entity("sales_orders")
		// 40 requests a second: the run takes seconds however idle the
		// machine, so that it saves a checkpoint (every second) long before
		// it ends.
		p := e.Start(e.cfg("run", "--page-size", "10", "--workers", "1", "--chunk-size", "5", "--lock-ttl", "2s", "--erp-rate", "40/s")...)
		count := func() int64 { return e.Count("SELECT COUNT(*) FROM %s", "sales_orders") }
		checkpoints := func() int64 {
			return e.Count("SELECT COUNT(*) FROM %s WHERE name = 'sales_orders'", "sync_checkpoints")
		}
		if !proctest.Eventually(time.Minute, func() bool { return count() >= 100 && checkpoints() == 1 }) {
			t.Fatalf("%d orders and %d checkpoints a minute after the start", count(), checkpoints())
		}
		if err := p.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if r := p.Wait(); r.Code != -1 {
			t.Fatalf("killed run exit %d", r.Code)
		}
		written := count()
		if written >= n {
			t.Fatalf("the run had finished (%d orders) before it was killed", written)
		}
		t.Logf("killed with %d of %d orders written", written, n)
		// What the killed run wrote is whole: the orders in the table, each
		// with exactly its seeded lines.
		docs := e.documents()
		rows := e.rows(ent)
		var wrote []captest.Object
		for _, o := range docs {
			if _, ok := rows[o["OrderNo"].(string)]; ok {
				wrote = append(wrote, o)
			}
		}
		e.assertDocuments(ent, wrote)

		ctx := context.Background()
		for i := range 20 {
			o, err := e.cap.Orders.Revise(ctx, docs[(i*37)%n]["OrderNo"].(string), i)
			if err != nil {
				t.Fatal(err)
			}
			e.saw(o)
		}
		ok := proctest.Eventually(30*time.Second, func() bool {
			e.MustRun(e.cfg("run", "--lock-ttl", "2s")...)
			return count() == n
		})
		if !ok {
			t.Fatalf("no run finished the sync after the kill: %d orders", count())
		}
		docs = e.documents()
		if d := e.assertDocuments(ent, docs); d != 0 {
			t.Errorf("%d orders soft-deleted", d)
		}
		t.Logf("%d events", e.assertEvents(ent, docs, nil))
		if r := e.Run(ctx, e.cfg("verify")...); r.Code != 0 {
			t.Errorf("verify exit %d: %s", r.Code, r.Out())
		}
	})
}
