// Package verify compares the whole ERP feed with an entity's table and
// says which records are missing, stale (an older version, or fields that
// differ at the same version), unknown (a row the feed does not have) or
// quarantined (a row whose record's newest copy in the feed is invalid).
package verify

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
)

// Result is what Verify found. A soft-deleted row counts as absent: a
// record of the feed whose row is soft-deleted is missing, and a
// soft-deleted row the feed lacks is as it should be.
type Result struct {
	FeedRecords int64 `json:"feed_records"`
	// FeedInvalid counts the records whose newest copy in the feed is
	// invalid or unstorable, and the invalid items whose record cannot be
	// told (no erp_id): an invalid copy that a newer valid one of its
	// record supersedes (a replay of an old copy) is no finding.
	FeedInvalid int64  `json:"feed_invalid"`
	Rows        int64  `json:"rows"`         // live rows
	SoftDeleted int64  `json:"soft_deleted"` // soft-deleted rows
	Matching    int64  `json:"matching"`
	Missing     Sample `json:"missing"`
	Stale       Sample `json:"stale"`
	Unknown     Sample `json:"unknown"`
	Ahead       Sample `json:"ahead"` // a row at a higher version than the feed serves
	// Quarantined counts the live rows whose record's newest copy is
	// invalid: marked (quarantined_at), or to be marked by the next run or
	// reconcile. Such a row holds its last valid data, not the ERP's.
	Quarantined Sample `json:"quarantined"`
	// LinesMissing, LinesExtra and LinesStale compare the lines of the
	// documents whose header matches the feed (an entity with children),
	// line by line: a line the feed serves that the table lacks, one the
	// table holds that the feed does not, one whose values differ. Each
	// is named "<key> <child>[<line key>]"; its document counts as stale.
	LinesMissing Sample    `json:"lines_missing"`
	LinesExtra   Sample    `json:"lines_extra"`
	LinesStale   Sample    `json:"lines_stale"`
	Started      time.Time `json:"started_at"`
	Duration     float64   `json:"duration_seconds"`
	// items counts every invalid item the feed served (Fetched).
	items int64
}

// Fetched is the number of items the scan read: valid records, one per
// erp_id, and every invalid item.
func (r *Result) Fetched() int64 { return r.FeedRecords + r.items }

// OK reports whether the database matches the feed.
func (r *Result) OK() bool {
	return r.Missing.Count == 0 && r.Stale.Count == 0 && r.Unknown.Count == 0 && r.Ahead.Count == 0 && r.Quarantined.Count == 0 &&
		r.LinesMissing.Count == 0 && r.LinesExtra.Count == 0 && r.LinesStale.Count == 0
}

// Sample counts records of one kind and keeps the first few erp_ids.
type Sample struct {
	Count int64    `json:"count"`
	IDs   []string `json:"ids,omitempty"`
}

const sampleSize = 20

// Add counts id and keeps it while the sample has room.
func (s *Sample) Add(id string) {
	s.Count++
	if len(s.IDs) < sampleSize {
		s.IDs = append(s.IDs, id)
	}
}

type want struct {
	version int64
	updated time.Time // the copy's updated_at
	// sum and rounded hash the fields a row copies from the feed, with
	// the times as erpsync stores them, and rounded to the millisecond as
	// MySQL 8 stored values sent with more digits (store.StoredForms).
	sum, rounded uint64
	seen         bool        // matched by a live row
	rec          *erp.Record // the record, when the scan keeps them
	// children are the record's lines, one entity.Lines per child of its
	// entity (nil without children).
	children []entity.Lines
}

var seed = maphash.MakeSeed()

