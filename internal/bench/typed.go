package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
)

// TypedEntity is the entity of the typed backfill: 12 columns of every
// kind a typed record exercises, read from a REST resource of the erpsync
// API that the bench serves from its own process (TypedFeed).
const TypedEntity = "bench_orders"

// typedConfig declares TypedEntity, as a user's config file would: a
// composite key of two columns (a string and an int64 past 2^53), a value
// map, two decimals (one served as a JSON number, one as a string), a date,
// a nullable date-time, an int64, a bool and strings.
const typedConfig = `# The entity of the typed backfill of erpsync-bench.
erp:
  kind: rest
entities:
  - name: ` + TypedEntity + `
    source: ` + TypedEntity + `
    key: [company, order_no]
    updated_at: changed_at
    version: version
    columns:
      - {name: company,    type: string(4)}
      - {name: order_no,   type: int64}
      - {name: customer,   type: string(10)}
      - name: status
        type: string(9)
        values: {O: OPEN, S: SHIPPED, C: CLOSED, X: CANCELLED}
      - {name: amount,     type: "decimal(15,2)"}
      - {name: quantity,   type: "decimal(13,3)"}
      - {name: ordered_on, type: date}
      - {name: shipped_at, type: datetime, nullable: true}
      - {name: weight_mg,  type: int64}
      - {name: paid,       type: bool}
      - {name: note,       type: string(80)}
      - {name: currency,   type: string(3)}
`

// TypedColumns is the number of columns of TypedEntity.
const TypedColumns = 12

// parseEntity returns the entity name as config, a config file, declares
// it.
func parseEntity(name, config string) (*entity.Entity, error) {
	f, err := entity.Parse(name+".yaml", []byte(config))
	if err != nil {
		return nil, fmt.Errorf("entity %s: %w", name, err)
	}
	return f.Entities[0], nil
}

// TypedSchema returns the typed decoder of TypedEntity as erpsync's REST
// source compiles it.
func TypedSchema() (*erp.Schema, error) { return schemaOf(TypedEntity, typedConfig) }

// schemaOf returns the typed decoder of the entity name as config, a
// config file, declares it, as erpsync's REST source compiles it.
func schemaOf(name, config string) (*erp.Schema, error) {
	e, err := parseEntity(name, config)
	if err != nil {
		return nil, err
	}
	s, err := erp.Compile(e, e.Sources[0])
	if err != nil {
		return nil, err
	}
	return s.IntegerVersion(), nil
}

// TypedShape returns the REST shape erpsync reads TypedFeed in: the
// erpsync API's, at TypedEntity's resource.
func TypedShape() *erp.Shape { return restShape(TypedEntity) }

// restShape is the erpsync API's REST shape at resource's path.
func restShape(resource string) *erp.Shape {
	s := erp.DefaultShape()
	s.Path = "/api/v1/" + resource
	s.CountPath = s.Path + "/count"
	return &s
}

// TypedFeed serves n generated records of TypedEntity in the erpsync REST
// API's shape: GET /api/v1/bench_orders pages them by updated_since,
// updated_until, cursor and limit into {"data": [...], "next_cursor": ...},
// and /api/v1/bench_orders/count counts them. Record i is a function of i
// alone; the records are in the order of their changed_at, three to a
// millisecond. The pages are written by hand, as erpmock writes its own,
// so that the server costs little of the machine the bench measures.
type TypedFeed struct {
	n    int
	item func(b []byte, i int) []byte // appends record i
	mux  *http.ServeMux
	buf  sync.Pool
}

// typedBase is the changed_at of record 0.
var typedBase = time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)

// NewTypedFeed returns a feed of n records.
func NewTypedFeed(n int) *TypedFeed {
	return newFeed(TypedEntity, n, func(b []byte, i int) []byte { r := typedAt(i); return r.appendItem(b) })
}

