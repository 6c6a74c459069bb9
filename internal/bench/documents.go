package bench

import (
	"context"
	"database/sql"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
)

// Documents is the measurement of the backfill of documents: headers of
// DocumentsEntity with 5 to 20 lines each, against the raw insert of the
// same header and line rows, in the same rounds as Backfill.
const Documents = "documents"

// DocumentsEntity is the entity of the documents backfill: invoices whose
// lines are a child of DocumentsLineColumns typed columns, read from a
// REST resource that the bench serves from its own process.
const DocumentsEntity = "bench_invoices"

// DocumentsLineTable is the child table of DocumentsEntity.
const DocumentsLineTable = "bench_invoice_lines"

// documentsConfig declares DocumentsEntity, as a user's config file
// would: a composite key of a string and an int64 past 2^53, a few
// header columns, and lines keyed by their line number with a
// decimal(13,3) served as a string, a decimal(11,2) served as a JSON
// number, a string and a bool.
const documentsConfig = `# The entity of the documents backfill of erpsync-bench.
erp:
  kind: rest
entities:
  - name: ` + DocumentsEntity + `
    source: ` + DocumentsEntity + `
    key: [company, invoice_no]
    updated_at: changed_at
    version: version
    columns:
      - {name: company,     type: string(4)}
      - {name: invoice_no,  type: int64}
      - {name: customer,    type: string(10)}
      - {name: invoiced_on, type: date}
      - {name: currency,    type: string(3)}
    children:
      - name: lines
        table: ` + DocumentsLineTable + `
        from: lines
        key: [line_no]
        columns:
          - {name: line_no,    from: pos,   type: int32}
          - {name: material,   type: string(12)}
          - {name: quantity,   from: qty,   type: "decimal(13,3)"}
          - {name: unit_price, from: price, type: "decimal(11,2)"}
          - {name: taxable,    type: bool}
`

// DocumentsLineColumns is the number of columns of a line of
// DocumentsEntity.
const DocumentsLineColumns = 5

// documentsHeaderColumns is the number of columns of DocumentsEntity.
const documentsHeaderColumns = 5

// GoalDocumentsRatio is the goal of the documents backfill: its lines a
// second over the raw insert's.
const GoalDocumentsRatio = 0.5

// DocumentsSchema returns the typed decoder of DocumentsEntity as
// erpsync's REST source compiles it.
func DocumentsSchema() (*erp.Schema, error) { return schemaOf(DocumentsEntity, documentsConfig) }

// DocumentsShape returns the REST shape erpsync reads a documents feed in.
func DocumentsShape() *erp.Shape { return restShape(DocumentsEntity) }

// DocumentsFeed serves n generated documents of DocumentsEntity in the
// erpsync REST API's shape, as TypedFeed serves its records: document i
// and its lines are a function of i alone.
type DocumentsFeed struct {
	*TypedFeed
}

// NewDocumentsFeed returns a feed of n documents.
func NewDocumentsFeed(n int) *DocumentsFeed {
	return &DocumentsFeed{newFeed(DocumentsEntity, n, func(b []byte, i int) []byte { d := docAt(i); return d.appendItem(b) })}
}

// Lines returns the number of lines of documents [0, n).
func (f *DocumentsFeed) Lines() int {
	n := 0
	for i := range f.n {
		n += docLines(i)
	}
	return n
}

// docRec is the generated content of one document, its lines made by
// line.
type docRec struct {
	i         int
	company   int   // 1000-1003
	invoiceNo int64 // past 2^53
	customer  int
	invoiced  time.Time
	currency  int
	lines     int
	version   int64
	changedAt time.Time
}

// docLine is the generated content of one line.
type docLine struct {
	no       int
	material int // index in docMaterials
	milli    int64
	cents    int64
	taxable  bool
}

// docMaterials have a quote and a letter that is not ASCII: the
// literal's two ways of writing a string.
var docMaterials = [4]string{"BOLT-M8", "O'RING-12", "SCHRAUBE-Ä4", "WASHER-10"}