// valsSum hashes the values a row copies from the feed and its updated_at,
// with form (one of store.StoredForms) applied to each time. Each field of
// an entity.Value is used by one kind only (S, I or T), so the hash needs
// no kinds.
func valsSum(vals []entity.Value, updated time.Time, form int) uint64 {
	ms := func(t time.Time) int64 {
		tr, ro := store.StoredForms(t)
		if form == 0 {
			return tr.UnixMilli()
		}
		return ro.UnixMilli()
	}
	// A column's value is stored whole: a datetime(P) keeps its P digits,
	// and the decoder refuses a value with more. Form 1 is a DATETIME(3)
	// that MySQL 8 rounded.
	us := func(t time.Time) int64 {
		if form == 0 {
			return t.Truncate(time.Microsecond).UnixMicro()
		}
		return ms(t) * 1000
	}
	var h maphash.Hash
	h.SetSeed(seed)
	var b [8]byte
	for _, v := range vals {
		if v.Null {
			h.WriteByte(1)
			continue
		}
		h.WriteByte(0)
		h.WriteString(v.S)
		h.WriteByte(0)
		binary.LittleEndian.PutUint64(b[:], uint64(v.I))
		h.Write(b[:])
		if !v.T.IsZero() {
			binary.LittleEndian.PutUint64(b[:], uint64(us(v.T)))
			h.Write(b[:])
		}
	}
	binary.LittleEndian.PutUint64(b[:], uint64(ms(updated)))
	h.Write(b[:])
	return h.Sum64()
}

// valuesOf returns the values of a record as its row holds them: a typed
// record's own, a membership's from its fields.
func valuesOf(r *erp.Record, buf []entity.Value) []entity.Value {
	if r.Vals != nil {
		return r.Vals
	}
	return store.MembershipRow(store.Membership{ErpID: r.ErpID, MemberID: r.MemberID, ProductCode: r.ProductCode,
		Status: r.Status, StartsAt: r.StartsAt, EndsAt: r.EndsAt}, buf[:store.MembershipColumns]).Vals
}

// Pager is what Verify needs of an ERP feed: its pages, in order.
type Pager interface {
	Page(ctx context.Context, q erp.Query) (*erp.Page, error)
}

// Feed is the whole ERP feed as one scan saw it: the highest version of
// each erp_id, and the records themselves when Scan keeps them.
type Feed struct {
	mu      sync.Mutex // guards what add writes: the parts of a scan add at once
	started time.Time
	// items counts every invalid item served; invalid the findings of
	// Result.FeedInvalid.
	items, invalid int64
	byID           map[string]*want
	// quarantined holds the newest invalid or unstorable copy of each
	// erp_id served so (erp.Invalid.NewerThan), with its payload when the
	// scan keeps records (a reconcile stores the copies): the ERP still
	// has these records, so a row of one is never absent, and a row older
	// than such a copy is not current.
	quarantined map[string]erp.Invalid
	// noNUL says the table's database cannot store U+0000 in text
	// (PostgreSQL): a record with one is quarantined, as a run does.
	noNUL bool
	// base, when not nil, is an earlier scan's feed: the records kept are
	// only those newer than its copy (ScanNewer).
	base *Feed
}

// Records is the number of distinct erp_ids of valid records the scan saw.
func (f *Feed) Records() int64 { return int64(len(f.byID)) }

// Kept returns the records the scan kept, by erp_id: every valid record's
// highest version (a Scan with keep), or those newer than the base feed's
// (ScanNewer).
func (f *Feed) Kept() []erp.Record {
	var recs []erp.Record
	for _, id := range slices.Sorted(maps.Keys(f.byID)) {
		if w := f.byID[id]; w.rec != nil {
			recs = append(recs, *w.rec)
		}
	}
	return recs
}

// Has reports whether the feed holds erp_id.
func (f *Feed) Has(erpID string) bool { return f.byID[erpID] != nil }

// Invalid returns the newest invalid or unstorable copy of each erp_id the
// feed served, with its payload when the scan kept records.
func (f *Feed) Invalid() []erp.Invalid {
	out := make([]erp.Invalid, 0, len(f.quarantined))
	for _, inv := range f.quarantined {
		out = append(out, inv)
	}
	return out
}

// Quarantined reports whether the feed served an invalid or unstorable
// item of erp_id: the ERP still has the record.
func (f *Feed) Quarantined(erpID string) bool {
	_, ok := f.quarantined[erpID]
	return ok
}

