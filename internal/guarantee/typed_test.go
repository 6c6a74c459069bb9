package guarantee

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/reconcile"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
	"github.com/erpsync/erpsync/internal/testenv"
)

var flagDocFeeds = flag.Int("guarantee.doc-feeds", 6, "feeds TestDocumentsGuarantee generates")

var flagTypedFeeds = flag.Int("guarantee.typed-feeds", 10, "feeds TestTypedGuaranteeSweep and TestTwoEntitiesGuarantee generate each")

// membershipJob is the job of the memberships entity without --job: the
// built-in entity's, which examples/memberships.yaml's declaration keeps.
const membershipJob = "membership-sync"

// typedSpec is a feed of the entities of a config file of testdata,
// synced by bin/erpsync processes: the contracts of erpmock's typed face
// (contracts.yaml), or those and the memberships at once (both.yaml).
type typedSpec struct {
	Both bool
	// LockLoss: while a wave runs, the feed's Redis keeps losing its record
	// locks (as a failover to a replica that had not received them does),
	// and its processes are paused now and then past their lock TTL, so
	// that writers of one record overlap and write late: only the fencing
	// tokens and the version guard keep the rows right. On PostgreSQL a
	// pause inside a transaction also ends it (feed.processDSN).
	LockLoss bool
	// Events, when set, declares the contracts with `events: true`
	// (events.yaml): a sink receives their change events (events_test.go).
	Events *eventsSpec
	// Docs reads the contracts as documents (orders.yaml): each with its
	// lines from erpmock's documents face into contract_lines, which must
	// hold, for every row, exactly the lines of the version it holds.
	Docs bool
	// DocEvents, with Docs, declares the documents with `events: true`
	// (orders-events.yaml) and changes lines at their version after the
	// waves (lines_test.go).
	DocEvents *docEventsSpec
	// DocsOData, with Docs, reads the documents from the ERP's OData V2
	// face (orders-odata.yaml, odata_docs_test.go).
	DocsOData *docsODataSpec
}

func (ty *typedSpec) config() string {
	name := "contracts.yaml"
	switch {
	case ty.Both:
		name = "both.yaml"
	case ty.Events != nil:
		name = "events.yaml"
	case ty.Docs && ty.DocsOData != nil && ty.DocEvents != nil:
		name = "orders-odata-events.yaml"
	case ty.Docs && ty.DocsOData != nil:
		name = "orders-odata.yaml"
	case ty.Docs && ty.DocEvents != nil:
		name = "orders-events.yaml"
	case ty.Docs:
		name = "orders.yaml"
	}
	p, _ := filepath.Abs(filepath.Join("testdata", name))
	return p
}

func (ty *typedSpec) String() string {
	s := "entity: contracts of testdata/contracts.yaml (the typed face), every execution a process"
	if ty.Events != nil {
		s = "entity: contracts of testdata/events.yaml (the typed face, events: true), every execution a process"
	}
	if ty.Docs {
		s = "entity: contracts of testdata/orders.yaml (documents: the typed face with their lines), every execution a process"
	}
	if ty.Both {
		s = "entities: contracts (the typed face) and memberships (examples/memberships.yaml) of testdata/both.yaml, processes of both at once"
	}
	if ty.DocEvents != nil {
		s = "entity: contracts of testdata/orders-events.yaml (documents with events: true), every execution a process; " + ty.DocEvents.String()
	}
	if ty.DocsOData != nil {
		s = ty.DocsOData.String(ty.DocEvents)
	}
	if ty.LockLoss {
		s += "; Redis loses the record locks while the waves run; on PostgreSQL, a transaction idle for 1s is ended"
	}
	if ty.Events != nil {
		s += "; " + ty.Events.String()
	}
	return s
}

// table is one entity's table as the model reads it: its name, the SQL
// that gives a row's erp_id, the entity's name for --entity, and how its
// rows read as records.
type table struct {
	name, erpID, entity string
	typed               bool // the contracts of the typed face
	docs                bool // the contracts as documents, read from the documents face
	read                func(ctx context.Context, w *world) ([]row, error)
}

var (
	membershipsTable = &table{name: "memberships", erpID: "erp_id", entity: syncer.MembershipsEntity, read: readMemberships}
	// contractsTable's erp_id is ContractID(region, no).
	contractsTable = &table{name: "contracts", erpID: "CONCAT(region, no)", entity: "contracts", typed: true, read: readContracts}
	// ordersTable is contractsTable read as documents: each row's lines too.
	ordersTable = &table{name: "contracts", erpID: "CONCAT(region, no)", entity: "contracts", typed: true, docs: true, read: readOrders}
)

