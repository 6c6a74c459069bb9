package bench

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/store"
)

// The measurements on PostgreSQL (Config.PostgresDSN), for Config.Only.
const (
	// PGBackfill is the memberships backfill on PostgreSQL against the
	// faster of two raw bulk upserts into the same table (PostgresResults).
	PGBackfill = "pg-backfill"
	// PGTyped is the typed backfill on PostgreSQL against the raw insert
	// of its rows.
	PGTyped = "pg-typed"
	// PGDocuments is the documents backfill on PostgreSQL against the raw
	// insert of its rows.
	PGDocuments = "pg-documents"
)

// DefaultPostgresDSN is the PostgreSQL database `make bench` names.
const DefaultPostgresDSN = "postgres://root@127.0.0.1:5432/erpsync_bench?sslmode=disable"

// GoalPGCeilingRatio is the goal of the backfill on PostgreSQL: its
// records/s over the faster of the raw bulk upserts'.
const GoalPGCeilingRatio = 0.8

// pgCeilingBatch and pgCeilingConns are the raw bulk upserts' rows a
// statement (or a COPY) and connections, as the MySQL ceiling's.
const pgCeilingBatch, pgCeilingConns = 1000, 4

func (c Config) wantsPostgres() bool {
	return c.wants(PGBackfill) || c.wants(PGTyped) || c.wants(PGDocuments)
}

// PostgresResults are the rows on PostgreSQL, each the best of its
// rounds.
type PostgresResults struct {
	// Database is the PostgreSQL database's name.
	Database string `json:"database"`
	// CeilingInsert is the multi-row INSERT ... ON CONFLICT DO NOTHING,
	// CeilingCopy the COPY into a temporary table and one INSERT ...
	// SELECT ... ON CONFLICT DO NOTHING a batch; the faster is the
	// ceiling (Ceiling).
	CeilingInsert *Result `json:"ceiling_insert,omitempty"`
	CeilingCopy   *Result `json:"ceiling_copy,omitempty"`
	Backfill      *Result `json:"backfill,omitempty"`
	// Rounds are the backfill's records/s over the faster ceiling's of
	// the same round.
	Rounds    []float64        `json:"rounds,omitempty"`
	Typed     *Result          `json:"backfill_typed,omitempty"`
	TypedRaw  *Result          `json:"raw_insert_typed,omitempty"`
	Documents *DocumentsResult `json:"documents,omitempty"`
}

// Ceiling returns the faster of the raw bulk upserts, nil when neither
// was measured.
func (p *PostgresResults) Ceiling() *Result {
	if p == nil || p.CeilingInsert == nil {
		return nil
	}
	if p.CeilingCopy != nil && p.CeilingCopy.PerSecond > p.CeilingInsert.PerSecond {
		return p.CeilingCopy
	}
	return p.CeilingInsert
}

// goals returns the backfill against the ceiling, when both were
// measured.
func (p *PostgresResults) goals() []Goal {
	c := p.Ceiling()
	if c == nil || p.Backfill == nil || c.PerSecond == 0 {
		return nil
	}
	v := p.Backfill.PerSecond / c.PerSecond
	return []Goal{{"PostgreSQL: backfill / ceiling (the faster raw bulk upsert)", v, fmt.Sprintf(">= %.1f", GoalPGCeilingRatio), v >= GoalPGCeilingRatio}}
}

