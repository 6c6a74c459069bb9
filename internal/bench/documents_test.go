package bench

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/testenv"
)

// The documents feed serves, page by page, exactly the documents the raw
// insert writes and the checksums expect: erpsync's REST source decodes
// every document to the key, values, version, updated_at and lines of
// Rows.
func TestDocumentsFeed(t *testing.T) {
	const n = 1003
	feed := NewDocumentsFeed(n)
	srv := httptest.NewServer(feed)
	defer srv.Close()
	sch, err := DocumentsSchema()
	if err != nil {
		t.Fatal(err)
	}
	got := ReadFeed(t, srv.URL, sch, DocumentsShape(), 200)
	want := feed.Rows(0, n)
	if len(got) != n {
		t.Fatalf("%d documents, want %d", len(got), n)
	}
	lines := 0
	for i, r := range got {
		w := want[i]
		if r.ErpID != w.Key || r.Version != w.Version || !r.UpdatedAt.Equal(w.UpdatedAt) || len(r.Vals) != documentsHeaderColumns || len(r.Children) != 1 {
			t.Fatalf("document %d: %q v%d %v, %d values, %d children; want %q v%d %v", i, r.ErpID, r.Version, r.UpdatedAt, len(r.Vals), len(r.Children), w.Key, w.Version, w.UpdatedAt)
		}
		for j, v := range r.Vals {
			if wv := w.Vals[j]; v != wv {
				t.Fatalf("document %d column %d: %+v, want %+v", i, j, v, wv)
			}
		}
		gl, wl := r.Children[0], w.Children[0]
		if len(gl) != len(wl) || len(gl) < 5 || len(gl) > 20 {
			t.Fatalf("document %d: %d lines, want %d (5 to 20)", i, len(gl), len(wl))
		}
		for j := range gl {
			for k := range gl[j] {
				if gl[j][k] != wl[j][k] {
					t.Fatalf("document %d line %d column %d: %+v, want %+v", i, j, k, gl[j][k], wl[j][k])
				}
			}
		}
		lines += len(gl)
	}
	if lines != feed.Lines() {
		t.Errorf("%d lines served, Lines() = %d", lines, feed.Lines())
	}
}