// tables returns the tables a feed of sc writes.
func (sc *scenario) tables() []*table {
	switch {
	case sc.Typed == nil:
		return []*table{membershipsTable}
	case sc.Typed.Both:
		return []*table{contractsTable, membershipsTable}
	case sc.Typed.Docs:
		return []*table{ordersTable}
	}
	return []*table{contractsTable}
}

// log is the id the ERP logs execution id's requests of tab's face under.
func (tab *table) log(id string) string {
	if tab.typed {
		return id + typedLog
	}
	return id
}

// keyText is the key text of the record erpID in tab: what the syncer
// shards and locks by.
func (tab *table) keyText(erpID string) string {
	if !tab.typed {
		return erpID
	}
	region, no, _ := erpmock.SplitContractID(erpID)
	return entity.KeyText([]string{region, strconv.FormatInt(no, 10)})
}

// jobOf is the job of tab's entity in feed f.
func (tab *table) jobOf(f *feed) string {
	if tab.typed {
		return tab.entity
	}
	return f.job
}

// readContracts reads every row of contracts as the records they hold,
// each typed column read back as the database stores it (a decimal as its
// text): the key split from the
// erp_id, the status through the code map, the numbers that derive from the
// version exact to the last digit.
func readContracts(ctx context.Context, w *world) ([]row, error) {
	return scanRows(ctx, w, "SELECT region, no, customer, plan, status, starts_at, ends_at, signed_on, "+
		"amount, balance, serial, erp_version, erp_updated_at, deleted_at IS NOT NULL, quarantined_at IS NOT NULL, quarantined_version FROM contracts",
		func(rows *sql.Rows) (row, error) {
			var r row
			var region, amount, balance string
			var no, serial int64
			var signed time.Time
			g := &r.rec
			if err := rows.Scan(&region, &no, &g.Member, &g.Product, &g.Status, &g.Starts, &g.Ends, &signed, &amount, &balance, &serial,
				&g.Version, &g.Updated, &r.deleted, &r.marked, &r.mark); err != nil {
				return r, err
			}
			g.ID = erpmock.ContractID(region, no)
			var flaws []string
			if rg, n, ok := erpmock.SplitContractID(g.ID); !ok || rg != region || n != no {
				flaws = append(flaws, fmt.Sprintf("key (%q, %d) is not the split of an erp_id", region, no))
			}
			if d := g.Starts.UTC().Format(time.DateOnly); signed.Format(time.DateOnly) != d {
				flaws = append(flaws, fmt.Sprintf("signed_on %s, the date of starts_at is %s", signed.Format(time.DateOnly), d))
			}
			for _, c := range []struct{ col, got, want string }{
				{"amount", amount, erpmock.ContractAmount(g.Version)},
				{"balance", balance, erpmock.ContractBalance(g.Version)},
				{"serial", strconv.FormatInt(serial, 10), strconv.FormatInt(erpmock.ContractSerial(g.Version), 10)},
			} {
				if c.got != c.want {
					flaws = append(flaws, fmt.Sprintf("%s %s, version %d has %s", c.col, c.got, g.Version, c.want))
				}
			}
			r.flaw = strings.Join(flaws, ", ")
			return r, nil
		})
}

