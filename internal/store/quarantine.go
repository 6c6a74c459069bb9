package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Quarantined is an invalid record from the feed.
type Quarantined struct {
	ErpID   string // as served; may itself be what is invalid
	Reason  string
	Payload []byte
}

// quarantineRow is a record to quarantine and its payload's hash.
type quarantineRow struct {
	hash string
	q    Quarantined
}

// Quarantine stores invalid records with their reason and raw payload. A
// payload already quarantined is counted again, not stored twice.
func (s *Store) Quarantine(ctx context.Context, job, runID string, qs []Quarantined) error {
	if len(qs) == 0 {
		return nil
	}
	now := time.Now().UTC()
	// Several instances quarantine the same replayed payloads at once, and
	// concurrent upserts on one unique index can deadlock in InnoDB: write
	// in hash order, and retry a deadlock or a lock wait timeout.
	rows := make([]quarantineRow, len(qs))
	for i, q := range qs {
		sum := sha256.Sum256(q.Payload)
		rows[i] = quarantineRow{hex.EncodeToString(sum[:]), q}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].hash < rows[j].hash })
	if s.d == Postgres {
		return s.quarantinePostgres(ctx, job, runID, now, len(qs), rows)
	}
	var b strings.Builder
	b.WriteString("INSERT INTO quarantined_records (payload_hash, job, run_id, erp_id, reason, payload, seen_count, first_seen, last_seen) VALUES ")
	args := make([]any, 0, len(qs)*8)
	for i, r := range rows {
		q := r.q
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,1,?,?)")
		id, reason, payload := quarantineValues(q)
		args = append(args, r.hash, job, runID, id, reason, payload, now, now)
	}
	b.WriteString(" ON DUPLICATE KEY UPDATE seen_count = seen_count + 1, last_seen = VALUES(last_seen), run_id = VALUES(run_id)")
	if _, err := s.execRetrying(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("quarantine %d records: %w", len(qs), err)
	}
	return nil
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
func (s *Store) quarantinePostgres(ctx context.Context, job, runID string, now time.Time, n int, rows []quarantineRow) error {
	var b strings.Builder
	b.WriteString("INSERT INTO quarantined_records (payload_hash, job, run_id, erp_id, reason, payload, seen_count, first_seen, last_seen) VALUES ")
	args := make([]any, 0, len(rows)*9)
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j].hash == rows[i].hash {
			j++
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?,?,?)")
		id, reason, payload := quarantineValues(rows[i].q)
		// PostgreSQL's text holds no U+0000: an erp_id or reason with one
		// is kept readable (the payload, bytea, keeps it).
		if text, ok := id.(string); ok {
			id = strings.ReplaceAll(text, "\x00", "?")
		}
		reason = strings.ReplaceAll(reason, "\x00", "?")
		args = append(args, rows[i].hash, job, runID, id, reason, payload, int64(j-i), now, now)
		i = j
	}
	b.WriteString(" ON CONFLICT (payload_hash) DO UPDATE SET seen_count = quarantined_records.seen_count + EXCLUDED.seen_count, last_seen = EXCLUDED.last_seen, run_id = EXCLUDED.run_id")
	if _, err := s.execRetrying(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("quarantine %d records: %w", n, err)
	}
	return nil
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
