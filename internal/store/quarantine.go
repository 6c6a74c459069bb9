package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/erpsync/erpsync/internal/outbox"
)

// Quarantined is an invalid record from the feed.
type Quarantined struct {
	ErpID   string // as served; may itself be what is invalid
	Reason  string
	Payload []byte
	// Version and UpdatedAt place the invalid copy among its record's
	// copies (InvalidCopiesSince): zero when it carried none that could be
	// read, or when it is no copy of its own record (a key another row
	// holds).
	Version   int64
	UpdatedAt time.Time
}

// quarantineBatch is how many rows a statement of Quarantine stores.
const quarantineBatch = 1000

// quarantineRow is a record to quarantine and its payload's hash.
type quarantineRow struct {
	hash string
	q    Quarantined
}

// Quarantine stores invalid records with their reason and raw payload. A
// payload already quarantined is counted again, not stored twice. The rows
// it writes take the job's next quarantine sequence number
// (QuarantineSeq), in the same transaction.
func (s *Store) Quarantine(ctx context.Context, job, runID string, qs []Quarantined) error {
	if len(qs) == 0 {
		return nil
	}
	now := time.Now().UTC()
	// Several instances quarantine the same replayed payloads at once, and
	// concurrent upserts on one unique index can deadlock in InnoDB: write
	// in hash order, and retry a deadlock or a lock wait timeout. A
	// process paused inside the transaction, whose session the server
	// ended, runs it again when it wakes.
	rows := make([]quarantineRow, len(qs))
	for i, q := range qs {
		sum := sha256.Sum256(q.Payload)
		rows[i] = quarantineRow{hex.EncodeToString(sum[:]), q}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].hash < rows[j].hash })
	what := fmt.Sprintf("quarantine %d records", len(qs))
	return s.inTxResumed(ctx, what, func(tx *sql.Tx) ([]outbox.Event, error) {
		seq, err := s.nextQuarantineSeq(ctx, tx, job)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		// A thousand rows a statement at most, as a run's page holds: a
		// reconcile may store many more, and one statement of all their
		// payloads could pass MySQL's max_allowed_packet.
		for rest := rows; len(rest) > 0; {
			part := rest[:min(len(rest), quarantineBatch)]
			rest = rest[len(part):]
			query, args := s.quarantineInsert(job, runID, now, seq, part)
			if _, err := tx.ExecContext(ctx, s.d.Placeholders(query), args...); err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
		}
		return nil, nil
	})
}

// nextQuarantineSeq moves job's quarantine sequence number on by one in
// tx and returns it. The row stays locked until tx ends, so the numbers
// are committed in the order they are handed out.
func (s *Store) nextQuarantineSeq(ctx context.Context, tx *sql.Tx, job string) (int64, error) {
	var seq int64
	if s.d == Postgres {
		err := tx.QueryRowContext(ctx, "INSERT INTO sync_quarantine_seq (job, seq) VALUES ($1, 1) ON CONFLICT (job) DO UPDATE SET seq = sync_quarantine_seq.seq + 1 RETURNING seq", job).Scan(&seq)
		return seq, err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO sync_quarantine_seq (job, seq) VALUES (?, 1) ON DUPLICATE KEY UPDATE seq = seq + 1", job); err != nil {
		return 0, err
	}
	err := tx.QueryRowContext(ctx, "SELECT seq FROM sync_quarantine_seq WHERE job = ?", job).Scan(&seq)
	return seq, err
}

// QuarantineSeq is job's quarantine sequence number: the number of the
// last Quarantine of its records committed, 0 before the first. A
// quarantined record's row carries the number of the last Quarantine that
// stored or counted it (InvalidCopiesSince).
func (s *Store) QuarantineSeq(ctx context.Context, job string) (int64, error) {
	var seq int64
	err := s.sql.QueryRowContext(ctx, s.d.Placeholders("SELECT seq FROM sync_quarantine_seq WHERE job = ?"), job).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the quarantine sequence: %w", err)
	}
	return seq, nil
}

// quarantineInsert is Quarantine's upsert of rows (in hash order) with seq.
func (s *Store) quarantineInsert(job, runID string, now time.Time, seq int64, rows []quarantineRow) (string, []any) {
	if s.d == Postgres {
		return quarantinePostgres(job, runID, now, seq, rows)
	}
	var b strings.Builder
	b.WriteString("INSERT INTO quarantined_records (" + quarantineColumns + ") VALUES ")
	args := make([]any, 0, len(rows)*11)
	for i, r := range rows {
		q := r.q
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,1,?,?,?,?,?)")
		id, reason, payload := quarantineValues(q)
		version, updatedAt := copyPlace(q)
		args = append(args, r.hash, job, runID, id, reason, payload, now, now, version, updatedAt, seq)
	}
	b.WriteString(" ON DUPLICATE KEY UPDATE seen_count = seen_count + 1, last_seen = VALUES(last_seen), run_id = VALUES(run_id), seq = VALUES(seq)")
	return b.String(), args
}

// quarantineColumns are the columns Quarantine inserts, in order.
const quarantineColumns = "payload_hash, job, run_id, erp_id, reason, payload, seen_count, first_seen, last_seen, erp_version, erp_updated_at, seq"