// readOrders reads the contracts as readContracts does, and each row's
// lines: a row whose lines in contract_lines are not exactly
// erpmock.OrderLinesAt of its erp_id at the version it holds, in the
// revision its first line names (record.Lines, which compare checks), each
// line at that version, has a flaw naming the difference.
func readOrders(ctx context.Context, w *world) ([]row, error) {
	rows, err := readContracts(ctx, w)
	if err != nil {
		return nil, err
	}
	lines, lineMaterials := map[string][]string{}, map[string][]string{}
	rs, err := w.st.DB().WithContext(ctx).Raw("SELECT region, no, pos, material, qty, erp_version FROM contract_lines ORDER BY region, no, pos").Rows()
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	for rs.Next() {
		var region, material, qty string
		var no, v int64
		var pos int32
		if err := rs.Scan(&region, &no, &pos, &material, &qty, &v); err != nil {
			return nil, err
		}
		id := erpmock.ContractID(region, no)
		lines[id] = append(lines[id], orderLine(erpmock.OrderLine{Pos: pos, Material: material, Qty: qty}, v))
		lineMaterials[id] = append(lineMaterials[id], material)
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	for i := range rows {
		r := &rows[i]
		// The revision of the lines the row holds, which compare checks
		// against the ERP's: the one its first line's material names.
		if got := lineMaterials[r.rec.ID]; len(got) > 0 {
			r.rec.Lines = erpmock.LinesRev(got[0])
		}
		var want []string
		for _, l := range erpmock.OrderLinesAt(r.rec.ID, r.rec.Version, r.rec.Lines) {
			want = append(want, orderLine(l, r.rec.Version))
		}
		if got := lines[r.rec.ID]; !slices.Equal(got, want) {
			flaw := fmt.Sprintf("lines [%s], version %d has [%s]", strings.Join(got, "; "), r.rec.Version, strings.Join(want, "; "))
			if r.flaw != "" {
				flaw = r.flaw + ", " + flaw
			}
			r.flaw = flaw
		}
	}
	return rows, nil
}

// orderLine is a line of an order at version v as readOrders compares it.
func orderLine(l erpmock.OrderLine, v int64) string {
	return fmt.Sprintf("%d %s %s @%d", l.Pos, l.Material, l.Qty, v)
}

// newTypedPool is newPool with the tables of both.yaml's and orders.yaml's
// entities made as `erpsync migrate --config` makes them.
func newTypedPool(t testing.TB, n int) pool {
	p := newPool(t, n)
	var files []*entity.File
	for _, ty := range []*typedSpec{{Both: true}, {Docs: true}} {
		f, err := entity.Load(ty.config())
		if err != nil {
			t.Fatalf("load %s: %v", ty.config(), err)
		}
		files = append(files, f)
	}
	ws := make([]*world, 0, n)
	for range n {
		w := <-p
		for _, f := range files { // both.yaml's tables, then orders.yaml's contract_lines
			plan, err := w.st.PlanEntities(context.Background(), f.Entities)
			if err == nil {
				_, err = w.st.ApplyEntities(context.Background(), plan)
			}
			if err != nil {
				t.Fatalf("migrate %s: %v", f.Path, err)
			}
		}
		w.entities = []string{"contracts", "contract_lines"}
		ws = append(ws, w)
	}
	for _, w := range ws {
		p <- w
	}
	return p
}

// typedScenario is the feed of seed for the entities of ty: the memberships
// model's generator, every execution a process (some killed at a page),
// without what needs the syncer in this process (a reconcile that races a
// backfill through a hook on its record locks, and the SIGTERM scenario).
// Both entities take their locks from one Redis, whose commands the test
// reads. In one feed of three of the contracts alone (seeds 1, 4, 7, ...),
// the entity records change events, delivered to a webhook, RabbitMQ and
// NATS in turn, with the records that come back after a delete of
// TestEventsGuarantee (genLives).
func typedScenario(seed uint64, ty *typedSpec) *scenario {
	sc := typedFeed(seed, ty, opts{MaxRecords: 16, MaxWaves: 2, MaxExecs: 3})
	if !ty.Both && seed%3 == 1 {
		sc.Typed.Events = genEventsTo(seed, []string{sinkWebhook, sinkRabbitMQ, sinkNATS}[seed/3%3])
		genLives(seed, sc)
	}
	return sc
}

// typedFeed is the feed of seed for the entities of ty, its size bounded
// by o.
func typedFeed(seed uint64, ty *typedSpec, o opts) *scenario {
	t := *ty
	o.Procs, o.Typed = true, &t
	sc := generate(newSource(seed, nil), o)
	for _, w := range sc.Waves {
		for i := range w {
			w[i].Proc, w[i].Race = true, false
			if w[i].Mode == "reconcile" {
				w[i].KillAt = 0
			}
		}
	}
	if ty.Both || seed%2 == 1 {
		sc.Locks = lockRedis
	}
	if !ty.Both && seed%2 == 1 {
		t.LockLoss = true
	}
	return sc
}

// loseLocks deletes the feed's record locks from its Redis every
// millisecond or so until stop is closed, in a feed with LockLoss, while
// pauseWriters pauses its processes now and then.
func (f *feed) loseLocks(stop <-chan struct{}) {
	if f.sc.Typed == nil || !f.sc.Typed.LockLoss {
		return
	}
	ctx := context.Background()
	go f.pauseWriters(stop)
	go f.stallWriters(stop)
	for {
		var keys []string
		iter := f.w.rdb.Scan(ctx, 0, f.prefix+"{rec:*", 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			f.w.rdb.Unlink(ctx, keys...)
		}
		select {
		case <-stop:
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// TestTypedGuaranteeSweep runs the memberships model's feeds against the
// typed face: `erpsync run/backfill/reconcile --config contracts.yaml`
// processes, overlapping and killed, and after each settling the contracts
// table must equal the model, row by row and column by column.
func TestTypedGuaranteeSweep(t *testing.T) {
	sweepTyped(t, &typedSpec{})
}

// TestTwoEntitiesGuarantee runs the same feeds with both.yaml: contracts
// and memberships in one database, a process of each entity at once for
// every execution; both tables must equal the model, and their lock keys
// and checkpoints must stay apart.
func TestTwoEntitiesGuarantee(t *testing.T) {
	sweepTyped(t, &typedSpec{Both: true})
}

// TestDocumentsGuarantee runs the same feeds with orders.yaml: the
// contracts as documents, each with lines that come, go and change from
// one version to the next. After each settling the contracts table must
// equal the model, and each row's lines in contract_lines must be exactly
// those of the version the row holds: a stale copy of a document, written
// late by a paused process or replayed, never leaves its lines behind.
func TestDocumentsGuarantee(t *testing.T) {
	sweep(t, newTypedPool(t, parallelism()), *flagDocFeeds, func(seed uint64) *scenario {
		sc := typedFeed(seed, &typedSpec{Docs: true}, opts{MaxRecords: 16, MaxWaves: 2, MaxExecs: 3})
		genDocEvents(seed, sc)
		genDocsOData(seed, sc)
		return sc
	})
}

func sweepTyped(t *testing.T, ty *typedSpec) {
	sweep(t, newTypedPool(t, parallelism()), *flagTypedFeeds, func(seed uint64) *scenario { return typedScenario(seed, ty) })
}

// pauseWriters stops one of the feed's running processes with SIGSTOP
// for 1.5 s (past its 1 s lock TTL: others take its locks) and lets it go
// on with SIGCONT, every 200 ms, until stop is closed: a writer paused
// between reading a row and writing it, whose write lands late with an
// older fencing token.
func (f *feed) pauseWriters(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(200 * time.Millisecond):
		}
		f.mu.Lock()
		var p *proctest.Proc
		for q := range f.running {
			p = q
			break
		}
		f.mu.Unlock()
		if p == nil || p.Signal(syscall.SIGSTOP) != nil {
			continue
		}
		f.sink.paused(p)
		time.Sleep(1500 * time.Millisecond)
		_ = p.Signal(syscall.SIGCONT)
	}
}

// executeTyped runs one execution of a wave on each entity of the feed's
// config file, at once.
func (f *feed) executeTyped(x execSpec) {
	stop := make(chan struct{})
	defer close(stop)
	go f.loseLocks(stop)
	var wg sync.WaitGroup
	for _, tab := range f.tabs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.executeOn(x, tab)
		}()
	}
	wg.Wait()
}