// scan pages q's window to its end into f. It returns the newest
// updated_at it saw. count says the invalid items it sees count in
// Result.FeedInvalid (not when another pass counts them).
func (f *Feed) scan(ctx context.Context, e Pager, q erp.Query, keep, count bool) (time.Time, error) {
	var pass erp.Pass
	var newest time.Time
	for {
		p, err := e.Page(ctx, q)
		if err != nil {
			return newest, fmt.Errorf("page the feed: %w", err)
		}
		if err := pass.Next(p.NextCursor); err != nil {
			return newest, err
		}
		if t := f.add(p, keep, count); t.After(newest) {
			newest = t
		}
		if p.NextCursor == "" {
			return newest, nil
		}
		q.Cursor = p.NextCursor
	}
}

// dropSuperseded forgets the invalid copies that a valid copy of their
// record as new or newer supersedes (the ERP's newest copy is valid: a
// replay of an old invalid one tells nothing), and counts the others.
// Superseded is what would not mark a row holding that valid copy
// (store.Current.Marks): an invalid copy without a version is newer when
// it is later, whatever the valid copy's version, so a replay of an old
// valid copy in the same scan does not hide it.
func (f *Feed) dropSuperseded() {
	for id, inv := range f.quarantined {
		if w := f.byID[id]; w != nil && !(store.Current{Version: w.version, UpdatedAt: w.updated}).Marks(inv.Version, inv.UpdatedAt) {
			delete(f.quarantined, id)
			continue
		}
		f.invalid++
	}
}

