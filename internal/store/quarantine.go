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
	type row struct {
		hash string
		q    Quarantined
	}
	rows := make([]row, len(qs))
	for i, q := range qs {
		sum := sha256.Sum256(q.Payload)
		rows[i] = row{hex.EncodeToString(sum[:]), q}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].hash < rows[j].hash })
	var b strings.Builder
	b.WriteString("INSERT INTO quarantined_records (payload_hash, job, run_id, erp_id, reason, payload, seen_count, first_seen, last_seen) VALUES ")
	args := make([]any, 0, len(qs)*8)
	for i, r := range rows {
		q := r.q
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,1,?,?)")
		var id any
		if q.ErpID != "" {
			id = truncate(strings.ToValidUTF8(q.ErpID, "?"), 255)
		}
		payload := q.Payload
		if payload == nil {
			payload = []byte{} // NOT NULL: an empty payload is still a quarantined record
		}
		args = append(args, r.hash, job, runID, id, truncate(strings.ToValidUTF8(q.Reason, "?"), 1024), payload, now, now)
	}
	b.WriteString(" ON DUPLICATE KEY UPDATE seen_count = seen_count + 1, last_seen = VALUES(last_seen), run_id = VALUES(run_id)")
	if _, err := s.execRetrying(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("quarantine %d records: %w", len(qs), err)
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
	if err := s.db.WithContext(ctx).Raw("SELECT COUNT(*) FROM " + quoteIdent(s.t.name) + " WHERE quarantined_at IS NOT NULL AND deleted_at IS NULL").Scan(&n).Error; err != nil {
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
