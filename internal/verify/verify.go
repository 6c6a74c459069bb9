// Package verify compares the whole ERP feed with the memberships table and
// says which records are missing, stale (an older version, or fields that
// differ at the same version) or unknown (a row the feed does not have).
package verify

import (
	"context"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
)

// Result is what Verify found.
type Result struct {
	FeedRecords int64     `json:"feed_records"`
	FeedInvalid int64     `json:"feed_invalid"`
	Rows        int64     `json:"rows"`
	Matching    int64     `json:"matching"`
	Missing     Sample    `json:"missing"`
	Stale       Sample    `json:"stale"`
	Unknown     Sample    `json:"unknown"`
	Ahead       Sample    `json:"ahead"` // a row at a higher version than the feed serves
	Started     time.Time `json:"started_at"`
	Duration    float64   `json:"duration_seconds"`
}

// OK reports whether the database matches the feed.
func (r *Result) OK() bool {
	return r.Missing.Count == 0 && r.Stale.Count == 0 && r.Unknown.Count == 0 && r.Ahead.Count == 0
}

// Sample counts records of one kind and keeps the first few erp_ids.
type Sample struct {
	Count int64    `json:"count"`
	IDs   []string `json:"ids,omitempty"`
}

const sampleSize = 20

func (s *Sample) add(id string) {
	s.Count++
	if len(s.IDs) < sampleSize {
		s.IDs = append(s.IDs, id)
	}
}

type want struct {
	version int64
	sum     uint64
	seen    bool // matched by a row
}

var seed = maphash.MakeSeed()

// fieldsSum hashes the fields a row copies from the feed.
func fieldsSum(id, member, product, status string, starts time.Time, ends *time.Time, updated time.Time) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	for _, s := range []string{id, member, product, status} {
		h.WriteString(s)
		h.WriteByte(0)
	}
	fmt.Fprint(&h, starts.UTC().UnixMilli(), updated.UTC().UnixMilli())
	if ends != nil {
		fmt.Fprint(&h, ends.UTC().UnixMilli())
	}
	return h.Sum64()
}

// Pager is what Verify needs of an ERP feed: its pages, in order.
type Pager interface {
	Page(ctx context.Context, q erp.Query) (*erp.Page, error)
}

// Verify pages the whole feed (highest version per erp_id wins) and compares
// it with every row of memberships.
func Verify(ctx context.Context, e Pager, st *store.Store, pageSize int) (*Result, error) {
	res := &Result{Started: time.Now().UTC()}
	feed := map[string]*want{}
	q := erp.Query{Limit: pageSize}
	for {
		p, err := e.Page(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("page the feed: %w", err)
		}
		res.FeedInvalid += int64(len(p.Invalid))
		for _, r := range p.Records {
			w := feed[r.ErpID]
			if w != nil && w.version >= r.Version {
				continue
			}
			if w == nil {
				w = &want{}
				feed[r.ErpID] = w
			}
			w.version = r.Version
			w.sum = fieldsSum(r.ErpID, r.MemberID, r.ProductCode, r.Status, r.StartsAt, r.EndsAt, r.UpdatedAt)
		}
		if p.NextCursor == "" {
			break
		}
		q.Cursor = p.NextCursor
	}
	res.FeedRecords = int64(len(feed))

	rows, err := st.DB().WithContext(ctx).Raw("SELECT erp_id, member_id, product_code, status, starts_at, ends_at, erp_version, erp_updated_at FROM memberships").Rows()
	if err != nil {
		return nil, fmt.Errorf("read memberships: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, member, product, status string
		var starts, updated time.Time
		var ends *time.Time
		var version int64
		if err := rows.Scan(&id, &member, &product, &status, &starts, &ends, &version, &updated); err != nil {
			return nil, fmt.Errorf("read memberships: %w", err)
		}
		res.Rows++
		w := feed[id]
		switch {
		case w == nil:
			res.Unknown.add(id)
		case version < w.version:
			w.seen = true
			res.Stale.add(id)
		case version > w.version:
			w.seen = true
			res.Ahead.add(id)
		case fieldsSum(id, member, product, status, starts, ends, updated) != w.sum:
			w.seen = true
			res.Stale.add(id)
		default:
			w.seen = true
			res.Matching++
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read memberships: %w", err)
	}
	for id, w := range feed {
		if !w.seen {
			res.Missing.add(id)
		}
	}
	res.Duration = time.Since(res.Started).Seconds()
	return res, nil
}
