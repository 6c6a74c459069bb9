package store

import (
	"context"
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
	l.sql("SELECT erp_id, erp_version, fence_token, deleted_at IS NOT NULL FROM memberships WHERE erp_id IN (")
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
		if err := rows.Scan(&id, &c.Version, &c.Fence, &c.Deleted); err != nil {
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
// one: a higher ERP version, or the same version of a soft-deleted row (the
// record is back: the write restores it), and a fencing token no older than
// the row's.
const guard = "(VALUES(erp_version) > erp_version OR (VALUES(erp_version) = erp_version AND deleted_at IS NOT NULL)) AND VALUES(fence_token) >= fence_token"

// upsertSQL assigns fence_token, deleted_at and erp_version last, in that
// order: MySQL evaluates the assignments left to right, a later one sees
// the columns earlier ones changed, and the guard reads all three. A new
// fence_token keeps the guard's fence test true; clearing deleted_at then
// turns its same-version test false, which leaves erp_version as it is
// (equal); a higher version still passes.
var upsertSQL = " ON DUPLICATE KEY UPDATE " +
	"member_id = IF(" + guard + ", VALUES(member_id), member_id), " +
	"product_code = IF(" + guard + ", VALUES(product_code), product_code), " +
	"status = IF(" + guard + ", VALUES(status), status), " +
	"starts_at = IF(" + guard + ", VALUES(starts_at), starts_at), " +
	"ends_at = IF(" + guard + ", VALUES(ends_at), ends_at), " +
	"erp_updated_at = IF(" + guard + ", VALUES(erp_updated_at), erp_updated_at), " +
	"updated_at = IF(" + guard + ", VALUES(updated_at), updated_at), " +
	"fence_token = IF(" + guard + ", VALUES(fence_token), fence_token), " +
	"deleted_at = IF(" + guard + ", NULL, deleted_at), " +
	"erp_version = IF(" + guard + ", VALUES(erp_version), erp_version)"

// Upsert writes rows in one multi-row guarded statement: absent rows are
// inserted, and a present row changes only when the incoming version is
// higher (or equal, on a soft-deleted row, which it restores) and the
// fencing token is not older. A row it changes is live. It does not say which rows
// changed; read them back with Versions.
func (s *Store) Upsert(ctx context.Context, ms []Membership) error {
	if len(ms) == 0 {
		return nil
	}
	if err := s.insert(ctx, "INSERT", ms, upsertSQL); err != nil {
		return fmt.Errorf("upsert memberships: %w", err)
	}
	return nil
}

// Update changes one existing row in one guarded statement and reports
// whether it did: false when the row holds a higher version, an equal one
// and is live, or a newer fencing token. A row it changes is live: an equal
// version restores a soft-deleted row.
func (s *Store) Update(ctx context.Context, m Membership) (bool, error) {
	var ends any
	if m.EndsAt != nil {
		ends = m.EndsAt.UTC()
	}
	res := s.db.WithContext(ctx).Exec(`UPDATE memberships SET member_id = ?, product_code = ?, status = ?, starts_at = ?, ends_at = ?,
 erp_updated_at = ?, updated_at = UTC_TIMESTAMP(3), fence_token = ?, deleted_at = NULL, erp_version = ?
 WHERE erp_id = ? AND (erp_version < ? OR (erp_version = ? AND deleted_at IS NOT NULL)) AND fence_token <= ?`,
		m.MemberID, m.ProductCode, m.Status, m.StartsAt.UTC(), ends, m.UpdatedAt.UTC(), m.Fence, m.Version,
		m.ErpID, m.Version, m.Version, m.Fence)
	if res.Error != nil {
		return false, fmt.Errorf("update membership: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
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
	done := make([]bool, len(ts))
	if len(ts) == 0 {
		return done, nil
	}
	tx, err := s.sql.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("soft delete: %w", err)
	}
	defer tx.Rollback()
	for i, t := range ts {
		l := newLiteral()
		l.sql("UPDATE memberships SET deleted_at = UTC_TIMESTAMP(3) WHERE erp_id = ")
		l.str(t.ErpID)
		l.sql(" AND deleted_at IS NULL AND erp_version = ")
		l.int(t.Version)
		l.sql(" AND fence_token <= ")
		l.int(t.Fence)
		res, err := tx.ExecContext(ctx, l.text())
		l.free()
		if err != nil {
			return nil, fmt.Errorf("soft delete %q: %w", t.ErpID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, fmt.Errorf("soft delete %q: %w", t.ErpID, err)
		}
		done[i] = n == 1
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("soft delete: commit: %w", err)
	}
	return done, nil
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
