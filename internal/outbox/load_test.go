package outbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/outbox/outboxtest"
	"github.com/erpsync/erpsync/internal/testenv"
)

// stored is an outbox row as a test reads it back.
type stored struct {
	EventID, Entity, Key, Op, RunID, Body string
	Version, Life                         int64
}

// readStored reads the outbox in id order, each body written with seq 0
// (a body's seq is its row's id, which the rows' order checks).
func readStored(t *testing.T, db *outboxtest.DB) []stored {
	t.Helper()
	rows, err := db.Query("SELECT " + outbox.StoredColumns + " FROM erpsync_events ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []stored
	for rows.Next() {
		var s outbox.Stored
		if err := rows.Scan(s.Dest()...); err != nil {
			t.Fatal(err)
		}
		s.Seq = 0
		out = append(out, stored{EventID: s.ID, Entity: s.Entity, Key: s.Key, Op: s.Op, RunID: s.RunID, Body: string(s.Body()), Version: s.Version, Life: s.Life})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// nastyString draws a string of the characters a load's line format and
// SQL's quoting give meaning to (tab, newline, backslash, NUL, quotes, a
// lone "\N"), of other control characters, of multi-byte UTF-8 and of
// invalid bytes, and of plain text.
func nastyString(r *rand.Rand) string {
	return drawString(r, append(validParts, "\xff", "\xc3"))
}

// nastyText is nastyString of valid UTF-8: an entity's name, a run id.
func nastyText(r *rand.Rand) string { return drawString(r, validParts) }

var validParts = []string{"\t", "\n", "\r", "\\", "\\N", "\x00", "'", `"`, "\x1a", "NULL", "é", "日本", "😀", "<&>", "a", "plain text", " "}

func drawString(r *rand.Rand, parts []string) string {
	var b strings.Builder
	for range r.IntN(8) {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

// nastyEvents draws up to 30 events of round whose keys and data hold
// nastyString's characters and whose entities and run ids hold text's.
func nastyEvents(r *rand.Rand, round int, text func(*rand.Rand) string) []outbox.Event {
	ops := []string{outbox.OpInsert, outbox.OpUpdate, outbox.OpDelete, outbox.OpRestore}
	var evs []outbox.Event
	for i := range 1 + r.IntN(30) {
		key := map[string]any{"company": nastyString(r), "no": fmt.Sprint(round, "-", i)}
		data := map[string]any{"company": key["company"], "no": key["no"], "name": nastyString(r), "amount": "1234.50", "n": r.IntN(1000)}
		evs = append(evs, outbox.Event{Entity: "customers" + text(r), Key: key, Op: ops[r.IntN(len(ops))], Version: r.Int64() - r.Int64(), RunID: text(r), Life: r.Int64N(3), Data: data})
	}
	return evs
}

// wantStored is what the outbox must hold of ev: its id computed from its
// identity and the body encoding/json writes.
func wantStored(t *testing.T, ev outbox.Event) stored {
	t.Helper()
	kt, err := outbox.KeyText(ev.Key)
	if err != nil {
		t.Fatal(err)
	}
	id := outbox.ID(ev.Entity, kt, ev.Version, ev.Op, ev.Life)
	body, err := json.Marshal(outbox.Body{ID: id, Entity: ev.Entity, Op: ev.Op, Key: ev.Key, Version: ev.Version, RunID: ev.RunID, Data: ev.Data})
	if err != nil {
		t.Fatal(err)
	}
	return stored{EventID: id, Entity: ev.Entity, Key: kt, Op: ev.Op, RunID: ev.RunID, Body: string(body), Version: ev.Version, Life: ev.Life}
}

// TestLoadRecordsWhatInsertRecords: for events whose keys, data and run
// ids hold every character the load's line format or SQL quoting reads
// specially, the rows a load records are value for value the rows the
// INSERT records, and both are the events' ids and encoding/json bodies;
// under NO_BACKSLASH_ESCAPES too.
func TestLoadRecordsWhatInsertRecords(t *testing.T) {
	if testenv.Postgres() {
		t.Skip("MySQL's LOAD DATA; PostgreSQL's INSERT: TestRecordStoresEveryCharacter")
	}
	db, _ := setup(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 11))
	for round := range 40 {
		evs := nastyEvents(r, round, nastyText)
		noBackslashEscapes := round%4 == 3
		var byPath [2][]stored
		for path, record := range []func(context.Context, *sql.Tx, []outbox.Event) error{outbox.Record, outbox.RecordWithInsert} {
			if _, err := db.ExecContext(ctx, "DELETE FROM erpsync_events"); err != nil {
				t.Fatal(err)
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if noBackslashEscapes {
				if _, err := tx.ExecContext(ctx, "SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')"); err != nil {
					t.Fatal(err)
				}
			}
			if err := record(ctx, tx, evs); err != nil {
				t.Fatalf("round %d, path %d: %v", round, path, err)
			}
			if noBackslashEscapes {
				if _, err := tx.ExecContext(ctx, "SET SESSION sql_mode = REPLACE(@@sql_mode, 'NO_BACKSLASH_ESCAPES', '')"); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			byPath[path] = readStored(t, db)
		}
		if !reflect.DeepEqual(byPath[0], byPath[1]) {
			t.Fatalf("round %d: the load recorded\n%+v\nthe insert\n%+v", round, byPath[0], byPath[1])
		}
		if len(byPath[0]) != len(evs) {
			t.Fatalf("round %d: %d rows of %d events", round, len(byPath[0]), len(evs))
		}
		for i, ev := range evs {
			if want := wantStored(t, ev); byPath[0][i] != want {
				t.Fatalf("round %d, event %d: stored\n%+v\nwant\n%+v", round, i, byPath[0][i], want)
			}
		}
	}
}

// TestRecordFallsBackWhenLoadsAreRefused: with the server's local_infile
// off, a Recorder records with the INSERT, the events whole and a
// duplicate dropped, and goes on doing so without trying a load again.
func TestRecordFallsBackWhenLoadsAreRefused(t *testing.T) {
	if testenv.Postgres() {
		t.Skip("MySQL's LOAD DATA")
	}
	db, _ := setup(t)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "SET GLOBAL local_infile = OFF"); err != nil {
		t.Fatal(err)
	}
	defer db.ExecContext(ctx, "SET GLOBAL local_infile = ON")
	rec := new(outbox.Recorder)
	batches := [][]outbox.Event{
		{ev("C1", 1, outbox.OpInsert), ev("C2", 1, outbox.OpInsert)},
		{ev("C1", 1, outbox.OpInsert), ev("C1", 2, outbox.OpUpdate)},
	}
	for _, evs := range batches {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := rec.Record(ctx, tx, evs); err != nil {
			tx.Rollback()
			t.Fatalf("record with loads refused: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if n := rec.Inserts(); n != 2 {
		t.Fatalf("%d calls recorded with the INSERT, want 2", n)
	}
	got := readStored(t, db)
	want := []stored{wantStored(t, batches[0][0]), wantStored(t, batches[0][1]), wantStored(t, batches[1][1])}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stored\n%+v\nwant\n%+v", got, want)
	}
}

// TestRecordStoresEveryCharacter: for events whose keys, data, entities
// and run ids hold the characters SQL's quoting and the load's line
// format read specially, the database's recorder stores the events' ids
// and encoding/json bodies, value for value, and one change recorded
// twice once. On PostgreSQL, whose text holds no NUL, an entity or a run
// id holds none (TestRecordRefusesWhatWouldNotFit).
func TestRecordStoresEveryCharacter(t *testing.T) {
	db, _ := setup(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(13, 17))
	text := nastyText
	if db.Postgres {
		text = func(r *rand.Rand) string { return strings.ReplaceAll(nastyText(r), "\x00", "") }
	}
	// What an array's text or a literal reads specially, whole.
	var all []outbox.Event
	for i, s := range []string{"NULL", "null", "", `{}`, `{"a","b"}`, `\`, `"`, "a,b", " ", "'", "''", `\'`} {
		all = append(all, outbox.Event{Entity: "x" + s, Key: map[string]any{"k": s}, Op: outbox.OpInsert, Version: int64(i), RunID: s, Data: map[string]any{"k": s}})
	}
	db.Record(t, all...)
	for round := range 20 {
		evs := nastyEvents(r, round, text)
		// A batch that carries each event twice, then the batch again
		// in the same transaction: each event once.
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, batch := range [][]outbox.Event{append(slices.Clone(evs), evs...), evs} {
			if err := db.Recorder.Record(ctx, tx, batch); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		all = append(all, evs...)
	}
	got := readStored(t, db)
	if len(got) != len(all) {
		t.Fatalf("%d rows of %d events", len(got), len(all))
	}
	for i, ev := range all {
		if want := wantStored(t, ev); got[i] != want {
			t.Fatalf("event %d: stored\n%+v\nwant\n%+v", i, got[i], want)
		}
	}
}

// TestRecordRefusesWhatWouldNotFit: a value longer than its column is an
// error naming the column, not a row cut short (a load would only warn);
// so is a key or data that is not UTF-8, not a row of bytes no utf8mb4
// column may hold, and on PostgreSQL an entity or run id with a NUL,
// which its text does not hold.
func TestRecordRefusesWhatWouldNotFit(t *testing.T) {
	db, _ := setup(t)
	ctx := context.Background()
	long := ev("C1", 1, outbox.OpInsert)
	long.Entity = strings.Repeat("e", 65)
	run := ev("C1", 1, outbox.OpInsert)
	run.RunID = strings.Repeat("r", 41)
	key := ev(strings.Repeat("k", 500), 1, outbox.OpInsert)
	// An encoder of its own (KeyJSON, DataJSON) that let a byte through
	// that is not UTF-8: the load would store it as it is.
	badData := ev("C1", 1, outbox.OpInsert)
	badData.KeyJSON, badData.DataJSON = []byte(`{"id":"C1"}`), []byte("{\"id\":\"C1\",\"name\":\"\xff\"}")
	badKey := ev("C1", 1, outbox.OpInsert)
	badKey.KeyJSON, badKey.DataJSON = []byte("{\"id\":\"C\xc3\"}"), []byte(`{"id":"C1"}`)
	cases := []struct {
		ev   outbox.Event
		want string // what the error names
	}{{long, "entity"}, {run, "run id"}, {key, "key"}, {badData, "data"}, {badKey, "key"}}
	if db.Postgres {
		nulEntity := ev("C1", 1, outbox.OpInsert)
		nulEntity.Entity = "cust\x00omers"
		nulRun := ev("C1", 1, outbox.OpInsert)
		nulRun.RunID = "r\x00"
		cases = append(cases, struct {
			ev   outbox.Event
			want string
		}{nulEntity, "entity"}, struct {
			ev   outbox.Event
			want string
		}{nulRun, "run id"})
	}
	for _, c := range cases {
		bad := c.ev
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Recorder.Record(ctx, tx, []outbox.Event{ev("C0", 1, outbox.OpInsert), bad})
		tx.Commit()
		if err == nil {
			t.Fatalf("recorded an event of entity %q, run %q, key %v %q, data %q", bad.Entity, bad.RunID, bad.Key, bad.KeyJSON, bad.DataJSON)
		}
		if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("error %q: want one line naming the %s", err, c.want)
		}
	}
	if got := readStored(t, db); len(got) != 0 {
		t.Fatalf("%d rows recorded of batches refused", len(got))
	}
}