// newFeed returns a feed of n records at /api/v1/<resource>, record i
// written by item, its changed_at typedBase plus i/3 milliseconds.
func newFeed(resource string, n int, item func(b []byte, i int) []byte) *TypedFeed {
	f := &TypedFeed{n: n, item: item, buf: sync.Pool{New: func() any { b := make([]byte, 0, 256<<10); return &b }}}
	f.mux = http.NewServeMux()
	f.mux.HandleFunc("GET /api/v1/"+resource, f.servePage)
	f.mux.HandleFunc("GET /api/v1/"+resource+"/count", f.serveCount)
	return f
}

// ServeHTTP serves the feed.
func (f *TypedFeed) ServeHTTP(w http.ResponseWriter, r *http.Request) { f.mux.ServeHTTP(w, r) }

// Len returns the number of records.
func (f *TypedFeed) Len() int { return f.n }

// typedRec is the generated content of one record.
type typedRec struct {
	company   int   // 1000-1003
	orderNo   int64 // past 2^53
	customer  int
	status    int // index in typedStatuses
	cents     int64
	milli     int64 // quantity in thousandths
	ordered   time.Time
	shipped   time.Time // zero: null
	weight    int64
	paid      bool
	note      int // index in typedNotes
	currency  int
	version   int64
	changedAt time.Time
}

var (
	typedStatuses = [4][2]string{{"O", "OPEN"}, {"S", "SHIPPED"}, {"C", "CLOSED"}, {"X", "CANCELLED"}}
	// A note with a quote and one that is not ASCII: the literal's two
	// ways of writing a string.
	typedNotes      = [4]string{"deliver to the back door", "call before delivery", "Lieferung an Frau Müller", "customer's own carrier"}
	typedCurrencies = [2]string{"EUR", "USD"}
)

// typedAt returns the content of record i.
func typedAt(i int) typedRec {
	n := int64(i)
	r := typedRec{
		company: 1000 + i%4, orderNo: 9_007_199_254_740_993 + n, customer: i % 1_000_000, status: i % 4,
		cents: (n * 7919) % 1_000_000_000, milli: (n * 104_729) % 100_000_000,
		ordered: time.Date(2024, time.Month(1+i%12), 1+i%28, 0, 0, 0, 0, time.UTC),
		weight:  n*1_000_003 + 1<<40, paid: i%3 == 0, note: i % 4, currency: i % 2, version: 1 + n%7,
		changedAt: typedBase.Add(time.Duration(i/3) * time.Millisecond),
	}
	if i%5 != 0 {
		r.shipped = typedBase.Add(-time.Duration(n%100_000)*time.Minute - time.Duration(i%1000)*time.Millisecond)
	}
	return r
}

// appendItem appends record r as a JSON object of the feed.
func (r *typedRec) appendItem(b []byte) []byte {
	b = append(b, `{"company":"`...)
	b = strconv.AppendInt(b, int64(r.company), 10)
	b = append(b, `","order_no":`...)
	b = strconv.AppendInt(b, r.orderNo, 10)
	b = append(b, `,"customer":"C`...)
	b = appendPadded(b, int64(r.customer), 7)
	b = append(b, `","status":"`...)
	b = append(b, typedStatuses[r.status][0]...)
	b = append(b, `","amount":`...)
	b = appendFixed(b, r.cents, 2)
	b = append(b, `,"quantity":"`...)
	b = appendFixed(b, r.milli, 3)
	b = append(b, `","ordered_on":"`...)
	b = r.ordered.AppendFormat(b, time.DateOnly)
	b = append(b, `","shipped_at":`...)
	if r.shipped.IsZero() {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = r.shipped.AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
		b = append(b, '"')
	}
	b = append(b, `,"weight_mg":`...)
	b = strconv.AppendInt(b, r.weight, 10)
	b = append(b, `,"paid":`...)
	b = strconv.AppendBool(b, r.paid)
	b = append(b, `,"note":"`...)
	b = append(b, typedNotes[r.note]...) // no character of them needs escaping
	b = append(b, `","currency":"`...)
	b = append(b, typedCurrencies[r.currency]...)
	b = append(b, `","version":`...)
	b = strconv.AppendInt(b, r.version, 10)
	b = append(b, `,"changed_at":"`...)
	b = r.changedAt.AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	return append(b, `"}`...)
}

