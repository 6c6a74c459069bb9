package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
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
}

// Restores reports whether a valid copy at version and updatedAt restores
// the soft-deleted row c: a copy at c's version or a higher one, or a later
// updated_at at any version (a re-creation is a new life of the key,
// whatever its change counter says). A stale copy (a lower version and no
// later updated_at) restores nothing.
func (c Current) Restores(version int64, updatedAt time.Time) bool {
	return version >= c.Version || Millis(updatedAt).After(c.UpdatedAt)
}

// Marks reports whether an invalid copy at version (0 when it had none
// that could be read) and updatedAt (zero likewise) is newer than what the
// live row c holds and marks: above its version and its mark; without a
// version, a copy later than the row's erp_updated_at (or undated) on an
// unmarked row.
func (c Current) Marks(version int64, updatedAt time.Time) bool {
	switch {
	case c.Deleted:
		return false
	case version > 0:
		return version > c.Version && version > c.Mark
	}
	return c.Mark == 0 && (updatedAt.IsZero() || Millis(updatedAt).After(c.UpdatedAt))
}

const membershipColumns = "erp_id, member_id, product_code, status, starts_at, ends_at, erp_version, erp_updated_at, fence_token, created_at, updated_at"

// Versions reads the version, fencing token and soft-delete mark of the
// rows with the given erp_ids. Absent rows are absent from the map.
func (s *Store) Versions(ctx context.Context, ids []string) (map[string]Current, error) {
	out := make(map[string]Current, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	// The hot path goes to database/sql directly, with its values written
	// in (see literal): gorm's statement builder cost about 2 µs a record in
	// the backfill profile.
	l := newLiteral()
	l.sql("SELECT erp_id, erp_version, fence_token, deleted_at IS NOT NULL, erp_updated_at, COALESCE(quarantined_version, 0) FROM memberships WHERE erp_id IN (")
	for i, id := range ids {
		if i > 0 {
			l.sql(",")
		}
		l.str(id)
	}
	l.sql(")")
	rows, err := s.sql.QueryContext(ctx, l.text())
	l.free()
	if err != nil {
		return nil, fmt.Errorf("read versions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var c Current
		if err := rows.Scan(&id, &c.Version, &c.Fence, &c.Deleted, &c.UpdatedAt, &c.Mark); err != nil {
			return nil, fmt.Errorf("read versions: %w", err)
		}
		out[id] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read versions: %w", err)
	}
	return out, nil
}

// values writes the rows of ms as the VALUES list of an INSERT.
func (l *literal) values(ms []Membership) error {
	for i, m := range ms {
		if i > 0 {
			l.sql(",")
		}
		l.sql("(")
		l.str(m.ErpID)
		l.sql(",")
		l.str(m.MemberID)
		l.sql(",")
		l.str(m.ProductCode)
		l.sql(",")
		l.str(m.Status)
		l.sql(",")
		if err := l.time(m.StartsAt); err != nil {
			return fmt.Errorf("erp_id %q: starts_at: %w", m.ErpID, err)
		}
		l.sql(",")
		if err := l.timeOrNull(m.EndsAt); err != nil {
			return fmt.Errorf("erp_id %q: ends_at: %w", m.ErpID, err)
		}
		l.sql(",")
		l.int(m.Version)
		l.sql(",")
		if err := l.time(m.UpdatedAt); err != nil {
			return fmt.Errorf("erp_id %q: updated_at: %w", m.ErpID, err)
		}
		l.sql(",")
		l.int(m.Fence)
		l.sql(",UTC_TIMESTAMP(3),UTC_TIMESTAMP(3))")
	}
	return nil
}

// insert runs verb (INSERT or INSERT IGNORE) of ms into memberships,
// followed by tail.
func (s *Store) insert(ctx context.Context, verb string, ms []Membership, tail string) error {
	l := newLiteral()
	defer l.free()
	l.sql(verb + " INTO memberships (" + membershipColumns + ") VALUES ")
	if err := l.values(ms); err != nil {
		return err
	}
	l.sql(tail)
	_, err := s.sql.ExecContext(ctx, l.text())
	return err
}

// Insert writes rows that were absent, in one multi-row INSERT. When any of
// them exists already the whole statement fails with ErrDuplicate and nothing
// is written; the caller retries them one by one.
func (s *Store) Insert(ctx context.Context, ms []Membership) error {
	if len(ms) == 0 {
		return nil
	}
	if err := s.insert(ctx, "INSERT", ms, ""); err != nil {
		if isDuplicate(err) {
			return ErrDuplicate
		}
		return fmt.Errorf("insert memberships: %w", err)
	}
	return nil
}

// InsertIgnore writes the rows whose erp_id is absent and skips the
// others, in one multi-row INSERT IGNORE with its values written in as the
// sync's statements are. Nothing in the sync uses it: it is the raw ingest
// that cmd/erpsync-bench measures the sync against.
func (s *Store) InsertIgnore(ctx context.Context, ms []Membership) error {
	if len(ms) == 0 {
		return nil
	}
	if err := s.insert(ctx, "INSERT IGNORE", ms, ""); err != nil {
		return fmt.Errorf("insert ignore memberships: %w", err)
	}
	return nil
}

// guard is the condition under which an incoming row replaces the stored
// one in Upsert: a higher ERP version and a fencing token no older than the
// row's. Restores of a soft-deleted row at its version or a lower one go
// through Update, whose WHERE reads the row once.
const guard = "VALUES(erp_version) > erp_version AND VALUES(fence_token) >= fence_token"

// unmark is the condition under which a write clears the quarantine mark:
// it lands (guard) at the marking version or a newer one. A replayed older
// valid copy updates the data and keeps the mark.
const unmark = guard + " AND (quarantined_version IS NULL OR VALUES(erp_version) >= quarantined_version)"

// upsertSQL assigns the quarantine mark, then fence_token, deleted_at and
// erp_version last, in that order: MySQL evaluates the assignments left to
// right, a later one sees the columns earlier ones changed, and the guard
// reads fence_token and erp_version, unmark quarantined_version. A new
// fence_token keeps the guard's fence test true, and the guard does not
// read deleted_at: a higher version makes the row live.
var upsertSQL = " ON DUPLICATE KEY UPDATE " +
	"member_id = IF(" + guard + ", VALUES(member_id), member_id), " +
	"product_code = IF(" + guard + ", VALUES(product_code), product_code), " +
	"status = IF(" + guard + ", VALUES(status), status), " +
	"starts_at = IF(" + guard + ", VALUES(starts_at), starts_at), " +
	"ends_at = IF(" + guard + ", VALUES(ends_at), ends_at), " +
	"erp_updated_at = IF(" + guard + ", VALUES(erp_updated_at), erp_updated_at), " +
	"updated_at = IF(" + guard + ", VALUES(updated_at), updated_at), " +
	"quarantined_at = IF(" + unmark + ", NULL, quarantined_at), " +
	"quarantined_version = IF(" + unmark + ", NULL, quarantined_version), " +
	"fence_token = IF(" + guard + ", VALUES(fence_token), fence_token), " +
	"deleted_at = IF(" + guard + ", NULL, deleted_at), " +
	"erp_version = IF(" + guard + ", VALUES(erp_version), erp_version)"

// Upsert writes rows in one multi-row guarded statement: absent rows are
// inserted, and a present row changes only when the incoming version is
// higher and the fencing token is not older. A row it changes is live, and
// loses its quarantine mark unless the mark is newer. It does not say which
// rows changed; read them back with Versions.
func (s *Store) Upsert(ctx context.Context, ms []Membership) error {
	if len(ms) == 0 {
		return nil
	}
	if err := s.insert(ctx, "INSERT", ms, upsertSQL); err != nil {
		return fmt.Errorf("upsert memberships: %w", err)
	}
	return nil
}

// updateSQL changes one existing row when the incoming copy is newer: a
// higher version, or, on a soft-deleted row, a copy that restores it
// (Current.Restores). The WHERE reads the row once, before any SET, so a
// restore at a lower version (a re-created record) passes; the quarantine
// mark is cleared before deleted_at, which its test reads.
const updateSQL = `UPDATE memberships SET member_id = ?, product_code = ?, status = ?, starts_at = ?, ends_at = ?,
 erp_updated_at = ?, updated_at = UTC_TIMESTAMP(3), fence_token = ?,
 quarantined_at = IF(deleted_at IS NOT NULL OR quarantined_version IS NULL OR ? >= quarantined_version, NULL, quarantined_at),
 quarantined_version = IF(deleted_at IS NOT NULL OR quarantined_version IS NULL OR ? >= quarantined_version, NULL, quarantined_version),
 deleted_at = NULL, erp_version = ?
 WHERE erp_id = ? AND fence_token <= ? AND (erp_version < ? OR (deleted_at IS NOT NULL AND (erp_version <= ? OR erp_updated_at < ?)))`

// updateArgs are the arguments of updateSQL for m.
func updateArgs(m Membership) []any {
	var ends any
	if m.EndsAt != nil {
		ends = Millis(*m.EndsAt)
	}
	upd := Millis(m.UpdatedAt)
	return []any{m.MemberID, m.ProductCode, m.Status, Millis(m.StartsAt), ends, upd, m.Fence,
		m.Version, m.Version, m.Version,
		m.ErpID, m.Fence, m.Version, m.Version, upd}
}

// Update changes one existing row in one guarded statement and reports
// whether it did: false when the row holds a higher version, an equal one
// and is live, or a newer fencing token, or is soft-deleted and m is a
// stale copy (Current.Restores). A row it changes is live: a copy that
// restores a soft-deleted row starts the row's version guard again from
// its own version.
func (s *Store) Update(ctx context.Context, m Membership) (bool, error) {
	res, err := s.sql.ExecContext(ctx, updateSQL, updateArgs(m)...)
	if err != nil {
		return false, fmt.Errorf("update membership: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("update membership: %w", err)
	}
	return n == 1, nil
}

// Restore runs Update for each of ms, soft-deleted rows that a copy
// restores, in one transaction (one commit), and reports which it changed.
func (s *Store) Restore(ctx context.Context, ms []Membership) ([]bool, error) {
	return s.eachInTx(ctx, "restore", len(ms), func(tx *sql.Tx, i int) (sql.Result, error) {
		return tx.ExecContext(ctx, updateSQL, updateArgs(ms[i])...)
	})
}

// eachInTx runs stmt for i in 0..n-1 in one transaction and reports which
// changed a row. what names the statements in errors.
func (s *Store) eachInTx(ctx context.Context, what string, n int, stmt func(tx *sql.Tx, i int) (sql.Result, error)) ([]bool, error) {
	done := make([]bool, n)
	if n == 0 {
		return done, nil
	}
	tx, err := s.sql.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer tx.Rollback()
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
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("%s: commit: %w", what, err)
	}
	return done, nil
}

// Mark is a quarantine mark to set: the source's newest copy of ErpID is
// invalid. Version is that copy's version (0 when it had none that could
// be read), UpdatedAt its updated_at (zero likewise), Fence the token of
// the record lock the mark is set under.
type Mark struct {
	ErpID     string
	Version   int64
	UpdatedAt time.Time
	Fence     int64
}

// MarkQuarantined sets quarantined_at on the live rows of ms whose copy is
// newer than what they hold and mark (Current.Marks, re-checked by each
// UPDATE), in one transaction, and reports which it marked. A marked row
// keeps its data and version; it takes the mark's fencing token, as any
// write under a newer lock does.
func (s *Store) MarkQuarantined(ctx context.Context, ms []Mark) ([]bool, error) {
	return s.eachInTx(ctx, "mark quarantined", len(ms), func(tx *sql.Tx, i int) (sql.Result, error) {
		m := ms[i]
		l := newLiteral()
		defer l.free()
		if m.Version > 0 {
			l.sql("UPDATE memberships SET quarantined_at = COALESCE(quarantined_at, UTC_TIMESTAMP(3)), quarantined_version = ")
			l.int(m.Version)
		} else {
			l.sql("UPDATE memberships SET quarantined_at = UTC_TIMESTAMP(3), quarantined_version = erp_version")
		}
		l.sql(", fence_token = ")
		l.int(m.Fence)
		l.liveRow(m.ErpID, m.Fence)
		switch {
		case m.Version > 0:
			l.sql(" AND erp_version < ")
			l.int(m.Version)
			l.sql(" AND (quarantined_version IS NULL OR quarantined_version < ")
			l.int(m.Version)
			l.sql(")")
		default:
			l.sql(" AND quarantined_version IS NULL")
			if !m.UpdatedAt.IsZero() {
				l.sql(" AND erp_updated_at < ")
				if err := l.time(Millis(m.UpdatedAt)); err != nil {
					return nil, fmt.Errorf("erp_id %q: updated_at: %w", m.ErpID, err)
				}
			}
		}
		return tx.ExecContext(ctx, l.text())
	})
}

// liveRow writes the WHERE of a guarded UPDATE of one row: erp_id's row,
// live, with a fencing token no newer than fence.
func (l *literal) liveRow(erpID string, fence int64) {
	l.sql(" WHERE erp_id = ")
	l.str(erpID)
	l.sql(" AND deleted_at IS NULL AND fence_token <= ")
	l.int(fence)
}

// Tombstone is a soft delete to make: the row of ErpID, only while it is
// live, still at Version, and carries a fencing token no newer than Fence
// (the token of the record lock the delete is made under).
type Tombstone struct {
	ErpID   string
	Version int64
	Fence   int64
}

// SoftDelete marks the rows of ts deleted (deleted_at = now), each under
// its guard, in one transaction (one commit), and reports which it marked.
// A row written since it was read (a new version, or a write under a newer
// lock) is left alone: the writer wins. A soft-deleted row keeps its data,
// version and fencing token.
func (s *Store) SoftDelete(ctx context.Context, ts []Tombstone) ([]bool, error) {
	return s.eachInTx(ctx, "soft delete", len(ts), func(tx *sql.Tx, i int) (sql.Result, error) {
		t := ts[i]
		l := newLiteral()
		defer l.free()
		l.sql("UPDATE memberships SET deleted_at = UTC_TIMESTAMP(3)")
		l.liveRow(t.ErpID, t.Fence)
		l.sql(" AND erp_version = ")
		l.int(t.Version)
		return tx.ExecContext(ctx, l.text())
	})
}

// Now is the database's clock (UTC, milliseconds): the clock of the rows'
// updated_at.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := s.sql.QueryRowContext(ctx, "SELECT UTC_TIMESTAMP(3)").Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return t, nil
}
