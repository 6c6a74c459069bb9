package capentity

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/captest"
	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/odata"
	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/testenv"
)

var bin string // path of the erpsync binary built for these tests

func TestMain(m *testing.M) { testenv.MainWithBinary(m, "./cmd/erpsync", &bin) }

// env is one test's database and lock prefix (proctest.Env, whose erpmock
// stays unused) with a CAP server whose SalesService is the ERP, and the
// config file the erpsync processes read.
type env struct {
	*proctest.Env
	cap  *captest.Server
	file *entity.File // the config file, once use has loaded it
	// changes counts the changes the test has made to CAP so far.
	changes atomic.Int64
}

// setup starts CAP with basic authentication and opt, and an Env whose
// erpsync processes read its SalesService through OData V4.
func setup(t *testing.T, opt captest.Options) *env { return setupOn(t, opt, odata.Version4) }

// setupOn is setup with the erpsync processes reading through OData
// version v (the ERP URL is the service's V2 twin for Version2).
func setupOn(t *testing.T, opt captest.Options, v string) *env {
	t.Helper()
	opt.Auth = true
	e := &env{Env: proctest.New(t, bin, erpmock.Options{}), cap: captest.Start(t, opt)}
	e.ERPURL = e.cap.On(t, e.cap.SalesURL, v)
	e.Extra = append(e.Extra, "ERPSYNC_ERP_USERNAME="+e.cap.User, "ERPSYNC_ERP_PASSWORD="+e.cap.Password)
	return e
}

// discover writes the file `erpsync discover` makes of the SalesService
// (through the OData version the test reads) and returns its path.
func (e *env) discover() string {
	e.T.Helper()
	path := filepath.Join(e.T.TempDir(), "sales.yaml")
	e.MustRun("discover", "--erp-url", e.ERPURL, "-o", path)
	return path
}

// write writes a config file of text and returns its path.
func (e *env) write(name, text string) string {
	e.T.Helper()
	path := filepath.Join(e.T.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		e.T.Fatal(err)
	}
	return path
}

// use loads the config file at path as the one the test compares with,
// and migrates the database with it.
func (e *env) use(path string) {
	e.T.Helper()
	f, err := entity.Load(path)
	if err != nil {
		e.T.Fatal(err)
	}
	e.file = f
	e.MustRun("migrate", "--config", path)
}

// cfg returns args with --config and the loaded file's path.
func (e *env) cfg(args ...string) []string { return append(args, "--config", e.file.Path) }

// row is one table row as text (columnText of each declared column; NULL
// is !Valid), with erpsync's own columns.
type row struct {
	cols    []sql.NullString // the entity's columns, in declaration order
	version int64
	updated time.Time
	deleted bool
}

// rows returns the entity's table, by key text (the key columns' text
// joined by "|").
func (e *env) rows(ent *entity.Entity) map[string]row {
	e.T.Helper()
	sel := make([]string, len(ent.Columns))
	for i, c := range ent.Columns {
		sel[i] = columnText(e.Postgres, c)
	}
	q := "SELECT " + strings.Join(sel, ", ") + ", erp_version, erp_updated_at, deleted_at IS NOT NULL FROM " + e.Table(ent.Table)
	rs, err := e.DB.Query(q)
	if err != nil {
		e.T.Fatal(err)
	}
	defer rs.Close()
	out := map[string]row{}
	for rs.Next() {
		r := row{cols: make([]sql.NullString, len(ent.Columns))}
		dst := make([]any, 0, len(ent.Columns)+3)
		for i := range r.cols {
			dst = append(dst, &r.cols[i])
		}
		if err := rs.Scan(append(dst, &r.version, &r.updated, &r.deleted)...); err != nil {
			e.T.Fatal(err)
		}
		k := keyOf(ent, func(i int) string { return r.cols[i].String })
		if _, dup := out[k]; dup {
			e.T.Errorf("%s: key %s twice", ent.Table, k)
		}
		out[k] = r
	}
	if err := rs.Err(); err != nil {
		e.T.Fatal(err)
	}
	return out
}

// columnText is the SQL that reads column c as text as MySQL's CAST AS
// CHAR prints it, on MySQL or, pg, on PostgreSQL: there a boolean reads 1
// or 0 and a date-time reads in UTC with the column's digits, as on MySQL.
func columnText(pg bool, c entity.Column) string {
	if !pg {
		return "CAST(`" + c.Name + "` AS CHAR)"
	}
	col := `"` + c.Name + `"`
	switch c.Type.Kind {
	case entity.Bool:
		return "CASE WHEN " + col + " THEN '1' WHEN NOT " + col + " THEN '0' END"
	case entity.DateTime:
		layout := "YYYY-MM-DD HH24:MI:SS"
		if p := c.Type.Digits(); p > 0 {
			layout += ".FF" + strconv.Itoa(p)
		}
		return "to_char(" + col + " AT TIME ZONE 'UTC', '" + layout + "')"
	}
	return "CAST(" + col + " AS TEXT)"
}