// row returns r as the row erpsync writes of it under fencing token 1,
// its values written into vals (TypedColumns long).
func (r *typedRec) row(vals []entity.Value) store.Row {
	company := strconv.Itoa(r.company)
	orderNo := strconv.FormatInt(r.orderNo, 10)
	vals[0] = entity.Value{S: company}
	vals[1] = entity.Value{I: r.orderNo}
	vals[2] = entity.Value{S: string(appendPadded([]byte("C"), int64(r.customer), 7))}
	vals[3] = entity.Value{S: typedStatuses[r.status][1]}
	vals[4] = entity.Value{S: string(appendFixed(nil, r.cents, 2))}
	vals[5] = entity.Value{S: string(appendFixed(nil, r.milli, 3))}
	vals[6] = entity.Value{S: r.ordered.Format(time.DateOnly)}
	vals[7] = entity.Value{Null: r.shipped.IsZero(), T: r.shipped}
	vals[8] = entity.Value{I: r.weight}
	vals[9] = entity.Value{}
	if r.paid {
		vals[9].I = 1
	}
	vals[10] = entity.Value{S: typedNotes[r.note]}
	vals[11] = entity.Value{S: typedCurrencies[r.currency]}
	return store.Row{Key: entity.KeyText([]string{company, orderNo}), Vals: vals, Version: r.version, UpdatedAt: r.changedAt, Fence: 1}
}

// Rows returns the rows of records [from, to) as erpsync writes them under
// fencing token 1, their values from one slab.
func (f *TypedFeed) Rows(from, to int) []store.Row {
	rows := make([]store.Row, to-from)
	vals := make([]entity.Value, len(rows)*TypedColumns)
	for i := range rows {
		r := typedAt(from + i)
		rows[i] = r.row(vals[i*TypedColumns : (i+1)*TypedColumns : (i+1)*TypedColumns])
	}
	return rows
}

// appendFixed appends v/10^scale with scale fraction digits.
func appendFixed(b []byte, v int64, scale int) []byte {
	p := int64(1)
	for range scale {
		p *= 10
	}
	b = strconv.AppendInt(b, v/p, 10)
	b = append(b, '.')
	return appendPadded(b, v%p, scale)
}

// appendPadded appends v, which is not negative, in at least n digits.
func appendPadded(b []byte, v int64, n int) []byte {
	var d [20]byte
	s := strconv.AppendInt(d[:0], v, 10)
	for range n - len(s) {
		b = append(b, '0')
	}
	return append(b, s...)
}

// lowerBound returns the first record whose changed_at is at or after t.
func (f *TypedFeed) lowerBound(t time.Time) int {
	return sort.Search(f.n, func(i int) bool { return !typedBase.Add(time.Duration(i/3) * time.Millisecond).Before(t) })
}

// window reads the updated_since and updated_until of a request: the
// records [lo, hi).
func (f *TypedFeed) window(r *http.Request) (lo, hi int, err error) {
	lo, hi = 0, f.n
	q := r.URL.Query()
	if v := q.Get("updated_since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return 0, 0, fmt.Errorf("updated_since: %w", err)
		}
		lo = f.lowerBound(t)
	}
	if v := q.Get("updated_until"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return 0, 0, fmt.Errorf("updated_until: %w", err)
		}
		hi = f.lowerBound(t)
	}
	return lo, max(lo, hi), nil
}

