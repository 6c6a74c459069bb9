// Package outboxtest gives the tests of the outbox and of the relay a
// fresh, migrated database of the test matrix (testenv.MigratedStore:
// MySQL, or PostgreSQL under ERPSYNC_TEST_DB=postgres), with the outbox
// and the recorder of its dialect.
package outboxtest

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/outbox"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// DB is a test's database with the outbox's tables.
type DB struct {
	*sql.DB
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
	st, _ := testenv.MigratedStore(t)
	db, err := st.DB().DB()
	if err != nil {
		t.Fatal(err)
	}
	if st.Dialect() == store.Postgres {
		return &DB{DB: db, Postgres: true, Outbox: outbox.NewPostgres(db), Recorder: outbox.NewPostgresRecorder()}
	}
	return &DB{DB: db, Outbox: outbox.New(db), Recorder: new(outbox.Recorder)}
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