// keyOf joins the text of ent's key columns; text returns the text of the
// i-th column.
func keyOf(ent *entity.Entity, text func(i int) string) string {
	var parts []string
	for _, k := range ent.Key {
		for i, c := range ent.Columns {
			if c.Name == k {
				parts = append(parts, text(i))
			}
		}
	}
	return strings.Join(parts, "|")
}

// property returns the value of the source property at path in o (CAP
// flattens a structured element, so a dotted path is read as Address_City
// when the nested object is absent), and whether o has it.
func property(o captest.Object, path []string) (any, bool) {
	var v any = map[string]any(o)
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[p]; !ok {
			return nil, false
		}
	}
	return v, true
}

// want returns the text MySQL must hold for column c of CAP's record o:
// numbers as CAP served them (exact strings), booleans as 1 or 0, a
// date-time in UTC with milliseconds, a values map applied.
func want(t testing.TB, c entity.Column, o captest.Object) sql.NullString {
	t.Helper()
	v, ok := property(o, c.From)
	if !ok {
		if flat, ok2 := o[strings.Join(c.From, "_")]; ok2 {
			v, ok = flat, true
		}
	}
	if !ok {
		t.Fatalf("CAP record %v has no property %s", o, strings.Join(c.From, "."))
	}
	var s string
	switch v := v.(type) {
	case nil:
		return sql.NullString{}
	case bool:
		s = map[bool]string{true: "1", false: "0"}[v]
	case json.Number:
		s = v.String()
	case string:
		s = v
	default:
		t.Fatalf("CAP property %s: a %T", strings.Join(c.From, "."), v)
	}
	if c.Type.Kind == entity.DateTime {
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatalf("CAP property %s: %v", strings.Join(c.From, "."), err)
		}
		// As MySQL writes a DATETIME(P) as text: P digits, none for 0.
		layout := "2006-01-02 15:04:05"
		if p := c.Type.Digits(); p > 0 {
			layout += "." + strings.Repeat("0", p)
		}
		s = ts.UTC().Format(layout)
	}
	if c.Values != nil {
		s = c.Values[s]
	}
	return sql.NullString{String: s, Valid: true}
}

// version returns the erp_version and erp_updated_at o must have in ent's
// table: its version property, or updated_at in microseconds.
func version(t testing.TB, ent *entity.Entity, o captest.Object) (int64, time.Time) {
	t.Helper()
	u, _ := property(o, ent.UpdatedAt)
	us, _ := u.(string)
	at, err := time.Parse(time.RFC3339Nano, us)
	if err != nil {
		t.Fatalf("CAP record %v: %s %q: %v", o, strings.Join(ent.UpdatedAt, "."), us, err)
	}
	if ent.Version == nil {
		return at.UnixMicro(), at
	}
	v, _ := property(o, ent.Version)
	n, err := json.Number(fmt.Sprint(v)).Int64()
	if err != nil {
		t.Fatalf("CAP record %v: version %v: %v", o, v, err)
	}
	return n, at
}

// assertTable checks that ent's table holds exactly objs as live rows,
// column for column as text, each at its version, and that every other
// row is soft-deleted. It returns the number of soft-deleted rows.
func (e *env) assertTable(ent *entity.Entity, objs []captest.Object) int {
	e.T.Helper()
	rows := e.rows(ent)
	fail := failer(e.T, ent.Table+": ")
	seen := map[string]bool{}
	for _, o := range objs {
		wants := make([]sql.NullString, len(ent.Columns))
		for i, c := range ent.Columns {
			wants[i] = want(e.T, c, o)
		}
		k := keyOf(ent, func(i int) string { return wants[i].String })
		seen[k] = true
		r, ok := rows[k]
		if !ok {
			fail("%s missing", k)
			continue
		}
		if r.deleted {
			fail("%s soft-deleted, but CAP has it", k)
		}
		for i, c := range ent.Columns {
			if r.cols[i] != wants[i] {
				fail("%s.%s: %s, CAP %s", k, c.Name, text(r.cols[i]), text(wants[i]))
			}
		}
		if v, at := version(e.T, ent, o); r.version != v || !r.updated.Equal(at) {
			fail("%s: erp_version %d, erp_updated_at %v; want %d, %v", k, r.version, r.updated, v, at)
		}
	}
	deleted := 0
	for k, r := range rows {
		switch {
		case seen[k]:
		case !r.deleted:
			fail("%s live, but CAP has no such record", k)
		default:
			deleted++
		}
	}
	return deleted
}