func (f *TypedFeed) servePage(w http.ResponseWriter, r *http.Request) {
	lo, hi, err := f.window(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	q := r.URL.Query()
	limit := 500
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 1000 {
			http.Error(w, "limit: want 1 to 1000", http.StatusBadRequest)
			return
		}
	}
	// The cursor is the position of the next record: the window's bounds
	// are the same on every page of a read.
	if v := q.Get("cursor"); v != "" {
		at, err := strconv.Atoi(v)
		if err != nil || at < 0 {
			http.Error(w, "cursor: not one of this feed's", http.StatusBadRequest)
			return
		}
		lo = max(lo, at)
	}
	end := min(hi, lo+limit)
	bp := f.buf.Get().(*[]byte)
	b := append((*bp)[:0], `{"data":[`...)
	for i := lo; i < end; i++ {
		if i > lo {
			b = append(b, ',')
		}
		b = f.item(b, i)
	}
	b = append(b, `],"next_cursor":`...)
	if end < hi {
		b = append(b, '"')
		b = strconv.AppendInt(b, int64(end), 10)
		b = append(b, '"')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
	*bp = b
	f.buf.Put(bp)
}

func (f *TypedFeed) serveCount(w http.ResponseWriter, r *http.Request) {
	lo, hi, err := f.window(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, "{\"count\":%d}\n", hi-lo)
}

// typed is what the typed measurements need: the feed and its server, the
// entity's table and a store that writes it, and the config file a child
// erpsync reads the entity from.
type typed struct {
	feed   *TypedFeed
	srv    *http.Server
	url    string
	table  *store.Table
	st     *store.Store
	config string // the config file's path
	dir    string
}

// startTyped serves a typed feed of n records, writes the entity's config
// file and brings its table to the entity (as erpsync migrate --config
// does).
func (b *bench) startTyped(ctx context.Context, n int) (*typed, error) {
	return b.startEntity(ctx, TypedEntity, typedConfig, NewTypedFeed(n))
}

// startEntity serves feed, writes config, a config file that declares
// the entity name, and brings the entity's tables to it (as erpsync
// migrate --config does).
func (b *bench) startEntity(ctx context.Context, name, config string, feed *TypedFeed) (t *typed, err error) {
	e, err := parseEntity(name, config)
	if err != nil {
		return nil, err
	}
	tbl, err := store.Compile(e)
	if err != nil {
		return nil, err
	}
	p, err := b.st.PlanEntities(ctx, []*entity.Entity{e})
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", name, err)
	}
	if _, err := b.st.ApplyEntities(ctx, p); err != nil {
		return nil, fmt.Errorf("migrate %s: %w", name, err)
	}
	t = &typed{feed: feed, table: tbl, st: b.st.For(tbl)}
	if t.dir, err = os.MkdirTemp("", "erpsync-bench-"+name+"-"); err != nil {
		return nil, err
	}
	t.config = filepath.Join(t.dir, name+".yaml")
	if err := os.WriteFile(t.config, []byte(config), 0o644); err != nil {
		os.RemoveAll(t.dir)
		return nil, err
	}
	if t.srv, t.url, err = serve(t.feed); err != nil {
		os.RemoveAll(t.dir)
		return nil, err
	}
	return t, nil
}

func (t *typed) close() {
	t.srv.Close()
	os.RemoveAll(t.dir)
}

// target is the typed backfill's: the feed, the config file and entity
// that name it, the entity's table, owned by the entity's job.
func (t *typed) target() target {
	name := t.table.Entity().Name
	return target{url: t.url, args: []string{"--config", t.config, "--entity", name}, table: t.table.Name(), owner: name}
}

// typedRaw writes the feed's rows into an empty table with multi-row INSERT
// IGNORE statements of 1,000 rows on 4 connections, without locks, their
// values written in (st.For(table).InsertIgnoreRows): as fast as the
// database takes these rows from erpsync's own writer. The rows are made
// before the clock starts.
func (b *bench) typedRaw(ctx context.Context, t *typed) (*Result, error) {
	const batch, conns = 1000, 4
	if err := b.empty(ctx, t.target()); err != nil {
		return nil, err
	}
	rows := t.feed.Rows(0, t.feed.Len())
	b.logf(b.label+"typed raw insert: %d rows, INSERT IGNORE of %d rows, %d connections, literal values", len(rows), batch, conns)
	r, err := b.parallel(ctx, len(rows), batch, conns, func() func(from, to int) error {
		return func(from, to int) error {
			if err := t.st.InsertIgnoreRows(ctx, rows[from:to]); err != nil {
				return fmt.Errorf("typed raw insert: %w", err)
			}
			return nil
		}
	})
	if err != nil {
		return nil, err
	}
	r.Name = fmt.Sprintf("raw insert, typed (%d columns): INSERT IGNORE, 1,000 rows a statement, 4 connections, no locks, literal values", TypedColumns)
	return r, nil
}