// copyPlace are the erp_version and erp_updated_at columns of q: NULL
// where q has none, and for an updated_at outside the years every
// DATETIME holds (the record stays quarantined; its copy is placed by its
// version alone).
func copyPlace(q Quarantined) (version, updatedAt any) {
	if q.Version > 0 {
		version = q.Version
	}
	if y := q.UpdatedAt.UTC().Year(); !q.UpdatedAt.IsZero() && y >= 1000 && y <= 9999 {
		updatedAt = Millis(q.UpdatedAt)
	}
	return version, updatedAt
}

// quarantineValues are the erp_id (nil: none), reason and payload columns
// of q.
func quarantineValues(q Quarantined) (id any, reason string, payload []byte) {
	if q.ErpID != "" {
		id = truncate(strings.ToValidUTF8(q.ErpID, "?"), 255)
	}
	payload = q.Payload
	if payload == nil {
		payload = []byte{} // NOT NULL: an empty payload is still a quarantined record
	}
	return id, truncate(strings.ToValidUTF8(q.Reason, "?"), 1024), payload
}

// quarantinePostgres is Quarantine's upsert on PostgreSQL, of rows in hash
// order. ON CONFLICT DO UPDATE refuses a batch that carries one key twice:
// a payload the batch holds n times is one row with seen_count n (the
// first copy's erp_id and reason), which counts as MySQL's n rows do.
func quarantinePostgres(job, runID string, now time.Time, seq int64, rows []quarantineRow) (string, []any) {
	var b strings.Builder
	b.WriteString("INSERT INTO quarantined_records (" + quarantineColumns + ") VALUES ")
	args := make([]any, 0, len(rows)*11)
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j].hash == rows[i].hash {
			j++
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?,?,?,?,?,?)")
		id, reason, payload := quarantineValues(rows[i].q)
		version, updatedAt := copyPlace(rows[i].q)
		// PostgreSQL's text holds no U+0000: an erp_id or reason with one
		// is kept readable (the payload, bytea, keeps it).
		if text, ok := id.(string); ok {
			id = strings.ReplaceAll(text, "\x00", "?")
		}
		reason = strings.ReplaceAll(reason, "\x00", "?")
		args = append(args, rows[i].hash, job, runID, id, reason, payload, int64(j-i), now, now, version, updatedAt, seq)
		i = j
	}
	b.WriteString(" ON CONFLICT (payload_hash) DO UPDATE SET seen_count = quarantined_records.seen_count + EXCLUDED.seen_count, last_seen = EXCLUDED.last_seen, run_id = EXCLUDED.run_id, seq = EXCLUDED.seq")
	return b.String(), args
}

// InvalidCopy is a quarantined copy of the record of key ErpID, placed
// among its copies by its Version and UpdatedAt (either may be zero, not
// both).
type InvalidCopy struct {
	ErpID     string
	Version   int64
	UpdatedAt time.Time
}

// InvalidCopiesSince returns the quarantined copies of job's records that
// can be placed (those with a version or an updated_at) and that a
// Quarantine numbered above after and up to upto stored or counted.
func (s *Store) InvalidCopiesSince(ctx context.Context, job string, after, upto int64) ([]InvalidCopy, error) {
	rows, err := s.sql.QueryContext(ctx, s.d.Placeholders("SELECT erp_id, erp_version, erp_updated_at FROM quarantined_records WHERE job = ? AND seq > ? AND seq <= ? AND erp_id IS NOT NULL AND (erp_version IS NOT NULL OR erp_updated_at IS NOT NULL)"), job, after, upto)
	if err != nil {
		return nil, fmt.Errorf("read quarantined copies: %w", err)
	}
	defer rows.Close()
	var out []InvalidCopy
	for rows.Next() {
		var (
			c         InvalidCopy
			version   sql.NullInt64
			updatedAt sql.NullTime
		)
		if err := rows.Scan(&c.ErpID, &version, &updatedAt); err != nil {
			return nil, fmt.Errorf("read quarantined copies: %w", err)
		}
		c.Version, c.UpdatedAt = version.Int64, updatedAt.Time
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read quarantined copies: %w", err)
	}
	return out, nil
}

// QuarantineCount returns how many distinct invalid payloads are stored.
func (s *Store) QuarantineCount(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.WithContext(ctx).Raw("SELECT COUNT(*) FROM quarantined_records").Scan(&n).Error; err != nil {
		return 0, fmt.Errorf("count quarantine: %w", err)
	}
	return n, nil
}

// QuarantinedRows returns how many live rows are marked quarantined: their
// record's newest copy in the ERP is invalid, and the row holds its last
// valid data.
func (s *Store) QuarantinedRows(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.WithContext(ctx).Raw("SELECT COUNT(*) FROM " + s.d.ident(s.t.name) + " WHERE quarantined_at IS NOT NULL AND deleted_at IS NULL").Scan(&n).Error; err != nil {
		return 0, fmt.Errorf("count quarantined rows: %w", err)
	}
	return n, nil
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}