// markdown writes the PostgreSQL rows, and each backfill against its raw
// insert.
func (p *PostgresResults) markdown(w io.Writer) {
	if p == nil {
		return
	}
	fmt.Fprintf(w, "\nPostgreSQL, database %s:\n\n", p.Database)
	resultRows(w, "postgresql", []*Result{p.CeilingInsert, p.CeilingCopy, p.Backfill, p.Typed, p.TypedRaw})
	type pair struct {
		name     string
		bf, raw  *Result
		unit     string
		rounds   []float64
		rawLabel string
	}
	pairs := []pair{{"memberships", p.Backfill, p.Ceiling(), "records/s", p.Rounds, "the faster raw bulk upsert"},
		{fmt.Sprintf("typed (%d columns)", TypedColumns), p.Typed, p.TypedRaw, "records/s", nil, "raw insert of its rows"}}
	if d := p.Documents; d != nil {
		pairs = append(pairs, pair{"documents", d.Backfill, d.Raw, "lines/s", d.Ratios, "raw insert of its rows"})
	}
	head := false
	for _, q := range pairs {
		if q.bf == nil || q.raw == nil || q.raw.PerSecond == 0 {
			continue
		}
		if !head {
			tableHead(w, "| PostgreSQL backfill | unit | backfill | against | raw | backfill / raw | in each round |", "| --- | --- | ---: | --- | ---: | ---: | --- |")
			head = true
		}
		rs := make([]string, len(q.rounds))
		for i, v := range q.rounds {
			rs[i] = fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %s | %.0f | %.2f | %s |\n", q.name, q.unit, q.bf.PerSecond, q.rawLabel, q.raw.PerSecond, q.bf.PerSecond/q.raw.PerSecond, strings.Join(rs, ", "))
	}
	p.Documents.markdown(w)
}

// pgRun is what the PostgreSQL rows need: a bench on the PostgreSQL
// database, the memberships feed served again with the sums its table
// must hold, and the typed and documents entities on that database.
type pgRun struct {
	b     *bench
	cfg   Config
	truth []erpmock.Record
	want  tableSums
	srv   *http.Server
	url   string
	ty    *typed
	docs  *documents
	// copyCfg connects the COPY ceiling's connections.
	copyCfg *pgx.ConnConfig
}

// startPostgres migrates the PostgreSQL database, serves feed (the
// memberships feed of the MySQL rows) and brings the typed and documents
// entities' tables there, as cfg wants.
func (b *bench) startPostgres(ctx context.Context, cfg Config, feed *erpmock.Mock) (p *pgRun, err error) {
	pb, err := newPostgresBench(ctx, cfg, b)
	if err != nil {
		return nil, err
	}
	p = &pgRun{b: pb, cfg: cfg}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if cfg.wants(PGBackfill) {
		p.truth = feed.Truth()
		p.want = membershipSums(p.truth)
		if p.srv, p.url, err = serve(feed); err != nil {
			return p, err
		}
		p.copyCfg = pb.pgcfg.Copy()
		p.copyCfg.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
	if cfg.wants(PGTyped) {
		if p.ty, err = pb.startTyped(ctx, cfg.Records); err != nil {
			return p, err
		}
	}
	if cfg.wants(PGDocuments) {
		if p.docs, err = pb.startDocuments(ctx, cfg.Records); err != nil {
			return p, err
		}
	}
	return p, nil
}

func (p *pgRun) close() {
	if p.srv != nil {
		p.srv.Close()
	}
	if p.ty != nil {
		p.ty.close()
	}
	if p.docs != nil {
		p.docs.close()
	}
	p.b.close()
}

// newPostgresBench returns a bench on cfg.PostgresDSN's database, migrated,
// with my's job and log.
func newPostgresBench(ctx context.Context, cfg Config, my *bench) (*bench, error) {
	if _, err := store.Migrate(ctx, cfg.PostgresDSN); err != nil {
		return nil, fmt.Errorf("migrate postgresql: %w", err)
	}
	pc, err := store.ParsePostgresDSN(cfg.PostgresDSN)
	if err != nil {
		return nil, err
	}
	db := stdlib.OpenDB(*pc)
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("postgresql: %w", err)
	}
	st, err := store.Open(ctx, cfg.PostgresDSN, nil)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &bench{cfg: cfg, dsn: cfg.PostgresDSN, dbName: pc.Database, db: db, job: my.job, st: st, logf: my.logf,
		ports: serverPorts{postgres: strconv.Itoa(int(pc.Port)), redis: my.ports.redis},
		d:     store.Postgres, dsnEnv: "ERPSYNC_POSTGRES_DSN=" + cfg.PostgresDSN, pgcfg: pc, label: "PostgreSQL: "}, nil
}

// round makes one round of the PostgreSQL rows into out: the two raw bulk
// upserts and the memberships backfill, the typed backfill and its raw
// insert, the documents backfill and its raw insert; each table checked
// after each.
func (p *pgRun) round(ctx context.Context, out *PostgresResults) error {
	b := p.b
	if p.truth != nil {
		ins, err := p.ceilingInsert(ctx)
		if err != nil {
			return err
		}
		out.CeilingInsert = best(out.CeilingInsert, ins)
		cp, err := p.ceilingCopy(ctx)
		if err != nil {
			return err
		}
		out.CeilingCopy = best(out.CeilingCopy, cp)
		r, err := b.backfill(ctx, "PostgreSQL: backfill, one Redis", b.memberships(p.url), true)
		if err != nil {
			return err
		}
		if err := p.checkMemberships(ctx, r.Name); err != nil {
			return err
		}
		out.Backfill = best(out.Backfill, r)
		out.Rounds = append(out.Rounds, r.PerSecond/max(ins.PerSecond, cp.PerSecond))
	}
	if p.ty != nil {
		r, err := b.backfill(ctx, fmt.Sprintf("PostgreSQL: typed backfill (%d columns)", TypedColumns), p.ty.target(), true)
		if err != nil {
			return err
		}
		if err := b.checkTyped(ctx, p.ty, r.Name); err != nil {
			return err
		}
		out.Typed = best(out.Typed, r)
		if r, err = b.typedRaw(ctx, p.ty); err != nil {
			return err
		}
		r.Name = "PostgreSQL: " + strings.NewReplacer("INSERT IGNORE", "INSERT ... SELECT FROM unnest(...) ON CONFLICT DO NOTHING", "literal values", "values written in").Replace(r.Name)
		if err := b.checkTyped(ctx, p.ty, r.Name); err != nil {
			return err
		}
		out.TypedRaw = best(out.TypedRaw, r)
	}
	if p.docs != nil {
		if err := b.documentsRound(ctx, p.docs, &out.Documents); err != nil {
			return err
		}
		out.Documents.Database = store.Postgres.String()
	}
	return nil
}

// ceilingInsert writes the feed into an empty table with multi-row
// INSERT ... ON CONFLICT DO NOTHING statements of pgCeilingBatch rows on
// pgCeilingConns connections, without locks, their values written in as
// the sync's upserts are (store.InsertIgnore; the sync inserts absent rows
// with a COPY), and checks the table.
func (p *pgRun) ceilingInsert(ctx context.Context) (*Result, error) {
	b, recs := p.b, p.truth
	if err := b.empty(ctx, b.memberships("")); err != nil {
		return nil, err
	}
	b.logf("PostgreSQL ceiling: %d rows, INSERT ... SELECT FROM unnest(...) ON CONFLICT DO NOTHING of %d rows (store.InsertIgnore), %d connections, values written in", len(recs), pgCeilingBatch, pgCeilingConns)
	r, err := b.parallel(ctx, len(recs), pgCeilingBatch, pgCeilingConns, func() func(from, to int) error {
		ms := make([]store.Membership, 0, pgCeilingBatch)
		return func(from, to int) error {
			ms = ms[:0]
			for _, r := range recs[from:to] {
				ms = append(ms, membershipOf(r))
			}
			if err := b.st.InsertIgnore(ctx, ms); err != nil {
				return fmt.Errorf("postgresql ceiling insert: %w", err)
			}
			return nil
		}
	})
	if err != nil {
		return nil, err
	}
	r.Name = fmt.Sprintf("PostgreSQL: ceiling, INSERT ... SELECT FROM unnest(...) ON CONFLICT DO NOTHING, %s rows a statement, %d connections, no locks, values written in", commas(pgCeilingBatch), pgCeilingConns)
	return r, p.checkMemberships(ctx, r.Name)
}

// copyColumns are the columns the COPY ceiling copies: the row's, its
// created_at and updated_at taken by the INSERT ... SELECT.
var copyColumns = []string{"erp_id", "member_id", "product_code", "status", "starts_at", "ends_at", "erp_version", "erp_updated_at", "fence_token"}

// ceilingCopy writes the feed into an empty table on pgCeilingConns
// connections, each batch of pgCeilingBatch rows a transaction of a COPY
// (binary) into a temporary table and one INSERT ... SELECT ... ON
// CONFLICT DO NOTHING from it, without locks, and checks the table. The
// connections and their temporary tables are made before the clock
// starts.
func (p *pgRun) ceilingCopy(ctx context.Context) (*Result, error) {
	b, recs := p.b, p.truth
	if err := b.empty(ctx, b.memberships("")); err != nil {
		return nil, err
	}
	cols := strings.Join(copyColumns, ", ")
	conns := make([]*pgx.Conn, 0, pgCeilingConns)
	defer func() {
		for _, c := range conns {
			_ = c.Close(context.Background())
		}
	}()
	for range pgCeilingConns {
		c, err := pgx.ConnectConfig(ctx, p.copyCfg)
		if err != nil {
			return nil, fmt.Errorf("postgresql ceiling copy: connect: %w", err)
		}
		conns = append(conns, c)
		if _, err := c.Exec(ctx, "CREATE TEMPORARY TABLE bench_copy ON COMMIT DELETE ROWS AS SELECT "+cols+" FROM memberships WITH NO DATA"); err != nil {
			return nil, fmt.Errorf("postgresql ceiling copy: temporary table: %w", err)
		}
	}
	upsert := "INSERT INTO memberships (" + cols + ", created_at, updated_at) SELECT " + cols + ", CURRENT_TIMESTAMP(3), CURRENT_TIMESTAMP(3) FROM bench_copy ON CONFLICT (erp_id) DO NOTHING"
	b.logf("PostgreSQL ceiling: %d rows, COPY of %d rows into a temporary table and INSERT ... SELECT ... ON CONFLICT DO NOTHING, %d connections", len(recs), pgCeilingBatch, pgCeilingConns)
	next := 0
	r, err := b.parallel(ctx, len(recs), pgCeilingBatch, pgCeilingConns, func() func(from, to int) error {
		c := conns[next]
		next++
		return func(from, to int) error {
			tx, err := c.Begin(ctx)
			if err != nil {
				return fmt.Errorf("postgresql ceiling copy: %w", err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			rows := recs[from:to]
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"bench_copy"}, copyColumns, pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
				r := rows[i]
				var ends any
				if r.EndsAt != nil {
					ends = r.EndsAt.UTC()
				}
				return []any{r.ErpID, r.MemberID, r.ProductCode, r.Status, r.StartsAt.UTC(), ends, r.Version, r.UpdatedAt.UTC(), int64(1)}, nil
			})); err != nil {
				return fmt.Errorf("postgresql ceiling copy: %w", err)
			}
			if _, err := tx.Exec(ctx, upsert); err != nil {
				return fmt.Errorf("postgresql ceiling copy: upsert: %w", err)
			}
			if err := tx.Commit(ctx); err != nil {
				return fmt.Errorf("postgresql ceiling copy: commit: %w", err)
			}
			return nil
		}
	})
	if err != nil {
		return nil, err
	}
	r.Name = fmt.Sprintf("PostgreSQL: ceiling, COPY of %s rows into a temporary table, INSERT ... SELECT ... ON CONFLICT DO NOTHING, %d connections, no locks", commas(pgCeilingBatch), pgCeilingConns)
	return r, p.checkMemberships(ctx, r.Name)
}

