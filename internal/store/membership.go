package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/outbox"
)

// Membership is one row of memberships as erpsync writes it.
type Membership struct {
	ErpID       string
	MemberID    string
	ProductCode string
	Status      string
	StartsAt    time.Time
	EndsAt      *time.Time
	Version     int64
	UpdatedAt   time.Time // the ERP's updated_at
	Fence       int64     // fencing token of the lock the write is made under
}

// Current is what a row holds of the guards.
type Current struct {
	Version int64
	Fence   int64
	// Deleted says the row is soft-deleted (deleted_at is set): its
	// record was gone from the ERP at the last reconcile.
	Deleted bool
	// UpdatedAt is the row's erp_updated_at: with Version, what decides
	// whether a copy restores a soft-deleted row.
	UpdatedAt time.Time
	// Mark is the row's quarantined_version: the version of the invalid
	// copy that marked it (the row's own version when that copy had none);
	// 0 when the row is not marked.
	Mark int64
	// MarkAt is the row's quarantined_updated_at: the updated_at of the
	// invalid copy that marked it; zero when it had none that could be
	// read, or the row is not marked.
	MarkAt time.Time
	// RestoreCount is the row's restore_count: how many times it came
	// back after a soft delete.
	RestoreCount int64
}

// membershipRows returns ms as rows of the built-in memberships entity,
// their values from one slab.
func membershipRows(ms []Membership) []Row {
	rows := make([]Row, len(ms))
	vals := make([]entity.Value, len(ms)*MembershipColumns)
	for i, m := range ms {
		rows[i] = MembershipRow(m, vals[i*MembershipColumns:(i+1)*MembershipColumns:(i+1)*MembershipColumns])
	}
	return rows
}

// MembershipColumns is the number of columns of the memberships entity.
const MembershipColumns = 6

// MembershipRow returns m as a row of the built-in memberships entity, its
// values written into vals (MembershipColumns long), in the entity's
// column order.
func MembershipRow(m Membership, vals []entity.Value) Row {
	vals[0] = entity.Value{S: m.ErpID}
	vals[1] = entity.Value{S: m.MemberID}
	vals[2] = entity.Value{S: m.ProductCode}
	vals[3] = entity.Value{S: m.Status}
	vals[4] = entity.Value{T: m.StartsAt}
	if m.EndsAt != nil {
		vals[5] = entity.Value{T: *m.EndsAt}
	} else {
		vals[5] = entity.Value{Null: true}
	}
	return Row{Key: m.ErpID, Vals: vals, Version: m.Version, UpdatedAt: m.UpdatedAt, Fence: m.Fence}
}

// Versions reads the version, fencing token and soft-delete mark of the
// rows with the given keys. Absent rows are absent from the map.
func (s *Store) Versions(ctx context.Context, keys []string) (map[string]Current, error) {
	// The hot path goes to database/sql directly, with its values written
	// in (see literal): gorm's statement builder cost about 2 µs a record in
	// the backfill profile.
	return s.t.readVersions(ctx, s.sql, keys)
}

// KeyTaken reports whether the row the table's UNIQUE index finds for key
// holds another key, other: one the index's collation holds equal to key
// though its bytes differ (a trailing space, or case under a collation a
// user chose). Such a record cannot have a row of its own in the table,
// and a write of it would change the other's. False when the row is key's
// own or there is none.
func (s *Store) KeyTaken(ctx context.Context, key string) (other string, taken bool, err error) {
	cur, err := s.t.readVersions(ctx, s.sql, []string{key})
	if err != nil {
		return "", false, err
	}
	for k := range cur {
		if k != key {
			return k, true, nil
		}
	}
	return "", false, nil
}

// Insert writes memberships that were absent: InsertRows.
func (s *Store) Insert(ctx context.Context, ms []Membership) error {
	return s.InsertRows(ctx, membershipRows(ms))
}

