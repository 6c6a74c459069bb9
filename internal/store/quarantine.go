package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
	var b strings.Builder
	b.WriteString("INSERT INTO quarantined_records (payload_hash, job, run_id, erp_id, reason, payload, seen_count, first_seen, last_seen) VALUES ")
	args := make([]any, 0, len(qs)*8)
	for i, q := range qs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,1,?,?)")
		sum := sha256.Sum256(q.Payload)
		var id any
		if q.ErpID != "" {
			id = truncate(strings.ToValidUTF8(q.ErpID, "?"), 255)
		}
		args = append(args, hex.EncodeToString(sum[:]), job, runID, id, truncate(strings.ToValidUTF8(q.Reason, "?"), 1024), q.Payload, now, now)
	}
	b.WriteString(" ON DUPLICATE KEY UPDATE seen_count = seen_count + 1, last_seen = VALUES(last_seen), run_id = VALUES(run_id)")
	if err := s.db.WithContext(ctx).Exec(b.String(), args...).Error; err != nil {
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

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}