// docLines returns the number of lines of document i: 5 to 20, 12.5 on
// average.
func docLines(i int) int { return 5 + (7*i)%16 }

func docAt(i int) docRec {
	n := int64(i)
	return docRec{
		i: i, company: 1000 + i%4, invoiceNo: 9_007_199_254_740_993 + n, customer: (i * 13) % 1_000_000,
		invoiced: time.Date(2024, time.Month(1+i%12), 1+i%28, 0, 0, 0, 0, time.UTC),
		currency: i % 2, lines: docLines(i), version: 1 + n%7,
		changedAt: typedBase.Add(time.Duration(i/3) * time.Millisecond),
	}
}

// line returns line j of d.
func (d *docRec) line(j int) docLine {
	n, m := int64(d.i), int64(j)
	return docLine{no: 10 * (j + 1), material: (d.i + j) % 4, milli: (n*104_729 + m*7_919) % 10_000_000_000,
		cents: (n*31 + m*97) % 100_000_000, taxable: (d.i+j)%3 != 0}
}

// appendItem appends d as a JSON object of the feed, its lines an array.
func (d *docRec) appendItem(b []byte) []byte {
	b = append(b, `{"company":"`...)
	b = strconv.AppendInt(b, int64(d.company), 10)
	b = append(b, `","invoice_no":`...)
	b = strconv.AppendInt(b, d.invoiceNo, 10)
	b = append(b, `,"customer":"C`...)
	b = appendPadded(b, int64(d.customer), 7)
	b = append(b, `","invoiced_on":"`...)
	b = d.invoiced.AppendFormat(b, time.DateOnly)
	b = append(b, `","currency":"`...)
	b = append(b, typedCurrencies[d.currency]...)
	b = append(b, `","version":`...)
	b = strconv.AppendInt(b, d.version, 10)
	b = append(b, `,"changed_at":"`...)
	b = d.changedAt.AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	b = append(b, `","lines":[`...)
	for j := range d.lines {
		if j > 0 {
			b = append(b, ',')
		}
		l := d.line(j)
		b = append(b, `{"pos":`...)
		b = strconv.AppendInt(b, int64(l.no), 10)
		b = append(b, `,"material":"`...)
		b = append(b, docMaterials[l.material]...) // no character of them needs escaping
		b = append(b, `","qty":"`...)
		b = appendFixed(b, l.milli, 3)
		b = append(b, `","price":`...)
		b = appendFixed(b, l.cents, 2)
		b = append(b, `,"taxable":`...)
		b = strconv.AppendBool(b, l.taxable)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// Rows returns the documents [from, to) as the rows erpsync writes them
// under fencing token 1, with their lines.
func (f *DocumentsFeed) Rows(from, to int) []store.Row {
	rows := make([]store.Row, to-from)
	for i := range rows {
		d := docAt(from + i)
		company, invoiceNo := strconv.Itoa(d.company), strconv.FormatInt(d.invoiceNo, 10)
		lines := make(entity.Lines, d.lines)
		for j := range lines {
			l := d.line(j)
			var taxable int64
			if l.taxable {
				taxable = 1
			}
			lines[j] = []entity.Value{{I: int64(l.no)}, {S: docMaterials[l.material]}, {S: string(appendFixed(nil, l.milli, 3))},
				{S: string(appendFixed(nil, l.cents, 2))}, {I: taxable}}
		}
		rows[i] = store.Row{
			Key: entity.KeyText([]string{company, invoiceNo}),
			Vals: []entity.Value{{S: company}, {I: d.invoiceNo}, {S: string(appendPadded([]byte("C"), int64(d.customer), 7))},
				{S: d.invoiced.Format(time.DateOnly)}, {S: typedCurrencies[d.currency]}},
			Version: d.version, UpdatedAt: d.changedAt, Fence: 1, Children: []entity.Lines{lines},
		}
	}
	return rows
}

// The checksums of the tables: CRC32 of each row's columns joined by '|'
// as MySQL writes them as text, summed. The Go side writes the same text
// from the generated documents (appendHeader, appendLine).
const (
	docHeaderSum = "SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS('|', company, invoice_no, customer, invoiced_on, currency, erp_version, erp_updated_at))), 0) FROM `" +
		DocumentsEntity + "` WHERE deleted_at IS NULL"
	docLineSum = "SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS('|', company, invoice_no, line_no, material, quantity, unit_price, taxable, erp_version))), 0) FROM `" +
		DocumentsLineTable + "`"
)

// PostgreSQL has no CRC32: its checksums sum the first 32 bits of the MD5
// (md5Sum32) of the same text, a time as MySQL writes it, a bool as 1 or 0.
var (
	pgDocHeaderSum = "SELECT COUNT(*), COALESCE(SUM(" + pgSum32("concat_ws('|', company, invoice_no, customer, invoiced_on, currency, erp_version, "+pgTime("erp_updated_at")+")") +
		"), 0) FROM \"" + DocumentsEntity + "\" WHERE deleted_at IS NULL"
	pgDocLineSum = "SELECT COUNT(*), COALESCE(SUM(" + pgSum32("concat_ws('|', company, invoice_no, line_no, material, quantity, unit_price, taxable::int, erp_version)") +
		"), 0) FROM \"" + DocumentsLineTable + "\""
)

// appendHeader appends d's header columns and erp_version and
// erp_updated_at, each after sep but the first, strings and times
// between quotes q: as docHeaderSum reads them (sep "|", q "") or as
// SQL literals (sep ",", q "'").
func (d *docRec) appendHeader(b []byte, sep, q string) []byte {
	b = append(b, q...)
	b = strconv.AppendInt(b, int64(d.company), 10)
	b = append(append(b, q...), sep...)
	b = strconv.AppendInt(b, d.invoiceNo, 10)
	b = append(append(append(b, sep...), q...), 'C')
	b = appendPadded(b, int64(d.customer), 7)
	b = append(append(append(b, q...), sep...), q...)
	b = d.invoiced.AppendFormat(b, time.DateOnly)
	b = append(append(append(b, q...), sep...), q...)
	b = append(b, typedCurrencies[d.currency]...)
	b = append(append(b, q...), sep...)
	b = strconv.AppendInt(b, d.version, 10)
	b = append(append(b, sep...), q...)
	b = d.changedAt.AppendFormat(b, "2006-01-02 15:04:05.000")
	return append(b, q...)
}

// appendLine appends line l of d with its parent's key and erp_version
// as appendHeader does d's columns; a bool is bools[1] or bools[0].
func (d *docRec) appendLine(b []byte, l docLine, sep, q string, bools *[2]string) []byte {
	b = append(b, q...)
	b = strconv.AppendInt(b, int64(d.company), 10)
	b = append(append(b, q...), sep...)
	b = strconv.AppendInt(b, d.invoiceNo, 10)
	b = append(b, sep...)
	b = strconv.AppendInt(b, int64(l.no), 10)
	b = append(append(b, sep...), q...)
	if q == "" {
		b = append(b, docMaterials[l.material]...)
	} else {
		b = append(b, strings.ReplaceAll(docMaterials[l.material], q, q+q)...)
	}
	b = append(append(b, q...), sep...)
	b = appendFixed(b, l.milli, 3)
	b = append(b, sep...)
	b = appendFixed(b, l.cents, 2)
	b = append(b, sep...)
	if l.taxable {
		b = append(b, bools[1]...)
	} else {
		b = append(b, bools[0]...)
	}
	b = append(b, sep...)
	return strconv.AppendInt(b, d.version, 10)
}

// docSums are the row counts and checksums of the two tables.
type docSums struct {
	headers, headerSum, lines, lineSum int64
}

// The texts of a bool: MySQL's and the checksums', and PostgreSQL's
// literals.
var (
	bools01 = [2]string{"0", "1"}
	boolsPG = [2]string{"false", "true"}
)

// sums returns what the tables hold after documents [0, n) are written,
// each row's text hashed by hash (crc32Sum or md5Sum32).
func (f *DocumentsFeed) sums(hash func([]byte) int64) docSums {
	var s docSums
	var b []byte
	for i := range f.n {
		d := docAt(i)
		b = d.appendHeader(b[:0], "|", "")
		s.headers++
		s.headerSum += hash(b)
		for j := range d.lines {
			b = d.appendLine(b[:0], d.line(j), "|", "", &bools01)
			s.lines++
			s.lineSum += hash(b)
		}
	}
	return s
}

func crc32Sum(b []byte) int64 { return int64(crc32.ChecksumIEEE(b)) }

// readDocSums reads the counts and checksums of the tables of db, a
// database of dialect d.
func readDocSums(ctx context.Context, db *sql.DB, d store.Dialect) (docSums, error) {
	var s docSums
	head, line := docHeaderSum, docLineSum
	if d == store.Postgres {
		head, line = pgDocHeaderSum, pgDocLineSum
	}
	if err := db.QueryRowContext(ctx, head).Scan(&s.headers, &s.headerSum); err != nil {
		return s, fmt.Errorf("check %s: %w", DocumentsEntity, err)
	}
	if err := db.QueryRowContext(ctx, line).Scan(&s.lines, &s.lineSum); err != nil {
		return s, fmt.Errorf("check %s: %w", DocumentsLineTable, err)
	}
	return s, nil
}

// documents is what the documents measurements need: the entity's feed,
// tables and config file (as typed), and what the tables must hold after
// a round.
type documents struct {
	*typed
	feed *DocumentsFeed
	want docSums
}

// startDocuments serves a documents feed of n documents, writes the
// entity's config file and brings its tables to the entity.
func (b *bench) startDocuments(ctx context.Context, n int) (*documents, error) {
	feed := NewDocumentsFeed(n)
	t, err := b.startEntity(ctx, DocumentsEntity, documentsConfig, feed.TypedFeed)
	if err != nil {
		return nil, err
	}
	hash := crc32Sum
	if b.d == store.Postgres {
		hash = md5Sum32
	}
	return &documents{typed: t, feed: feed, want: feed.sums(hash)}, nil
}

// emptyDocuments empties the entity's tables and forgets the
// checkpoints (bench.empty).
func (b *bench) emptyDocuments(ctx context.Context, d *documents) error {
	if _, err := b.db.ExecContext(ctx, "TRUNCATE TABLE "+b.ident(DocumentsLineTable)); err != nil {
		return fmt.Errorf("empty %s: %w", DocumentsLineTable, err)
	}
	return b.empty(ctx, d.target())
}

// check fails unless the tables hold exactly the feed's documents and
// lines, by count and checksum: no speed of a wrong table is reported.
func (b *bench) checkDocuments(ctx context.Context, d *documents, what string) error {
	got, err := readDocSums(ctx, b.db, b.d)
	if err != nil {
		return err
	}
	if got != d.want {
		return fmt.Errorf("%s: the tables hold %d headers (checksum %d) and %d lines (checksum %d); want %d (%d) and %d (%d)",
			what, got.headers, got.headerSum, got.lines, got.lineSum, d.want.headers, d.want.headerSum, d.want.lines, d.want.lineSum)
	}
	return nil
}

// DocumentsResult is the documents backfill against the raw insert of
// the same rows: both in lines a second (Result.Records are lines).
type DocumentsResult struct {
	Documents int64   `json:"documents"`
	Lines     int64   `json:"lines"`
	Backfill  *Result `json:"backfill"`
	Raw       *Result `json:"raw_insert"`
	// Ratios are the backfill's lines/s over the raw insert's, round by
	// round.
	Ratios []float64 `json:"ratios"`
	// Database names the database when it is not MySQL ("postgresql").
	Database string `json:"database,omitempty"`
}

// Ratio is the best backfill's lines a second over the best raw
// insert's.
func (d *DocumentsResult) Ratio() float64 {
	if d.Raw == nil || d.Raw.PerSecond == 0 || d.Backfill == nil {
		return 0
	}
	return d.Backfill.PerSecond / d.Raw.PerSecond
}

// documentsRound runs one round of the documents measurements, the
// backfill then the raw insert, each checked, into *out.
func (b *bench) documentsRound(ctx context.Context, d *documents, out **DocumentsResult) error {
	if *out == nil {
		*out = &DocumentsResult{Documents: int64(d.want.headers), Lines: d.want.lines}
	}
	res := *out
	if err := b.emptyDocuments(ctx, d); err != nil {
		return err
	}
	name := b.label + fmt.Sprintf("documents backfill (%d-column lines)", DocumentsLineColumns)
	bf, err := b.backfill(ctx, name, d.target(), false)
	if err != nil {
		return err
	}
	if err := b.checkDocuments(ctx, d, name); err != nil {
		return err
	}
	bf.Note = fmt.Sprintf("%d documents, %.0f documents/s; %s", bf.Records, bf.PerSecond, bf.Note)
	perLine(bf, res.Lines)
	raw, err := b.documentsRaw(ctx, d, documentsRawBatch, documentsRawConns)
	if err != nil {
		return err
	}
	if err := b.checkDocuments(ctx, d, raw.Name); err != nil {
		return err
	}
	perLine(raw, res.Lines)
	res.Ratios = append(res.Ratios, bf.PerSecond/raw.PerSecond)
	res.Backfill, res.Raw = best(res.Backfill, bf), best(res.Raw, raw)
	b.logf("%s: %.0f lines/s, raw insert %.0f lines/s", name, bf.PerSecond, raw.PerSecond)
	return nil
}

// perLine makes r count lines.
func perLine(r *Result, lines int64) {
	r.Records = lines
	r.PerSecond = float64(lines) / r.Seconds
}

// documentsRawBatch is how many documents the raw insert writes in one
// transaction, a multi-row INSERT of their headers and one of their
// lines, on documentsRawConns connections.
const documentsRawBatch, documentsRawConns = 500, 4

// documentsRaw writes the feed's documents into empty tables as fast as
// plain SQL does: on conns connections, transactions of batch documents,
// each a multi-row INSERT of the headers and one of their lines, values
// written in, no locks, no version reads.
func (b *bench) documentsRaw(ctx context.Context, d *documents, batch, conns int) (*Result, error) {
	if err := b.emptyDocuments(ctx, d); err != nil {
		return nil, err
	}
	b.logf(b.label+"documents raw insert: %d documents, %d lines, transactions of %d documents, %d connections", d.want.headers, d.want.lines, batch, conns)
	headInsert, lineInsert := b.docRawInserts(d.table.Entity())
	r, err := b.parallel(ctx, d.feed.Len(), batch, conns, func() func(from, to int) error {
		var heads, lines []byte
		return func(from, to int) error {
			heads, lines = append(heads[:0], headInsert...), append(lines[:0], lineInsert...)
			for i := from; i < to; i++ {
				doc := docAt(i)
				if i > from {
					heads = append(heads, ',')
					lines = append(lines, ',')
				}
				heads, lines = doc.appendRows(heads, lines, b.d)
			}
			if err := b.inTx(ctx, string(heads), string(lines)); err != nil {
				return fmt.Errorf("documents raw insert: %w", err)
			}
			return nil
		}
	})
	if err != nil {
		return nil, err
	}
	r.Name = b.label + fmt.Sprintf("raw insert, documents: a transaction of %d documents (INSERT of the headers, INSERT of the lines), %d connections, no locks, literal values", batch, conns)
	return r, nil
}

// docRawInserts returns the heads of the raw insert's statements: the
// columns erpsync writes of a header and of a line.
func (b *bench) docRawInserts(e *entity.Entity) (head, line string) {
	var hs, ls []string
	for _, c := range e.Columns {
		hs = append(hs, c.Name)
	}
	for _, k := range e.Key {
		ls = append(ls, k)
	}
	for _, c := range e.Children[0].Columns {
		ls = append(ls, c.Name)
	}
	return "INSERT INTO " + b.ident(DocumentsEntity) + " (" + strings.Join(hs, ", ") + ", erp_version, erp_updated_at, fence_token, created_at, updated_at) VALUES ",
		"INSERT INTO " + b.ident(DocumentsLineTable) + " (" + strings.Join(ls, ", ") + ", erp_version) VALUES "
}

// inTx runs the statements in one transaction.
func (b *bench) inTx(ctx context.Context, stmts ...string) error {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			_ = tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

// appendRows appends d's header as a VALUES tuple to heads and its lines
// to lines, in dialect dl's SQL.
func (d *docRec) appendRows(heads, lines []byte, dl store.Dialect) ([]byte, []byte) {
	tail, bools := ",1,UTC_TIMESTAMP(3),UTC_TIMESTAMP(3))", &bools01
	if dl == store.Postgres {
		tail, bools = ",1,CURRENT_TIMESTAMP(3),CURRENT_TIMESTAMP(3))", &boolsPG
	}
	heads = d.appendHeader(append(heads, '('), ",", "'")
	heads = append(heads, tail...)
	for j := range d.lines {
		if j > 0 {
			lines = append(lines, ',')
		}
		lines = append(d.appendLine(append(lines, '('), d.line(j), ",", "'", bools), ')')
	}
	return heads, lines
}

// markdown writes the documents table: each party in lines a second,
// its CPU a line, and the ratio with its goal.
func (d *DocumentsResult) markdown(w io.Writer) {
	if d == nil || d.Backfill == nil || d.Raw == nil {
		return
	}
	db, goal := "mysql", "documents backfill / raw insert, lines/s"
	if d.Database != "" {
		db, goal = d.Database, "PostgreSQL: "+goal
	}
	tableHead(w, "| documents | lines | seconds | lines/s | peak RSS MiB | CPU µs a line: erpsync / all | CPU s: erpsync / "+db+" / redis / bench | rounds, lines/s | note |",
		"| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
	for _, r := range []*Result{d.Backfill, d.Raw} {
		rounds := make([]string, len(r.Rounds))
		for i, v := range r.Rounds {
			rounds[i] = fmt.Sprintf("%.0f", v)
		}
		rss := "-"
		if r.PeakRSSKiB > 0 {
			rss = fmt.Sprintf("%.1f", mib(r.PeakRSSKiB))
		}
		fmt.Fprintf(w, "| %s | %d | %.2f | %.0f | %s | %.1f / %.1f | %.2f / %.2f / %.2f / %.2f | %s | %s |\n", r.Name, r.Records, r.Seconds, r.PerSecond, rss,
			r.CPU.Erpsync/float64(r.Records)*1e6, r.CPU.Total()/float64(r.Records)*1e6, r.CPU.Erpsync, r.CPU.MySQL+r.CPU.Postgres, r.CPU.Redis, r.CPU.Bench,
			strings.Join(rounds, ", "), r.Note)
	}
	ratios := make([]string, len(d.Ratios))
	for i, v := range d.Ratios {
		ratios[i] = fmt.Sprintf("%.2f", v)
	}
	met := "no"
	if d.Ratio() >= GoalDocumentsRatio {
		met = "yes"
	}
	tableHead(w, "| goal | value | target | met | in each round |", "| --- | ---: | --- | --- | --- |")
	fmt.Fprintf(w, "| %s | %.2f | >= %.1f | %s | %s |\n", goal, d.Ratio(), GoalDocumentsRatio, met, strings.Join(ratios, ", "))
}