// runProcess runs x as one bin/erpsync process on the entity of tab, as
// execution id, and returns its status.
func (f *feed) runProcess(id string, x execSpec, tab *table) (string, error) {
	rep, err := f.runReport(id, x, tab)
	if err != nil {
		return "", err
	}
	return rep.Status, nil
}

// runReport runs x as one bin/erpsync process on the entity of tab and
// reads its report.
func (f *feed) runReport(id string, x execSpec, tab *table) (*reconcile.Report, error) {
	report := filepath.Join(f.t.TempDir(), id+".json")
	res := f.wait(f.env(id).Start(append(processArgs(x, report), f.procFlags(tab)...)...))
	b, err := os.ReadFile(report)
	if err != nil {
		return nil, fmt.Errorf("process %s (%s) exit %d, no report: %v\n%s", id, x, res.Code, err, res.Stdout)
	}
	var rep reconcile.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("process %s (%s) report: %v", id, x, err)
	}
	if rep.Status != store.StatusSucceeded {
		return &rep, fmt.Errorf("process %s (%s) exit %d: %s %s\n%s", id, x, res.Code, rep.Status, rep.Refused, res.Out())
	}
	return &rep, nil
}

// reconcileProcess runs the reconcile x as a bin/erpsync process, as
// execution id. A refusal is reconcile.ErrRefused, as in this process.
func (f *feed) reconcileProcess(id string, x execSpec, tab *table) (*reconcile.Report, error) {
	rep, err := f.runReport(id, x, tab)
	if rep != nil && rep.Refused != "" {
		return rep, fmt.Errorf("%w: %s", reconcile.ErrRefused, rep.Refused)
	}
	return rep, err
}

