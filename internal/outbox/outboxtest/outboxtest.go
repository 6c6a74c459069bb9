// Package outboxtest gives the tests of the outbox and of the relay a
// fresh, migrated database of the test matrix (testenv.MigratedStore:
// MySQL, or PostgreSQL under ERPSYNC_TEST_DB=postgres), with the outbox
// and the recorder of its dialect.
package outboxtest

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// DB is a test's database with the outbox's tables.
type DB struct {
	*sql.DB
	// Store is the store of the database, whose writes of an entity with
	// events record them.
	Store *store.Store
	// Postgres is set when the database is PostgreSQL.
	Postgres bool
	// Outbox is the database's outbox.
	Outbox *outbox.Outbox
	// Recorder records in the outbox as the store of the database does:
	// on MySQL with a load first (the package's Record), on PostgreSQL
	// with its INSERT.
	Recorder *outbox.Recorder
}

// Open returns a fresh, migrated database of the matrix
// (testenv.MigratedStore), dropped when the test ends.
func Open(t testing.TB) *DB {
	t.Helper()
	return OpenAt(t, testenv.DSN(t))
}

// OpenAt is Open on the database of dsn (of testenv.MySQLDSN or
// testenv.PostgresDSN), whatever the matrix says.
func OpenAt(t testing.TB, dsn string) *DB {
	t.Helper()
	st, _ := testenv.MigratedStoreAt(t, dsn)
	db, err := st.DB().DB()
	if err != nil {
		t.Fatal(err)
	}
	if st.Dialect() == store.Postgres {
		return &DB{DB: db, Store: st, Postgres: true, Outbox: outbox.NewPostgres(db), Recorder: outbox.NewPostgresRecorder()}
	}
	return &DB{DB: db, Store: st, Outbox: outbox.New(db), Recorder: new(outbox.Recorder)}
}

// Q is a test's statement q, written in MySQL's SQL with ? placeholders
// and UTC_TIMESTAMP(3), in the database's dialect.
func (d *DB) Q(q string) string {
	if !d.Postgres {
		return q
	}
	return testenv.Placeholders(strings.ReplaceAll(q, "UTC_TIMESTAMP(3)", "CURRENT_TIMESTAMP(3)"))
}

// Record records evs with d's recorder in a transaction of their own.
func (d *DB) Record(t testing.TB, evs ...outbox.Event) {
	t.Helper()
	if err := d.Uncommitted(t, evs...).Commit(); err != nil {
		t.Fatal(err)
	}
}

// Uncommitted opens a transaction that records evs with d's recorder;
// the caller commits it.
func (d *DB) Uncommitted(t testing.TB, evs ...outbox.Event) *sql.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := d.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Recorder.Record(ctx, tx, evs); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	return tx
}

// Notes is an entity of two columns, id (int32, the key) and body, that
// records change events when events is set.
func Notes(t testing.TB, name string, events bool) *entity.Entity {
	t.Helper()
	col := func(name, ty string) entity.Column {
		typ, err := entity.ParseType(ty)
		if err != nil {
			t.Fatal(err)
		}
		return entity.Column{Name: name, From: []string{name}, Type: typ}
	}
	return &entity.Entity{Name: name, Key: []string{"id"}, UpdatedAt: []string{"u"}, Events: events,
		Columns: []entity.Column{col("id", "int32"), col("body", "string(40)")}}
}

// WriteNote writes version v of the row of key id of a Notes entity with
// w, in a transaction of its own.
func WriteNote(t testing.TB, w *store.Store, id int, v int64) {
	t.Helper()
	row := store.Row{Key: strconv.Itoa(id), Vals: []entity.Value{{I: int64(id)}, {S: "v" + strconv.FormatInt(v, 10)}},
		Version: v, UpdatedAt: time.Now().UTC().Truncate(time.Millisecond), Fence: 1, RunID: "r"}
	if err := w.UpsertRows(context.Background(), []store.Row{row}); err != nil {
		t.Fatal(err)
	}
}