// commas writes n with thousands separated by commas.
func commas(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// tableSums are a table's live rows and the sum of a 32-bit hash of each
// row's text.
type tableSums struct {
	rows, sum int64
}

// pgTime is a timestamptz column's text as MySQL writes a DATETIME(3):
// "2006-01-02 15:04:05.000", in UTC.
func pgTime(col string) string {
	return "to_char(" + col + " AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS')"
}

// pgSum32 is md5Sum32 of a text expression, in PostgreSQL's SQL.
func pgSum32(text string) string {
	return "('x' || substr(md5(" + text + "), 1, 8))::bit(32)::bigint"
}

// md5Sum32 is the first 32 bits of b's MD5, big-endian: the hash of the
// checksums of PostgreSQL's tables, which has no CRC32.
func md5Sum32(b []byte) int64 {
	h := md5.Sum(b)
	return int64(binary.BigEndian.Uint32(h[:4]))
}

// membershipSum reads the memberships table's live rows and checksum: of
// each row, its text as appendMembership writes it.
var membershipSum = "SELECT COUNT(*), COALESCE(SUM(" + pgSum32("concat_ws('|', erp_id, member_id, product_code, status, "+pgTime("starts_at")+", COALESCE("+pgTime("ends_at")+", '-'), erp_version, "+pgTime("erp_updated_at")+")") +
	"), 0) FROM memberships WHERE deleted_at IS NULL"

// appendMembership appends r's text of membershipSum.
func appendMembership(b []byte, r erpmock.Record) []byte {
	const layout = "2006-01-02 15:04:05.000"
	b = append(append(b, r.ErpID...), '|')
	b = append(append(b, r.MemberID...), '|')
	b = append(append(b, r.ProductCode...), '|')
	b = append(append(b, r.Status...), '|')
	b = append(r.StartsAt.UTC().AppendFormat(b, layout), '|')
	if r.EndsAt == nil {
		b = append(b, '-')
	} else {
		b = r.EndsAt.UTC().AppendFormat(b, layout)
	}
	b = append(strconv.AppendInt(append(b, '|'), r.Version, 10), '|')
	return r.UpdatedAt.UTC().AppendFormat(b, layout)
}

// membershipSums are what membershipSum reads of a table that holds
// recs.
func membershipSums(recs []erpmock.Record) tableSums {
	var s tableSums
	var b []byte
	for _, r := range recs {
		b = appendMembership(b[:0], r)
		s.rows++
		s.sum += md5Sum32(b)
	}
	return s
}

// checkMemberships fails unless the table holds exactly the feed, by
// count and checksum: no speed of a wrong table is reported.
func (p *pgRun) checkMemberships(ctx context.Context, what string) error {
	var got tableSums
	if err := p.b.db.QueryRowContext(ctx, membershipSum).Scan(&got.rows, &got.sum); err != nil {
		return fmt.Errorf("%s: check memberships: %w", what, err)
	}
	if got != p.want {
		return fmt.Errorf("%s: memberships holds %d rows (checksum %d); want %d (%d)", what, got.rows, got.sum, p.want.rows, p.want.sum)
	}
	return nil
}

// checkTyped fails unless the typed table holds exactly the feed's
// records: as many rows, the same sum of versions.
func (b *bench) checkTyped(ctx context.Context, t *typed, what string) error {
	var rows, sum, want int64
	if err := b.db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(erp_version), 0) FROM "+b.ident(t.table.Name())).Scan(&rows, &sum); err != nil {
		return fmt.Errorf("%s: check %s: %w", what, t.table.Name(), err)
	}
	for i := range t.feed.Len() {
		want += typedAt(i).version
	}
	if rows != int64(t.feed.Len()) || sum != want {
		return fmt.Errorf("%s: %s holds %d rows (versions sum %d); want %d (%d)", what, t.table.Name(), rows, sum, t.feed.Len(), want)
	}
	return nil
}