// reconcileArgs are the flags of a reconcile process beyond a run's.
func reconcileArgs(x execSpec) []string {
	var args []string
	if x.MaxDelete != "" {
		args = append(args, "--max-delete", x.MaxDelete)
	}
	if x.MaxDeleteTotal != "" {
		args = append(args, "--max-delete-total", x.MaxDeleteTotal)
	}
	if x.Force {
		args = append(args, "--force")
	}
	return args
}

// lockMonitor reads, through MONITOR, every command the feed's processes
// send to Redis under its prefix, and the keys they name.
type lockMonitor struct {
	f    *feed
	conn net.Conn
	done chan struct{}
	mu   sync.Mutex
	keys map[string]bool
}

// monitorLocks starts a lockMonitor in a feed of both.yaml; nil in others.
// It speaks RESP on a connection of its own: MONITOR answers +OK, then a
// status line per command any client sends.
func (f *feed) monitorLocks() *lockMonitor {
	if f.sc.Typed == nil || !f.sc.Typed.Both {
		return nil
	}
	conn, err := net.DialTimeout("tcp", testenv.RedisAddr(), 3*time.Second)
	if err != nil {
		f.t.Fatalf("monitor: %v", err)
	}
	rd := bufio.NewReaderSize(conn, 1<<16)
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		f.t.Fatalf("monitor: %v", err)
	}
	if ok, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(ok, "+OK") {
		f.t.Fatalf("monitor: %q %v", ok, err)
	}
	m := &lockMonitor{f: f, conn: conn, done: make(chan struct{}), keys: map[string]bool{}}
	go func() {
		defer close(m.done)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return // closed by check
			}
			m.read(line)
		}
	}()
	return m
}

// read takes the feed's keys from one line of MONITOR: its quoted
// arguments, escaped as redis-server escapes them.
func (m *lockMonitor) read(line string) {
	pre := m.f.prefix
	if !strings.Contains(line, pre) {
		return
	}
	for _, arg := range monitorArgs(line) {
		if strings.HasPrefix(arg, pre) {
			m.mu.Lock()
			m.keys[strings.TrimPrefix(arg, pre)] = true
			m.mu.Unlock()
		}
	}
}

// monitorArgs splits a MONITOR line into its quoted arguments, unescaped
// (\", \\ and \xHH).
func monitorArgs(line string) []string {
	var out []string
	for i := 0; i < len(line); i++ {
		if line[i] != '"' {
			continue
		}
		var b strings.Builder
		for i++; i < len(line) && line[i] != '"'; i++ {
			if line[i] == '\\' && i+1 < len(line) {
				i++
				if line[i] == 'x' && i+2 < len(line) {
					if v, err := strconv.ParseUint(line[i+1:i+3], 16, 8); err == nil {
						b.WriteByte(byte(v))
						i += 2
						continue
					}
				}
			}
			b.WriteByte(line[i])
		}
		out = append(out, b.String())
	}
	return out
}