// add takes the records of a page into f and returns the newest
// updated_at of its valid records.
func (f *Feed) add(p *erp.Page, keep, count bool) time.Time {
	// As a run does: a record the table cannot store is quarantined.
	p.Records, p.Invalid = erp.SplitUnstorableIn(p.Records, p.Invalid, f.noNUL)
	// The hashes are of the page alone: each fetcher makes its own before
	// it takes the lock.
	var buf [store.MembershipColumns]entity.Value
	sums := make([][2]uint64, len(p.Records))
	for i := range p.Records {
		r := &p.Records[i]
		vals := valuesOf(r, buf[:])
		sums[i] = [2]uint64{valsSum(vals, r.UpdatedAt, 0), valsSum(vals, r.UpdatedAt, 1)}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var newest time.Time
	for _, inv := range p.Invalid {
		if count {
			f.items++
			if inv.ErpID == "" {
				f.invalid++
			}
		}
		if old, ok := f.quarantined[inv.ErpID]; inv.ErpID != "" && (!ok || inv.NewerThan(old)) {
			if !keep {
				inv.Raw = nil
			}
			f.quarantined[inv.ErpID] = inv
		}
	}
	for i, r := range p.Records {
		if r.UpdatedAt.After(newest) {
			newest = r.UpdatedAt
		}
		w := f.byID[r.ErpID]
		if w != nil && w.version >= r.Version {
			continue
		}
		if w == nil {
			w = &want{}
			f.byID[r.ErpID] = w
		}
		w.version, w.updated = r.Version, r.UpdatedAt
		w.sum, w.rounded = sums[i][0], sums[i][1]
		w.children = r.Children
		if keep {
			w.rec = &p.Records[i]
			if f.base != nil {
				if b := f.base.byID[r.ErpID]; b != nil && b.version >= r.Version {
					w.rec = nil
				}
			}
		}
	}
	return newest
}

// Row is what CompareSnapshot reads of a row it lists.
type Row struct {
	ErpID   string
	Version int64
	Fence   int64
	Written time.Time // the row's updated_at: when erpsync last wrote it, by the database's clock
}

// Diff is what a repair of the table needs: the live rows the feed lacks,
// and the feed's records whose row is absent, soft-deleted or stale. The
// record lists are filled only by a Scan that kept the records.
type Diff struct {
	Absent  []Row        // live rows whose erp_id the feed lacks, as a record and as a quarantined item
	Missing []erp.Record // no row
	Restore []erp.Record // a soft-deleted row
	Stale   []erp.Record // a live row at an older version
	// Repair are the records whose live row holds their version and
	// whose fields or lines differ from theirs (store.Repair): a change
	// made without a new version, which no write of a run takes.
	Repair []erp.Record
}

// Verify pages the whole feed (highest version per key wins) and compares
// it with every row of the store's table.
func Verify(ctx context.Context, e Pager, st *store.Store, pageSize int) (*Result, error) {
	return VerifyParts(ctx, e, st, pageSize, 1)
}

// VerifyParts is Verify with the feed scanned in parts, up to fetchers at
// once (ScanParts), and the table read meanwhile (ScanReading).
func VerifyParts(ctx context.Context, e Pager, st *store.Store, pageSize, fetchers int) (*Result, error) {
	f, snap, err := ScanReading(ctx, e, st, pageSize, fetchers, false)
	if err != nil {
		return nil, err
	}
	res, _, err := f.compare(ctx, st, snap.each)
	return res, err
}

// Snapshot is what a read of the table made while the feed was paged kept
// of each row (tableRow).
type Snapshot struct{ rows []tableRow }

func (s *Snapshot) each(fn func(*tableRow)) error {
	for i := range s.rows {
		fn(&s.rows[i])
	}
	return nil
}

// ScanReading is ScanParts with the store's table read while the feed is
// paged, not after it.
func ScanReading(ctx context.Context, e Pager, st *store.Store, pageSize, fetchers int, keep bool) (*Feed, *Snapshot, error) {
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	snap := &Snapshot{}
	read := make(chan error, 1)
	go func() {
		read <- st.ScanRows(tctx, func(r *store.Stored) error {
			snap.rows = append(snap.rows, tableRowOf(r))
			return nil
		})
	}()
	f, err := ScanParts(ctx, e, st.Dialect(), pageSize, fetchers, keep)
	if err != nil {
		cancel()
		<-read
		return nil, nil, err
	}
	if err := <-read; err != nil {
		return nil, nil, err
	}
	return f, snap, nil
}

// tableRow is what a comparison needs of a row: its key and guards, and the sum
// of its values (valsSum) in place of them.
type tableRow struct {
	key                  string
	version, fence, mark int64
	updated, written     time.Time
	markAt               time.Time // quarantined_updated_at
	deleted              bool
	sum                  uint64
}

func tableRowOf(r *store.Stored) tableRow {
	return tableRow{key: r.Key, version: r.Version, fence: r.Fence, mark: r.Mark, updated: r.UpdatedAt,
		markAt: r.MarkAt, written: r.Written, deleted: r.Deleted, sum: valsSum(r.Vals, r.UpdatedAt, 0)}
}

// CompareSnapshot compares the feed with the rows of snap, then reads
// again the rows of every key that comparison found different and
// compares those anew. A row written while the feed was paged may have
// been read before its write, so the Diff is what a comparison made once
// the scan was done makes of each of its keys; the Result counts
// the snapshot's rows. It may be called once per Feed.
func (f *Feed) CompareSnapshot(ctx context.Context, st *store.Store, snap *Snapshot) (*Result, *Diff, error) {
	res, diff, err := f.compare(ctx, st, snap.each)
	if err != nil {
		return nil, nil, err
	}
	keys := diff.keys()
	if len(keys) == 0 {
		return res, diff, nil
	}
	again := &Feed{started: f.started, byID: make(map[string]*want, len(keys)), quarantined: f.quarantined, noNUL: f.noNUL}
	for _, k := range keys {
		if w := f.byID[k]; w != nil {
			c := *w
			c.seen = false
			again.byID[k] = &c
		}
	}
	_, diff, err = again.compare(ctx, st, func(fn func(*tableRow)) error {
		return st.ScanRowsOf(ctx, keys, func(r *store.Stored) error {
			row := tableRowOf(r)
			fn(&row)
			return nil
		})
	})
	if err != nil {
		return nil, nil, err
	}
	diff.sort()
	return res, diff, nil
}

// sort orders each list of d by erp_id, the order in which the scan
// reads the table: the rows read again come in the database's own order,
// which PostgreSQL does not keep from one read to the next, and the first
// erp_ids of a list are the examples a reconcile shows.
func (d *Diff) sort() {
	slices.SortFunc(d.Absent, func(a, b Row) int { return strings.Compare(a.ErpID, b.ErpID) })
	for _, recs := range [][]erp.Record{d.Missing, d.Restore, d.Stale, d.Repair} {
		slices.SortFunc(recs, func(a, b erp.Record) int { return strings.Compare(a.ErpID, b.ErpID) })
	}
}

// keys returns the erp_ids that d lists.
func (d *Diff) keys() []string {
	keys := make([]string, 0, len(d.Absent)+len(d.Missing)+len(d.Restore)+len(d.Stale)+len(d.Repair))
	for _, r := range d.Absent {
		keys = append(keys, r.ErpID)
	}
	for _, recs := range [][]erp.Record{d.Missing, d.Restore, d.Stale, d.Repair} {
		for _, r := range recs {
			keys = append(keys, r.ErpID)
		}
	}
	return keys
}

// compare compares the feed with the rows that scan passes to its
// function.
func (f *Feed) compare(ctx context.Context, st *store.Store, scan func(func(*tableRow)) error) (*Result, *Diff, error) {
	res := &Result{Started: f.started, FeedRecords: f.Records(), FeedInvalid: f.invalid, items: f.items}
	diff := &Diff{}
	stale := func(id string, w *want, same bool) {
		res.Stale.Add(id)
		switch {
		case w.rec == nil:
		case same:
			diff.Repair = append(diff.Repair, *w.rec)
		default:
			diff.Stale = append(diff.Stale, *w.rec)
		}
	}
	var restore []string // keys of the feed whose row is soft-deleted
	// matched holds the documents whose header matches, whose lines are
	// compared next (an entity with children).
	var matched map[string]*want
	if len(st.Table().Entity().Children) > 0 {
		matched = map[string]*want{}
	}
	err := scan(func(row *tableRow) {
		id, version := row.key, row.version
		w := f.byID[id]
		if row.deleted {
			res.SoftDeleted++
			if w != nil {
				restore = append(restore, id) // missing, below
			}
			return
		}
		res.Rows++
		inv, invalid := f.quarantined[id]
		marked := row.mark > 0
		if cur := (store.Current{Version: version, UpdatedAt: row.updated, Mark: row.mark, MarkAt: row.markAt}); invalid && cur.Marks(inv.Version, inv.UpdatedAt) {
			marked = true // the next run or reconcile marks it
		}
		if marked {
			res.Quarantined.Add(id)
		}
		switch {
		case w == nil && !invalid:
			res.Unknown.Add(id)
			diff.Absent = append(diff.Absent, Row{ErpID: id, Version: version, Fence: row.fence, Written: row.written})
		case w == nil:
			if !marked {
				res.Unknown.Add(id) // the feed has only an older invalid copy
			}
		case version < w.version:
			w.seen = true
			stale(id, w, false)
		case version > w.version:
			w.seen = true
			res.Ahead.Add(id)
		case row.sum != w.sum && row.sum != w.rounded:
			w.seen = true
			stale(id, w, true)
		default:
			w.seen = true
			res.Matching++
			if matched != nil {
				matched[id] = w
			}
		}
	})
	if err != nil {
		return nil, nil, err
	}
	if matched != nil {
		differ, err := f.compareLines(ctx, st, res, matched)
		if err != nil {
			return nil, nil, err
		}
		for _, id := range differ {
			res.Matching--
			res.Stale.Add(id)
			if w := matched[id]; w.rec != nil {
				diff.Repair = append(diff.Repair, *w.rec)
			}
		}
	}
	for _, id := range restore {
		w := f.byID[id]
		w.seen = true
		res.Missing.Add(id)
		if w.rec != nil {
			diff.Restore = append(diff.Restore, *w.rec)
		}
	}
	for id, w := range f.byID {
		if !w.seen {
			res.Missing.Add(id)
			if w.rec != nil {
				diff.Missing = append(diff.Missing, *w.rec)
			}
		}
	}
	res.Duration = time.Since(res.Started).Seconds()
	return res, diff, nil
}
