package outbox_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/outbox/outboxtest"
	"github.com/erpsync/erpsync/internal/testenv"
)

// benchEvents are n events of distinct changes, the i-th call's: a
// customer's row of about 300 bytes of data each.
func benchEvents(call, n int) []outbox.Event {
	evs := make([]outbox.Event, n)
	for i := range evs {
		key := fmt.Sprintf("C%07d", i)
		evs[i] = outbox.Event{Entity: "customers", Key: map[string]any{"company": "1000", "customer": key}, Op: outbox.OpUpdate,
			Version: int64(call), RunID: "0b7e3c1e-5a56-4d0f-8c3e-4e2d2d6f7a10",
			Data: map[string]any{"company": "1000", "customer": key, "name": "Müller & Söhne GmbH " + key, "street": "Hauptstraße 1",
				"city": "Köln", "country": "DE", "credit_limit": "1234.50", "founded_on": "2020-01-31", "rating": "A",
				"updated_at": "2025-06-01T12:00:00.000Z", "email": "info@example.com", "blocked": false, "n": int64(call)}}
	}
	return evs
}

// BenchmarkRecordPostgres weighs the ways to record a batch of events on
// PostgreSQL, each a transaction of its own: the Recorder's INSERT ...
// SELECT FROM unnest of an array per column, a multi-row INSERT ...
// VALUES with its values as arguments, and a COPY into a temporary table
// (created once per connection, emptied at commit) then INSERT ...
// SELECT; every one ON CONFLICT DO NOTHING.
func BenchmarkRecordPostgres(b *testing.B) {
	if !testenv.Postgres() {
		b.Skip("PostgreSQL's: ERPSYNC_TEST_DB=postgres")
	}
	db := outboxtest.Open(b).DB
	ctx := context.Background()
	// Each way runs on a connection of its own, whose server process's
	// CPU time the benchmark reports beside its own: the machine's load
	// moves the wall time more than either.
	var pid int
	pin := func(b *testing.B) *sql.Conn {
		conn, err := db.Conn(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		if err := conn.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			b.Fatal(err)
		}
		return conn
	}
	inTx := func(b *testing.B, record func(context.Context, *sql.Tx, []outbox.Event) error) func(evs []outbox.Event) {
		conn := pin(b)
		return func(evs []outbox.Event) {
			tx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := record(ctx, tx, evs); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	}
	copyIn := func(b *testing.B) func(evs []outbox.Event) {
		conn := pin(b)
		var pc *pgx.Conn
		if err := conn.Raw(func(dc any) error { pc = dc.(*stdlib.Conn).Conn(); return nil }); err != nil {
			b.Fatal(err)
		}
		if _, err := pc.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS erpsync_events_in (event_id char(36), entity varchar(64) COLLATE "C", entity_key varchar(500) COLLATE "C",
  op varchar(8), version bigint, run_id varchar(40), life bigint, payload text, i bigint GENERATED ALWAYS AS IDENTITY) ON COMMIT DELETE ROWS`); err != nil {
			b.Fatal(err)
		}
		cols := []string{"event_id", "entity", "entity_key", "op", "version", "run_id", "life", "payload"}
		return func(evs []outbox.Event) {
			rows, err := outbox.CopyRows(evs)
			if err != nil {
				b.Fatal(err)
			}
			tx, err := pc.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"erpsync_events_in"}, cols, pgx.CopyFromRows(rows)); err != nil {
				b.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO erpsync_events (event_id, entity, entity_key, op, version, run_id, life, payload, recorded_at)
SELECT event_id, entity, entity_key, op, version, run_id, life, payload, CURRENT_TIMESTAMP(3) FROM erpsync_events_in ORDER BY i
ON CONFLICT (entity, entity_key, version, op, life) DO NOTHING`); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	ways := []struct {
		name string
		make func(b *testing.B) func([]outbox.Event)
	}{
		{"recorder", func(b *testing.B) func([]outbox.Event) { return inTx(b, outbox.NewPostgresRecorder().Record) }},
		{"values", func(b *testing.B) func([]outbox.Event) { return inTx(b, outbox.RecordPostgresValues) }},
		{"copy", copyIn},
	}
	call := 0
	for _, n := range []int{500, 2000} {
		for _, w := range ways {
			b.Run(fmt.Sprintf("%s/%d", w.name, n), func(b *testing.B) {
				// Each way starts from an empty outbox.
				if _, err := db.ExecContext(ctx, "TRUNCATE erpsync_events"); err != nil {
					b.Fatal(err)
				}
				record := w.make(b)
				server, client := cpuOf(b, pid), cpuOf(b, os.Getpid())
				for b.Loop() {
					b.StopTimer()
					call++
					evs := benchEvents(call, n)
					b.StartTimer()
					record(evs)
				}
				b.ReportMetric(float64((cpuOf(b, pid)-server).Microseconds())/float64(b.N*n), "server-µs/event")
				b.ReportMetric(float64((cpuOf(b, os.Getpid())-client).Microseconds())/float64(b.N*n), "client-µs/event")
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/event")
			})
		}
	}
}

// cpuOf is the CPU time, user and system, process pid has used.
func cpuOf(b *testing.B, pid int) time.Duration {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command's name, which is in parentheses:
	// utime and stime are the 12th and 13th, in clock ticks (100 a second).
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