// text shows a column's value, NULL as NULL.
func text(s sql.NullString) string {
	if !s.Valid {
		return "NULL"
	}
	return fmt.Sprintf("%q", s.String)
}

// all returns every record of set.
func all(t testing.TB, set *captest.TypedSet) []captest.Object {
	t.Helper()
	objs, err := set.All(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// assertTruth checks both SalesService tables of the file against CAP
// and that `erpsync verify --config` exits 0; it returns the number of
// soft-deleted customers.
func (e *env) assertTruth() int {
	e.T.Helper()
	deleted := e.assertTable(e.file.Entity("customers"), all(e.T, e.cap.Customers))
	if so := e.file.Entity("sales_orders"); so != nil {
		e.assertTable(so, all(e.T, e.cap.SalesOrders))
	}
	if r := e.Run(context.Background(), e.cfg("verify")...); r.Code != 0 {
		e.T.Errorf("verify --config exit %d: %s", r.Code, r.Out())
	}
	return deleted
}

// readReports reads the JSON array of reports --report writes for a
// command of several entities.
func readReports(t testing.TB, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var reps []map[string]any
	if err := json.Unmarshal(b, &reps); err != nil {
		t.Fatalf("report %s: %v", b, err)
	}
	return reps
}

// post creates n customers of company, numbered from first, four POSTs
// at a time, and fails the test on an error.
func (e *env) post(company string, first, n int) {
	e.T.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := first + w; i < first+n; i += 4 {
				if _, err := e.cap.Customers.Post(context.Background(), captest.Customer(company, i)); err != nil {
					errs <- fmt.Errorf("post customer %s/%d: %w", company, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.T.Fatal(err)
	}
}

// TestDiscoverMigrateRunVerify syncs the SalesService with the file
// `erpsync discover` writes, as it is: one run brings both entities in, and
// each table equals CAP value for value (Int64 past 2^53 either way, a
// decimal at the edge of Decimal(15,2), NULLs, non-ASCII names).
func TestDiscoverMigrateRunVerify(t *testing.T) {
	t.Parallel()
	captest.ForVersions(t, func(t *testing.T, v string) {
		e := setupOn(t, captest.Options{}, v)
		ctx := context.Background()
		c := captest.Customer("2000", 1)
		c["CustomerName"], c["CreditLimit"], c["Rating"], c["FoundedOn"] = "Ça va? 😀 Ünïcödé ☕", "9999999999999.99", "9223372036854775807", nil
		if _, err := e.cap.Customers.Post(ctx, c); err != nil {
			t.Fatal(err)
		}
		c = captest.Customer("2000", 2)
		c["Rating"], c["CreditLimit"], c["Address_City"] = "-9223372036854775808", "-0.01", nil
		if _, err := e.cap.Customers.Post(ctx, c); err != nil {
			t.Fatal(err)
		}
		path := e.discover()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "# - name: sales_order_items") {
			t.Fatalf("discover did not comment out SalesOrderItems:\n%s", b)
		}
		e.use(path)
		if n := len(e.file.Entities); n != 2 {
			t.Fatalf("the discovered file has %d entities, want customers and sales_orders", n)
		}
		if e.TableExists("sales_order_items") {
			t.Error("sales_order_items, which the file comments out, has a table")
		}
		report := filepath.Join(t.TempDir(), "report.json")
		e.MustRun(e.cfg("run", "--report", report)...)
		reps := readReports(t, report)
		if len(reps) != 2 || reps[0]["entity"] != "customers" || reps[1]["entity"] != "sales_orders" {
			t.Fatalf("one run of the file: reports %v, want customers' and sales_orders'", reps)
		}
		for _, rep := range reps {
			if rep["status"] != "succeeded" || rep["invalid"] != float64(0) {
				t.Errorf("report %v", rep)
			}
		}
		if n := len(all(t, e.cap.Customers)); n != captest.SalesCustomerCount+2 {
			t.Fatalf("CAP has %d customers, want %d", n, captest.SalesCustomerCount+2)
		}
		if deleted := e.assertTruth(); deleted != 0 {
			t.Errorf("%d customers soft-deleted", deleted)
		}
		var rating string
		if err := e.DB.QueryRow("SELECT rating FROM " + e.Table("customers") + " WHERE company_code = '1000' AND customer = 'C0001'").Scan(&rating); err != nil || rating != captest.SalesBigRating {
			t.Errorf("rating of 1000/C0001: %q, %v; want %s", rating, err, captest.SalesBigRating)
		}
	})
}

// TestOverlapWhileCustomersChange runs a run and a backfill of the whole
// file and a run of customers alone at once, while the test PATCHes
// customers (Int64 and Decimal values as strings, names, NULLs,
// booleans), POSTs new ones and DELETEs some. No row's version goes down
// meanwhile, and a last run and a reconcile leave both tables equal to
// CAP, the deleted customers soft-deleted.
func TestOverlapWhileCustomersChange(t *testing.T) {
	t.Parallel()
	captest.ForVersions(t, func(t *testing.T, v string) {
		e := setupOn(t, captest.Options{PageLimit: 50, Customers: map[string]int{"1000": 300}}, v)
		e.use(e.discover())
		e.MustRun(e.cfg("run")...)
		watch := e.WatchTable("customers", "CONCAT(company_code, '/', customer)")
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var ch changes
		wg.Go(func() { ch = e.change(ctx, 300) })
		// One change of each kind before the processes start.
		proctest.Eventually(time.Minute, func() bool { return e.changes.Load() >= 25 })
		procs := []*proctest.Proc{
			e.Start(e.cfg("run", "--page-size", "50")...),
			e.Start(e.cfg("backfill", "--since", "2000-01-01T00:00:00Z", "--page-size", "50", "--workers", "3")...),
			e.Start(e.cfg("run", "--entity", "customers", "--page-size", "50", "--workers", "2", "--chunk-size", "10")...),
		}
		for i, p := range procs {
			if r := p.Wait(); r.Code != 0 {
				t.Errorf("process %d exit %d: %s", i, r.Code, r.Stdout)
			}
		}
		stop()
		wg.Wait()
		if ch.patched == 0 || ch.posted == 0 || ch.deleted == 0 {
			t.Fatalf("changes during the processes: %+v", ch)
		}
		t.Logf("changes while 3 processes ran: %+v", ch)
		e.MustRun(e.cfg("run")...)
		// The changes delete more on a slow machine, where the processes
		// run longer: the guards allow what CAP deleted and no row more.
		e.MustRun(e.cfg("reconcile", "--max-delete", strconv.Itoa(ch.deleted), "--max-delete-total", "100%")...)
		if polls, downs := watch.Stop(); len(downs) > 0 {
			t.Errorf("erp_version went down (%d polls): %v", polls, downs)
		}
		if deleted := e.assertTruth(); deleted != ch.deleted {
			t.Errorf("%d customers soft-deleted, %d deleted in CAP after the first run", deleted, ch.deleted)
		}
	})
}

// waitPace waits for the next tick of pace, and reports false when ctx
// ends first.
func waitPace(ctx context.Context, pace *time.Ticker) bool {
	select {
	case <-ctx.Done():
		return false
	case <-pace.C:
		return true
	}
}

// changes counts what change did to CAP's customers.
type changes struct{ patched, posted, deleted int }

// changePace is the time between two changes the tests make to CAP while
// erpsync processes run, and changeBudget the most changes one test
// makes. A run reads until it meets the end of the feed: changes made as
// fast as CAP answers, without end, took CAP's one thread from the
// processes' reads, and the faster the machine, the more changes there
// were to chase (a run over OData V2 chased them for minutes).
const (
	changePace   = 20 * time.Millisecond
	changeBudget = 400
)

// change PATCHes, POSTs and DELETEs customers of company 1000, one every
// changePace, until ctx ends or changeBudget changes are made: the
// customers numbered 0 to n-1 exist at its start. Every change is counted
// in e.changes as it is made.
func (e *env) change(ctx context.Context, n int) changes {
	var ch changes
	live := make([]int, n)
	for i := range live {
		live[i] = i
	}
	next := n
	pace := time.NewTicker(changePace)
	defer pace.Stop()
	for i := 0; i < changeBudget && waitPace(ctx, pace); i++ {
		var err error
		switch {
		case i%10 == 9:
			_, err = e.cap.Customers.Post(context.Background(), captest.Customer("1000", next))
			live = append(live, next)
			next++
			ch.posted++
		case i%25 == 24 && len(live) > 1 && live[0] < n:
			// One of the customers of the start, never one posted since:
			// a customer posted and deleted before any process read it
			// has no row to soft-delete.
			j := (i * 7) % len(live)
			for live[j] >= n {
				j = (j + 1) % len(live)
			}
			err = e.cap.Customers.Delete(context.Background(), captest.Key{"CompanyCode": "1000", "Customer": captest.Customer("1000", live[j])["Customer"]})
			live = append(live[:j], live[j+1:]...)
			ch.deleted++
		default:
			_, err = e.cap.Customers.Patch(context.Background(), captest.Key{"CompanyCode": "1000", "Customer": captest.Customer("1000", live[(i*13)%len(live)])["Customer"]}, patchOf(i))
			ch.patched++
		}
		if err != nil {
			e.T.Errorf("change %d: %v", i, err)
			return ch
		}
		e.changes.Add(1)
	}
	return ch
}

// patchOf returns the i-th PATCH of a customer: Int64 and Decimal values
// as strings (past 2^53, negative, at the edge of the scale), names with
// non-ASCII letters, NULLs and booleans.
func patchOf(i int) map[string]any {
	switch i % 5 {
	case 0:
		return map[string]any{"Rating": fmt.Sprint(int64(9007199254740993) + int64(i)*2), "CreditLimit": fmt.Sprintf("%d.%02d", 9999999999990+i%9, i%100)}
	case 1:
		return map[string]any{"CustomerName": fmt.Sprintf("Łódź Ōsaka №%d ñ", i), "IsBlocked": i%2 == 0}
	case 2:
		return map[string]any{"CreditLimit": nil, "FoundedOn": nil, "Address_City": nil, "Rating": nil}
	case 3:
		return map[string]any{"Rating": fmt.Sprint(-int64(9007199254740993) - int64(i)), "CreditLimit": "-0.01", "FoundedOn": "2000-02-29", "Status": "B"}
	}
	return map[string]any{"Address_City": "São Paulo", "IsBlocked": false, "Status": "A"}
}

// TestKilledRunResumes kills a run of the file with SIGKILL mid-sync, once
// it has saved a checkpoint; once its job lock has expired, the next runs continue from the checkpoint and
// end with both tables equal to CAP.
func TestKilledRunResumes(t *testing.T) {
	t.Parallel()
	captest.ForVersions(t, func(t *testing.T, v string) {
		e := setupOn(t, captest.Options{PageLimit: 10, Customers: map[string]int{"1000": 1000}}, v)
		e.use(e.discover())
		// 40 requests a second: the run takes seconds however idle the
		// machine, so that it saves a checkpoint (every second) long before
		// it ends.
		p := e.Start(e.cfg("run", "--page-size", "10", "--workers", "1", "--chunk-size", "5", "--lock-ttl", "2s", "--erp-rate", "40/s")...)
		count := func() int64 { return e.Count("SELECT COUNT(*) FROM %s", "customers") }
		// Killed once it has saved a checkpoint (every second).
		checkpoints := func() int64 { return e.Count("SELECT COUNT(*) FROM %s WHERE name = 'customers'", "sync_checkpoints") }
		if !proctest.Eventually(time.Minute, func() bool { return count() >= 100 && checkpoints() == 1 }) {
			t.Fatalf("%d rows and %d checkpoints a minute after the start", count(), checkpoints())
		}
		if err := p.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if r := p.Wait(); r.Code != -1 {
			t.Fatalf("killed run exit %d", r.Code)
		}
		total := int64(captest.SalesCustomerCount + 1000)
		n := count()
		if n >= total {
			t.Fatalf("the run had finished (%d rows) before it was killed", n)
		}
		t.Logf("killed with %d of %d customers written", n, total)
		// A record changed after the kill comes in too.
		if _, err := e.cap.Customers.Patch(context.Background(), captest.Key{"CompanyCode": "1000", "Customer": "C0001"}, map[string]any{"Rating": "9007199254740995"}); err != nil {
			t.Fatal(err)
		}
		ok := proctest.Eventually(30*time.Second, func() bool {
			e.MustRun(e.cfg("run", "--lock-ttl", "2s")...)
			return count() == total && e.Count("SELECT COUNT(*) FROM %s", "sales_orders") == captest.SalesOrderCount
		})
		if !ok {
			t.Fatalf("no run finished the sync after the kill: %d rows", count())
		}
		e.assertTruth()
	})
}

// customersHead and customersKey are the parts of the files below that
// declare the customers entity (its sources in between) and its key.
const (
	customersHead = `erp:
  kind: odata
entities:
  - name: customers
`
	customersKey = `    key: [company, customer]
    updated_at: modifiedAt
    version: ChangeCounter
    columns:
      - {name: company,      from: CompanyCode,  type: string(4)}
      - {name: customer,     from: Customer,     type: string(10)}
`
)

// companies is a file of customers read as two sources of one entity set,
// one per company code; a values map turns Status into words.
const companies = customersHead + `    sources:
      - {source: Customers, set: {company: "1000"}}
      - {source: Customers, set: {company: "2000"}}
` + customersKey + `      - {name: name,         from: CustomerName, type: string(80)}
      - {name: credit_limit, from: CreditLimit,  type: "decimal(15,2)", nullable: true}
      - {name: blocked,      from: IsBlocked,    type: bool}
      - {name: founded_on,   from: FoundedOn,    type: date, nullable: true}
      - {name: rating,       from: Rating,       type: int64, nullable: true}
      - {name: status,       from: Status,       type: string(16), values: {A: ACTIVE, B: BLOCKED}}
      - {name: city,         from: Address_City, type: string(40), nullable: true}
`

// of returns the records of objs whose CompanyCode is one of codes.
func of(objs []captest.Object, codes ...string) []captest.Object {
	var out []captest.Object
	for _, o := range objs {
		if slices.Contains(codes, o["CompanyCode"].(string)) {
			out = append(out, o)
		}
	}
	return out
}

// TestSourcePerCompany reads Customers as two sources, companies 1000 and
// 2000, beside a company 3000 that neither reads: each source's job gets
// its own company's rows only (erpsync filters the entity set on
// CompanyCode, which $metadata declares), both jobs have a checkpoint and
// a history, and the table equals CAP's two companies, also after both
// sources' runs and backfills overlapped while customers changed. A
// reconcile of the
// file, and of a file that reads company 1000 alone, soft-deletes a
// customer DELETEd in CAP and never a row of the other company, and a
// verify of company 1000 alone counts none of company 2000's rows.
func TestSourcePerCompany(t *testing.T) {
	t.Parallel()
	e := setup(t, captest.Options{PageLimit: 20, Customers: map[string]int{"1000": 40, "2000": 30, "3000": 10}})
	e.use(e.write("companies.yaml", companies))
	ent := e.file.Entity("customers")
	report := filepath.Join(t.TempDir(), "report.json")
	e.MustRun(e.cfg("run", "--page-size", "20", "--report", report)...)
	reps := readReports(t, report)
	objs := all(t, e.cap.Customers)
	wantFetched := map[string]float64{"customers/1000": float64(len(of(objs, "1000"))), "customers/2000": float64(len(of(objs, "2000")))}
	if len(reps) != 2 {
		t.Fatalf("%d reports, want one a source", len(reps))
	}
	for _, rep := range reps {
		job, _ := rep["job"].(string)
		if f, ok := wantFetched[job]; !ok || rep["fetched"] != f || rep["status"] != "succeeded" {
			t.Errorf("report %v: want job customers/1000 or customers/2000, %v fetched", rep, f)
		}
	}
	if d := e.assertTable(ent, of(objs, "1000", "2000")); d != 0 {
		t.Errorf("%d rows soft-deleted", d)
	}
	for job := range wantFetched {
		if n := e.Count("SELECT COUNT(*) FROM %s WHERE name = ?", "sync_checkpoints", job); n != 1 {
			t.Errorf("%d checkpoints of job %s", n, job)
		}
		if n := e.Count("SELECT COUNT(*) FROM %s WHERE job = ? AND status = 'succeeded'", "sync_runs", job); n != 1 {
			t.Errorf("%d succeeded runs of job %s", n, job)
		}
	}
	if r := e.MustRun(e.cfg("runs")...); !strings.Contains(r.Stdout, "customers/1000") || !strings.Contains(r.Stdout, "customers/2000") {
		t.Errorf("runs --config shows not both jobs:\n%s", r.Out())
	}
	if r := e.Run(context.Background(), e.cfg("verify")...); r.Code != 0 {
		t.Errorf("verify --config exit %d: %s", r.Code, r.Out())
	}

	// Both sources' runs and backfills at once, while customers of both
	// companies change.
	ctx := context.Background()
	procs := []*proctest.Proc{
		e.Start(e.cfg("run", "--page-size", "20")...),
		e.Start(e.cfg("backfill", "--since", "2000-01-01T00:00:00Z", "--page-size", "20", "--workers", "2")...),
	}
	for i, company := range []string{"1000", "2000", "3000"} {
		k := captest.Key{"CompanyCode": company, "Customer": captest.Customer(company, i)["Customer"]}
		if _, err := e.cap.Customers.Patch(ctx, k, patchOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range procs {
		if r := p.Wait(); r.Code != 0 {
			t.Errorf("process %d exit %d: %s", i, r.Code, r.Stdout)
		}
	}
	e.MustRun(e.cfg("run")...)
	objs = all(t, e.cap.Customers)
	if d := e.assertTable(ent, of(objs, "1000", "2000")); d != 0 {
		t.Errorf("%d rows soft-deleted", d)
	}

	// One customer of each company DELETEd in CAP.
	for _, k := range []captest.Key{{"CompanyCode": "1000", "Customer": "C0002"}, {"CompanyCode": "2000", "Customer": captest.Customer("2000", 3)["Customer"]}} {
		if err := e.cap.Customers.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	objs = all(t, e.cap.Customers)
	one := e.write("company-1000.yaml", strings.Replace(companies, `      - {source: Customers, set: {company: "2000"}}
`, "", 1))
	e.MustRun("reconcile", "--config", one, "--max-delete", "10")
	if r := e.Run(ctx, "verify", "--config", one); r.Code != 0 {
		t.Errorf("verify of company 1000 alone: exit %d: %s", r.Code, r.Out())
	}
	// Company 1000 alone: its deleted customer is soft-deleted, company
	// 2000's (the other still live in the table) is not.
	if d := e.assertTable(ent, append(of(objs, "1000", "2000"), deletedOf(t, e, "2000", 3))); d != 1 {
		t.Errorf("%d rows soft-deleted by a reconcile of company 1000, want 1", d)
	}
	e.MustRun(e.cfg("reconcile", "--max-delete", "10")...)
	if d := e.assertTable(ent, of(objs, "1000", "2000")); d != 2 {
		t.Errorf("%d rows soft-deleted by a reconcile of both companies, want 2", d)
	}
	if n := e.Count("SELECT COUNT(*) FROM %s WHERE deleted_at IS NULL AND company = '2000'", "customers"); n != int64(len(of(objs, "2000"))) {
		t.Errorf("%d live rows of company 2000, CAP has %d", n, len(of(objs, "2000")))
	}
}

// deletedOf returns customer n of company as the table holds it, for a
// record CAP no longer has: its row, read back, stands for the record.
func deletedOf(t testing.TB, e *env, company string, n int) captest.Object {
	t.Helper()
	// The record as captest.Customer makes it (POSTed or seeded), with
	// the server's fields from the row.
	o := captest.Object{}
	for k, v := range captest.Customer(company, n) {
		switch v := v.(type) {
		case string:
			o[k] = v
		case bool:
			o[k] = v
		}
	}
	var version int64
	var at time.Time
	if err := e.DB.QueryRow("SELECT erp_version, erp_updated_at FROM "+e.Table("customers")+" WHERE company = ? AND customer = ?", company, o["Customer"]).Scan(&version, &at); err != nil {
		t.Fatal(err)
	}
	o["ChangeCounter"] = json.Number(fmt.Sprint(version))
	o["modifiedAt"] = at.UTC().Format(time.RFC3339Nano)
	return o
}

// narrow is a file whose columns are narrower than some of CAP's values:
// 1000/C0001's name is 24 characters, more than string(20).
const narrow = customersHead + "    source: Customers\n" + customersKey + `      - {name: name,         from: CustomerName, type: string(20)}
      - {name: credit_limit, from: CreditLimit,  type: "decimal(8,2)", nullable: true}
`

// TestBadInput runs the binary on input that must not be written: values
// CAP serves that do not fit their column are quarantined with a reason
// naming the column, never truncated (a synced row keeps its last valid
// data), and the run fails past --max-invalid; a file with an unknown key exits 2 with FILE:LINE; a
// table narrowed behind erpsync's back stops the run, exit 2, with the one
// line that says to migrate.
func TestBadInput(t *testing.T) {
	t.Parallel()
	e := setup(t, captest.Options{})
	ctx := context.Background()
	big := captest.Customer("2000", 1)
	big["CustomerName"], big["CreditLimit"] = "Kurz", "1234567.89" // 7 digits before the point: decimal(8,2) holds 6
	if _, err := e.cap.Customers.Post(ctx, big); err != nil {
		t.Fatal(err)
	}
	e.use(e.write("narrow.yaml", narrow))
	ent := e.file.Entity("customers")
	r := e.Run(ctx, e.cfg("run", "--max-invalid", "1")...)
	if r.Code != 1 || !strings.Contains(r.Stderr, "--max-invalid") {
		t.Errorf("run past --max-invalid: exit %d: %s; want 1 and a line about --max-invalid", r.Code, r.Out())
	}
	reasons := map[string]string{}
	e.each(fmt.Sprintf("SELECT erp_id, reason FROM %s", e.Table("quarantined_records")), func(id, reason string) { reasons[id] = reason })
	for id, col := range map[string]string{keyText("1000", "C0001"): "name", keyText("2000", big["Customer"].(string)): "credit_limit"} {
		if !strings.Contains(reasons[id], col) {
			t.Errorf("quarantined %s: reason %q, want one naming column %s (all: %v)", id, reasons[id], col, reasons)
		}
	}
	if len(reasons) != 2 {
		t.Errorf("%d records quarantined, want 2: %v", len(reasons), reasons)
	}
	t.Logf("quarantined: %v", reasons)
	// The valid ones are written whole, the invalid ones not at all (no
	// truncated name, no rounded limit).
	e.MustRun(e.cfg("run", "--max-invalid", "5")...)
	objs := all(t, e.cap.Customers)
	var valid []captest.Object
	for _, o := range objs {
		if _, bad := reasons[keyText(o["CompanyCode"].(string), o["Customer"].(string))]; !bad {
			valid = append(valid, o)
		}
	}
	if len(valid) != len(objs)-2 {
		t.Fatalf("%d valid records of %d", len(valid), len(objs))
	}
	e.assertTable(ent, valid)

	// A synced record whose newest copy does not fit: the row keeps its
	// last valid data, marked quarantined, and nothing is truncated.
	dupont := captest.Key{"CompanyCode": "1000", "Customer": "C0002"}
	if _, err := e.cap.Customers.Patch(ctx, dupont, map[string]any{"CustomerName": "Dupont & Fils Société Anonyme"}); err != nil {
		t.Fatal(err)
	}
	e.MustRun(e.cfg("run", "--max-invalid", "5")...)
	var name string
	var quarantined bool
	if err := e.DB.QueryRow("SELECT name, quarantined_at IS NOT NULL FROM "+e.Table("customers")+" WHERE company = '1000' AND customer = 'C0002'").Scan(&name, &quarantined); err != nil || name != "Dupont & Fils SARL" || !quarantined {
		t.Errorf("1000/C0002 after a name too long: name %q, quarantined %v, %v; want the last valid name, quarantined", name, quarantined, err)
	}

	// A key the file format does not have: exit 2, FILE:LINE, nothing run.
	runs := e.Count("SELECT COUNT(*) FROM %s", "sync_runs")
	bad := e.write("bad.yaml", strings.Replace(narrow, "    columns:", "    colums:", 1))
	r = e.Run(ctx, "run", "--config", bad)
	want := "erpsync: " + bad + ":9: unknown key \"colums\" (did you mean \"columns\"?)"
	if lines := proctest.Lines(r.Stderr); r.Code != 2 || len(lines) != 1 || lines[0] != want {
		t.Errorf("bad file: exit %d, stderr %q; want 2 and the one line %q", r.Code, r.Stderr, want)
	}

	// A column narrowed behind erpsync's back: exit 2, one line, nothing run.
	narrowed := "ALTER TABLE " + e.Table("customers") + " MODIFY credit_limit DECIMAL(7,2) NULL"
	if e.Postgres {
		narrowed = "ALTER TABLE customers ALTER COLUMN credit_limit TYPE NUMERIC(7,2), ALTER COLUMN credit_limit DROP NOT NULL"
	}
	if _, err := e.DB.Exec(narrowed); err != nil {
		t.Fatal(err)
	}
	r = e.Run(ctx, e.cfg("run")...)
	want = "erpsync: table customers: column credit_limit is decimal(8,2) in the config file, decimal(7,2) in the database; run erpsync migrate"
	if lines := proctest.Lines(r.Stderr); r.Code != 2 || len(lines) != 1 || !strings.HasPrefix(lines[0], "erpsync: ") || !strings.Contains(lines[0], want[len("erpsync: "):]) {
		t.Errorf("narrowed table: exit %d, stderr %q; want 2 and the one line %q", r.Code, r.Stderr, want)
	}
	if n := e.Count("SELECT COUNT(*) FROM %s", "sync_runs"); n != runs {
		t.Errorf("%d runs recorded after the bad file and the narrowed table, %d before", n, runs)
	}
}

// keyText is the erp_id of a customers record with a composite key.
func keyText(company, customer string) string { return entity.KeyText([]string{company, customer}) }

// each calls fn with the two text columns of every row of query.
func (e *env) each(query string, fn func(a, b string)) {
	e.T.Helper()
	rs, err := e.DB.Query(query)
	if err != nil {
		e.T.Fatal(err)
	}
	defer rs.Close()
	for rs.Next() {
		var a, b string
		if err := rs.Scan(&a, &b); err != nil {
			e.T.Fatal(err)
		}
		fn(a, b)
	}
	if err := rs.Err(); err != nil {
		e.T.Fatal(err)
	}
}

// failer returns a function that reports a difference, prefix first, and
// stops the test at the eleventh.
func failer(t testing.TB, prefix string) func(format string, args ...any) {
	bad := 0
	return func(format string, args ...any) {
		t.Helper()
		t.Errorf(prefix+format, args...)
		if bad++; bad > 10 {
			t.Fatal("too many differences")
		}
	}
}