// InsertRows writes rows that were absent, in one multi-row INSERT (on
// PostgreSQL, of a table without events or lines, one COPY). When
// any of them exists already the whole statement fails with ErrDuplicate
// and nothing is written; the caller retries them one by one. Of an
// entity with children, it writes the rows' lines in the same
// transaction.
func (s *Store) InsertRows(ctx context.Context, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	if s.t.transactional() {
		return s.insertInTx(ctx, rows)
	}
	insert := func() error { return s.t.insert(ctx, s.sql, "INSERT", rows, "") }
	if s.d == Postgres {
		insert = func() error { return s.t.copyIn(ctx, s.sql, rows) }
	}
	if err := insert(); err != nil {
		if isDuplicate(err) {
			return ErrDuplicate
		}
		return fmt.Errorf("insert %s: %w", s.t.name, err)
	}
	return nil
}

// InsertIgnore writes the rows whose key is absent and skips the others,
// in one multi-row INSERT IGNORE with its values written in as the sync's
// statements are. Nothing in the sync uses it: it is the raw ingest that
// cmd/erpsync-bench measures the sync against.
func (s *Store) InsertIgnore(ctx context.Context, ms []Membership) error {
	return s.InsertIgnoreRows(ctx, membershipRows(ms))
}

// InsertIgnoreRows is InsertIgnore of rows of the store's table.
func (s *Store) InsertIgnoreRows(ctx context.Context, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	verb, tail := "INSERT IGNORE", ""
	if s.d == Postgres {
		verb, tail = "INSERT", " ON CONFLICT DO NOTHING"
	}
	if err := s.t.insert(ctx, s.sql, verb, rows, tail); err != nil {
		return fmt.Errorf("insert ignore %s: %w", s.t.name, err)
	}
	return nil
}

// Upsert writes memberships: UpsertRows.
func (s *Store) Upsert(ctx context.Context, ms []Membership) error {
	return s.UpsertRows(ctx, membershipRows(ms))
}

// UpsertRows writes rows in one multi-row guarded statement: absent rows
// are inserted, and a present row changes only when the incoming version
// is higher and the fencing token is not older. A row it changes is live,
// and loses its quarantine mark unless the mark is newer. It does not say
// which rows changed; read them back with Versions. Of an entity with
// children, the lines of the rows it changed become theirs, in the same
// transaction; a row it does not change (a loser, a replay of its own
// version) keeps its lines.
func (s *Store) UpsertRows(ctx context.Context, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	if s.d == Postgres {
		// One ON CONFLICT statement cannot change a row twice: a batch
		// that carries a key twice runs as statements that each carry it
		// once, in order, as MySQL applies the rows of one statement.
		if parts := distinctRuns(rows); len(parts) > 1 {
			for _, part := range parts {
				if err := s.UpsertRows(ctx, part); err != nil {
					return err
				}
			}
			return nil
		}
	}
	if s.t.transactional() {
		return s.upsertInTx(ctx, rows)
	}
	if err := s.t.insert(ctx, s.sql, "INSERT", rows, s.t.upsert); err != nil {
		return fmt.Errorf("upsert %s: %w", s.t.name, err)
	}
	return nil
}

// Update changes one existing membership: UpdateRow.
func (s *Store) Update(ctx context.Context, m Membership) (bool, error) {
	return s.UpdateRow(ctx, membershipRows([]Membership{m})[0])
}