// check stops the monitor and checks the keys the feed's processes named
// and the checkpoints they left: the job locks of the two jobs, the record
// locks of memberships in the built-in namespace (rec:<erp_id>) and those
// of contracts in their own (rec:contracts:<key>), no key in both, and the
// checkpoints of each job under its own name.
func (m *lockMonitor) check() {
	time.Sleep(100 * time.Millisecond) // the last commands' lines
	m.conn.Close()
	<-m.done
	f := m.f
	var bad []string
	jobs := map[string]bool{}
	var recs [2]int
	for _, k := range sortedKeys(m.keys) {
		lk := strings.TrimSuffix(strings.TrimPrefix(k, "{"), "}")
		switch {
		case strings.HasPrefix(k, "server:fence"), k == "*": // the fencing counter; the test's own SCAN
		case !strings.HasPrefix(k, "{"):
			bad = append(bad, fmt.Sprintf("%q", k))
		case strings.HasPrefix(lk, "job:"):
			jobs[strings.TrimPrefix(strings.TrimPrefix(lk, "job:"), "reconcile:")] = true // a job's run and reconcile locks
		case strings.HasPrefix(lk, "rec:contracts:"):
			if parts := entity.SplitKey(strings.TrimPrefix(lk, "rec:contracts:"), 2); len(parts) != 2 {
				bad = append(bad, fmt.Sprintf("%q (a contracts lock whose key is not (region, no))", lk))
			}
			recs[0]++
		case strings.HasPrefix(lk, "rec:"):
			if strings.Contains(lk, entity.KeySeparator) || strings.Contains(lk, ":contracts") {
				bad = append(bad, fmt.Sprintf("%q (a contracts key in the memberships namespace)", lk))
			}
			recs[1]++
		default:
			bad = append(bad, fmt.Sprintf("%q", lk))
		}
	}
	for j := range jobs {
		if j != membershipJob && j != "contracts" {
			bad = append(bad, fmt.Sprintf("job lock %q", j))
		}
	}
	if len(bad) > 0 {
		f.t.Errorf("lock keys outside the two entities' namespaces: %s", strings.Join(bad[:min(len(bad), 8)], "; "))
	}
	if !jobs[membershipJob] || !jobs["contracts"] || recs[0] == 0 || recs[1] == 0 {
		f.t.Errorf("MONITOR saw job locks %v, %d contracts and %d memberships record locks: want both jobs' and record locks of each", sortedKeys(jobs), recs[0], recs[1])
	}
	rows, err := f.w.st.DB().Raw("SELECT name FROM sync_checkpoints").Rows()
	if err != nil {
		f.t.Errorf("read checkpoints: %v", err)
		return
	}
	defer rows.Close()
	names := map[string]bool{}
	for rows.Next() {
		var n string
		if rows.Scan(&n) == nil {
			names[n] = true
		}
	}
	for n := range names {
		job := strings.TrimPrefix(n, "backfill:")
		if job != n {
			job = job[:max(0, strings.LastIndex(job, ":"))]
		}
		if job != membershipJob && job != "contracts" {
			f.t.Errorf("checkpoint %q is neither job's (have %v)", n, sortedKeys(names))
		}
	}
	if !names[membershipJob] || !names["contracts"] {
		f.t.Errorf("checkpoints %v: want one of %s and one of contracts", sortedKeys(names), membershipJob)
	}
}

// TestTypedFaceKeepsEveryFlaw decodes erpmock's typed face with the
// decoder erpsync compiles from contracts.yaml: every valid membership is
// a valid contract with its key and fields, every invalid one invalid.
func TestTypedFaceKeepsEveryFlaw(t *testing.T) {
	env := proctest.New(t, erpsyncBin(t), erpmock.Options{Records: 300, Seed: 5, Faults: erpmock.Faults{InvalidRate: 0.2}})
	cfg := (&typedSpec{Both: true}).config()
	if r := env.Run(context.Background(), "migrate", "--config", cfg); r.Code != 0 {
		t.Fatalf("migrate exit %d: %s", r.Code, r.Out())
	}
	for _, ent := range []string{"contracts", "memberships"} {
		if r := env.Run(context.Background(), "run", "--config", cfg, "--entity", ent, "--max-invalid", "100%"); r.Code != 0 {
			t.Fatalf("run %s exit %d: %s", ent, r.Code, r.Out())
		}
	}
	count := func(q string) int64 {
		var n int64
		if err := env.DB.QueryRow(q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	m, c := env.Table("memberships"), env.Table("contracts")
	truth := int64(len(env.Mock.Truth()))
	if n := count("SELECT COUNT(*) FROM " + c); n != truth {
		t.Errorf("%d contracts, the mock has %d valid records", n, truth)
	}
	if n := count("SELECT COUNT(*) FROM " + m + " JOIN " + c + " ON CONCAT(region, no) = erp_id AND customer = member_id AND plan = product_code AND " + c + ".status = " + m + ".status AND " +
		c + ".starts_at = " + m + ".starts_at AND (" + c + ".ends_at = " + m + ".ends_at OR " + c + ".ends_at IS NULL AND " + m + ".ends_at IS NULL) AND " + c + ".erp_version = " + m + ".erp_version"); n != truth {
		t.Errorf("%d contracts equal their membership, want %d", n, truth)
	}
	q := env.Table("quarantined_records")
	per := count("SELECT COUNT(*) FROM " + q + " WHERE job = 'contracts'")
	if all := int64(len(env.Mock.InvalidIDs())); per != all || count("SELECT COUNT(*) FROM "+q+" WHERE job = '"+env.Job+"'") != all {
		t.Errorf("quarantined: %d contracts, want %d, as many as memberships", per, all)
	}
}