// The check after each round fails whenever the tables differ from the
// feed in a header or a line: a value, a version, a line missing or one
// too many, a soft-deleted header. It passes on the raw insert's tables,
// whose values the bench writes itself, so the checksums the bench
// computes agree with MySQL's text of every column.
func TestCheckDocuments(t *testing.T) {
	ctx := context.Background()
	b, _ := testBench(t, Config{Only: []string{Ceiling}})
	d, err := b.startDocuments(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	if d.want.headers != 60 || d.want.lines != int64(d.feed.Lines()) {
		t.Fatalf("want %+v for 60 documents of %d lines", d.want, d.feed.Lines())
	}
	const inv, line = "company = '1001' AND invoice_no = 9007199254740994", " AND line_no = 20"
	for _, breakIt := range []string{
		"",
		"UPDATE " + DocumentsLineTable + " SET quantity = quantity + 0.001 WHERE " + inv + line,
		"UPDATE " + DocumentsLineTable + " SET unit_price = unit_price + 0.01 WHERE " + inv + line,
		"UPDATE " + DocumentsLineTable + " SET taxable = NOT taxable WHERE " + inv + line,
		"UPDATE " + DocumentsLineTable + " SET material = 'WASHER-10' WHERE " + inv + line,
		"UPDATE " + DocumentsLineTable + " SET erp_version = erp_version + 1 WHERE " + inv + line,
		"DELETE FROM " + DocumentsLineTable + " WHERE " + inv + line,
		"INSERT INTO " + DocumentsLineTable + " (company, invoice_no, line_no, material, quantity, unit_price, taxable, erp_version) VALUES ('1001', 9007199254740994, 999, 'X', 0, 0, 0, 2)",
		"UPDATE " + DocumentsEntity + " SET erp_version = erp_version + 1 WHERE " + inv,
		"UPDATE " + DocumentsEntity + " SET customer = 'C9999999' WHERE " + inv,
		"UPDATE " + DocumentsEntity + " SET erp_updated_at = erp_updated_at + INTERVAL 1000 MICROSECOND WHERE " + inv,
		"UPDATE " + DocumentsEntity + " SET deleted_at = UTC_TIMESTAMP(3) WHERE " + inv,
	} {
		if _, err := b.documentsRaw(ctx, d, 20, 2); err != nil {
			t.Fatal(err)
		}
		if breakIt == "" {
			if err := b.checkDocuments(ctx, d, "raw insert"); err != nil {
				t.Fatalf("the raw insert's tables fail the check: %v", err)
			}
			continue
		}
		res, err := b.db.ExecContext(ctx, breakIt)
		if err != nil {
			t.Fatalf("%s: %v", breakIt, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("%s: %d rows changed, want 1", breakIt, n)
		}
		if err := b.checkDocuments(ctx, d, "broken"); err == nil {
			t.Errorf("the check passes after %s", breakIt)
		}
	}
}

// ReadFeed reads every record of the feed at url through erpsync's REST
// source, limit records a page; an invalid item fails t.
func ReadFeed(t testing.TB, url string, sch *erp.Schema, shape *erp.Shape, limit int) []erp.Record {
	t.Helper()
	c, err := erp.New(erp.Config{BaseURL: url, Schema: sch, Shape: shape})
	if err != nil {
		t.Fatal(err)
	}
	var got []erp.Record
	q := erp.Query{Limit: limit}
	for {
		p, err := c.Page(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Invalid) > 0 {
			t.Fatalf("invalid items: %+v", p.Invalid[0])
		}
		got = append(got, p.Records...)
		if p.NextCursor == "" {
			return got
		}
		q.Cursor = p.NextCursor
	}
}

// A quick run of the documents measurement alone: two rounds, each
// checked, in lines a second.
func TestDocumentsQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("builds erpsync and runs two backfills")
	}
	bin, err := testenv.Build(t.TempDir(), "./cmd/erpsync")
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	res, err := Run(context.Background(), Config{
		Bin: bin, MySQLDSN: testenv.MySQLDSNNamed(t, "erpsync_bench_t_"), RedisAddr: testenv.RedisAddr(),
		Records: 700, Repeat: 2, Only: []string{Documents}, Log: &log,
	})
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, log.String())
	}
	d := res.Documents
	if d == nil || d.Documents != 700 || d.Lines != int64(NewDocumentsFeed(700).Lines()) || len(d.Ratios) != 2 || d.Ratio() <= 0 {
		t.Fatalf("documents = %+v", d)
	}
	if d.Backfill.Records != d.Lines || d.Raw.Records != d.Lines || d.Backfill.Report.Inserted != 700 || d.Backfill.Report.Fetched != 700 {
		t.Errorf("backfill %+v (report %+v), raw %+v", d.Backfill, d.Backfill.Report, d.Raw)
	}
	if res.Backfill != nil || res.Typed != nil || res.Ceiling != nil {
		t.Errorf("--only documents measured more: %+v", res)
	}
	var md bytes.Buffer
	res.Markdown(&md)
	if !strings.Contains(md.String(), "| documents backfill (5-column lines) | ") || !strings.Contains(md.String(), "| documents backfill / raw insert, lines/s |") {
		t.Errorf("markdown:\n%s", md.String())
	}
}

// testBench opens a bench of cfg, on a MySQL database of the test's own
// and the test Redis, that the test's end closes; cfg is returned with its
// defaults.
func testBench(t *testing.T, cfg Config) (*bench, Config) {
	t.Helper()
	cfg.MySQLDSN = testenv.MySQLDSNNamed(t, "erpsync_bench_t_")
	cfg.RedisAddr = testenv.RedisAddr()
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	b, err := newBench(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.close)
	return b, cfg
}