// UpdateRow changes one existing row in one guarded statement and reports
// whether it did: false when the row holds a higher version, an equal one
// and is live, or a newer fencing token, or is soft-deleted and r is a
// stale copy (Current.Restores). A row it changes is live: a copy that
// restores a soft-deleted row starts the row's version guard again from
// its own version. Of an entity with children, the row's lines become r's
// when it changes the row, in the same transaction.
func (s *Store) UpdateRow(ctx context.Context, r Row) (bool, error) {
	if s.t.transactional() {
		rows := []Row{r}
		done, err := s.eachRecording(ctx, "update "+s.t.name, 1, s.updates(ctx, rows), s.rowChanges(ctx, rows))
		return err == nil && done[0], err
	}
	l := s.t.lit()
	defer l.free()
	if err := s.t.updateRow(l, r); err != nil {
		return false, fmt.Errorf("update %s: %w", s.t.name, err)
	}
	res, err := s.sql.ExecContext(ctx, l.text())
	if err != nil {
		return false, fmt.Errorf("update %s: %w", s.t.name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("update %s: %w", s.t.name, err)
	}
	return n == 1, nil
}

// Restore restores soft-deleted memberships: RestoreRows.
func (s *Store) Restore(ctx context.Context, ms []Membership) ([]bool, error) {
	return s.RestoreRows(ctx, membershipRows(ms))
}

// RestoreRows runs UpdateRow for each of rows, soft-deleted rows that a
// copy restores, in one transaction (one commit), and reports which it
// changed; the lines of a row restored become its copy's.
func (s *Store) RestoreRows(ctx context.Context, rows []Row) ([]bool, error) {
	return s.eachRecording(ctx, "restore", len(rows), s.updates(ctx, rows), s.rowChanges(ctx, rows))
}

// updates is the statement of eachInTx that runs the guarded UPDATE of
// each of rows.
func (s *Store) updates(ctx context.Context, rows []Row) func(tx *sql.Tx, i int) (sql.Result, error) {
	return func(tx *sql.Tx, i int) (sql.Result, error) {
		l := s.t.lit()
		defer l.free()
		if err := s.t.updateRow(l, rows[i]); err != nil {
			return nil, err
		}
		return tx.ExecContext(ctx, l.text())
	}
}

// eachInTx runs stmt for i in 0..n-1 in one transaction and reports which
// changed a row. what names the statements in errors. A session the
// server ended under the transaction runs it again (inTxResumed): the
// statements are guarded, and record no change events.
func (s *Store) eachInTx(ctx context.Context, what string, n int, stmt func(tx *sql.Tx, i int) (sql.Result, error)) ([]bool, error) {
	return s.eachIn(ctx, s.inTxResumed, what, n, stmt, nil)
}

// eachRecording is eachInTx that, with ch, also records in the
// transaction the change events of the rows the statements changed. A
// session ended under it fails it (inTx): a run writes the records of a
// failed chunk again one by one, under fresh locks.
func (s *Store) eachRecording(ctx context.Context, what string, n int, stmt func(tx *sql.Tx, i int) (sql.Result, error), ch *changes) ([]bool, error) {
	return s.eachIn(ctx, s.inTx, what, n, stmt, ch)
}

// eachIn is eachInTx and eachRecording, their transaction run by inTx.
func (s *Store) eachIn(ctx context.Context, inTx func(context.Context, string, func(*sql.Tx) ([]outbox.Event, error)) error,
	what string, n int, stmt func(tx *sql.Tx, i int) (sql.Result, error), ch *changes) ([]bool, error) {
	done := make([]bool, n)
	if n == 0 {
		return done, nil
	}
	err := inTx(ctx, what, func(tx *sql.Tx) ([]outbox.Event, error) {
		if ch != nil && ch.before != nil {
			if err := ch.before(tx); err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
		}
		for i := range n {
			res, err := stmt(tx, i)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			k, err := res.RowsAffected()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			done[i] = k == 1
		}
		if ch == nil {
			return nil, nil
		}
		return ch.after(tx, done)
	})
	if err != nil {
		return nil, err
	}
	return done, nil
}

// Mark is a quarantine mark to set: the source's newest copy of the key
// ErpID is invalid. Version is that copy's version (0 when it had none that
// could be read), UpdatedAt its updated_at (zero likewise), Fence the token
// of the record lock the mark is set under.
type Mark struct {
	ErpID     string
	Version   int64
	UpdatedAt time.Time
	Fence     int64
}

// MarkQuarantined sets quarantined_at on the live rows of ms whose copy is
// newer than what they hold and mark (Current.Marks, re-checked by each
// UPDATE), in one transaction, and reports which it marked. The mark holds
// the copy's version (the row's own when it had none) and its updated_at
// (NULL when it had none). A marked row keeps its data and version; it
// takes the mark's fencing token, as any write under a newer lock does.
func (s *Store) MarkQuarantined(ctx context.Context, ms []Mark) ([]bool, error) {
	return s.eachInTx(ctx, "mark quarantined", len(ms), func(tx *sql.Tx, i int) (sql.Result, error) {
		m := ms[i]
		l := s.t.lit()
		defer l.free()
		if m.Version > 0 {
			l.sql("UPDATE " + s.d.ident(s.t.name) + " SET quarantined_at = COALESCE(quarantined_at, " + s.d.now() + "), quarantined_version = ")
			l.int(m.Version)
		} else {
			l.sql("UPDATE " + s.d.ident(s.t.name) + " SET quarantined_at = " + s.d.now() + ", quarantined_version = erp_version")
		}
		l.sql(", quarantined_updated_at = ")
		if m.UpdatedAt.IsZero() {
			l.sql("NULL")
		} else if err := l.time(Millis(m.UpdatedAt)); err != nil {
			return nil, fmt.Errorf("key %q: updated_at: %w", m.ErpID, err)
		}
		l.sql(", fence_token = ")
		l.int(m.Fence)
		s.t.liveKey(l, m.ErpID, m.Fence)
		l.sql(" AND ")
		x := incoming{Version: m.Version, Fence: m.Fence, UpdatedAt: m.UpdatedAt}
		if err := marksRule(m.Version, m.UpdatedAt).render(l, rowOperands(x)); err != nil {
			return nil, fmt.Errorf("key %q: updated_at: %w", m.ErpID, err)
		}
		return tx.ExecContext(ctx, l.text())
	})
}

// Tombstone is a soft delete to make: the row of the key ErpID, only while
// it is live, still at Version, and carries a fencing token no newer than
// Fence (the token of the record lock the delete is made under).
type Tombstone struct {
	ErpID   string
	Version int64
	Fence   int64
	RunID   string // the run that deletes: its change event's run_id
}

// SoftDelete marks the rows of ts deleted (deleted_at = now), each under
// its guard, in one transaction (one commit), and reports which it marked.
// A row written since it was read (a new version, or a write under a newer
// lock) is left alone: the writer wins. A soft-deleted row keeps its data,
// version and fencing token.
func (s *Store) SoftDelete(ctx context.Context, ts []Tombstone) ([]bool, error) {
	return s.eachRecording(ctx, "soft delete", len(ts), func(tx *sql.Tx, i int) (sql.Result, error) {
		t := ts[i]
		l := s.t.lit()
		defer l.free()
		l.sql("UPDATE " + s.d.ident(s.t.name) + " SET deleted_at = " + s.d.now())
		s.t.liveKey(l, t.ErpID, t.Fence)
		l.sql(" AND erp_version = ")
		l.int(t.Version)
		return tx.ExecContext(ctx, l.text())
	}, s.deleteChanges(ctx, ts))
}

// Now is the database's clock (UTC, milliseconds): the clock of the rows'
// updated_at.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := s.sql.QueryRowContext(ctx, "SELECT "+s.d.now()).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return t, nil
}

// distinctRuns cuts rows, in order, into runs that each carry a key once.
func distinctRuns(rows []Row) [][]Row {
	var parts [][]Row
	seen := make(map[string]bool, len(rows))
	start := 0
	for i, r := range rows {
		if seen[r.Key] {
			parts = append(parts, rows[start:i])
			clear(seen)
			start = i
		}
		seen[r.Key] = true
	}
	return append(parts, rows[start:])
}
