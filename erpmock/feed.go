package erpmock

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Page sizes, per the spec.
const (
	defaultLimit = 500
	maxLimit     = 1000
)

// window is the filter of both API endpoints, in Unix milliseconds:
// since <= updated_at < until.
type window struct {
	since, until int64
	// tenant is 1 + the index in Options.Tenants of the tenant asked; 0:
	// every record, -1: a tenant not listed, none.
	tenant int
}

// inTenant tells whether record idx belongs to the tenant of w.
func (m *Mock) inTenant(w window, idx int32) bool {
	return w.tenant == 0 || w.tenant > 0 && int(idx)%len(m.tenants) == w.tenant-1
}

// tenantOf sets the tenant of w from the query parameter tenant, when
// the mock has tenants.
func (m *Mock) tenantOf(w *window, v url.Values) {
	t, ok := v["tenant"]
	if len(m.tenants) == 0 || !ok {
		return
	}
	w.tenant = -1
	if i := slices.Index(m.tenants, t[0]); i >= 0 && len(t) == 1 {
		w.tenant = i + 1
	}
}

// pageQuery is a parsed GET /api/v1/memberships.
type pageQuery struct {
	window
	after  *entry // cursor: the last entry of the previous page
	offset int    // live records to skip first
	limit  int
}

// served is one item of a page: a record and its index.
type served struct {
	idx int32
	r   rec
}

// parseWindow reads updated_since and updated_until.
func parseWindow(v url.Values) (window, error) {
	return parseBounds(v, "updated_since", "updated_until")
}

// parseBounds reads a window from the query parameters sinceName
// (inclusive) and untilName (exclusive).
func parseBounds(v url.Values, sinceName, untilName string) (window, error) {
	w := window{since: math.MinInt64, until: math.MaxInt64}
	var err error
	if s, ok, e := single(v, sinceName); e != nil {
		return w, e
	} else if ok {
		if w.since, err = ceilMillis(s); err != nil {
			return w, fmt.Errorf("%s: %w", sinceName, err)
		}
	}
	if s, ok, e := single(v, untilName); e != nil {
		return w, e
	} else if ok {
		if w.until, err = ceilMillis(s); err != nil {
			return w, fmt.Errorf("%s: %w", untilName, err)
		}
	}
	return w, nil
}

// parsePageQuery reads the query of a page request.
func parsePageQuery(v url.Values) (pageQuery, error) {
	w, err := parseWindow(v)
	if err != nil {
		return pageQuery{}, err
	}
	q := pageQuery{window: w}
	if q.limit, err = parseLimit(v, defaultLimit); err != nil {
		return q, err
	}
	if s, ok, err := single(v, "cursor"); err != nil {
		return q, err
	} else if ok && s != "" {
		e, err := decodeCursor(s)
		if err != nil {
			return q, err
		}
		q.after = &e
	}
	return q, nil
}

// parseLimit reads limit, def when absent.
func parseLimit(v url.Values, def int) (int, error) {
	s, ok, err := single(v, "limit")
	if err != nil || !ok {
		return def, err
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxLimit {
		return def, fmt.Errorf("limit %q: want an integer in [1, %d]", s, maxLimit)
	}
	return n, nil
}

// single returns the one value of the query parameter name.
func single(v url.Values, name string) (string, bool, error) {
	vs, ok := v[name]
	switch {
	case !ok:
		return "", false, nil
	case len(vs) > 1:
		return "", false, fmt.Errorf("%s: given %d times", name, len(vs))
	case vs[0] == "" && name != "cursor":
		return "", false, fmt.Errorf("%s: empty", name)
	}
	return vs[0], true, nil
}

// ceilMillis parses an RFC 3339 time and rounds it up to whole
// milliseconds, which keeps both bounds exact against millisecond
// updated_at values: ua >= t iff ua >= ceil(t), and likewise for <.
func ceilMillis(s string) (int64, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, errors.New("not an RFC 3339 date-time")
	}
	v := t.UnixMilli()
	if t.After(time.UnixMilli(v)) {
		v++
	}
	return v, nil
}

// cursor is the JSON inside the opaque cursor: the keyset of the last
// record of a page.
type cursor struct {
	UpdatedAt int64  `json:"u"`
	ErpID     string `json:"id"`
}

var errCursor = errors.New("cursor: not one this server issued")

func (m *Mock) encodeCursor(e entry) string {
	b, _ := json.Marshal(cursor{UpdatedAt: e.ua, ErpID: m.erpID(e.idx)})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (entry, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return entry{}, errCursor
	}
	var c cursor
	if err := json.Unmarshal(b, &c); err != nil || !strings.HasPrefix(c.ErpID, "M") {
		return entry{}, errCursor
	}
	n, err := strconv.ParseUint(c.ErpID[1:], 10, 31)
	if err != nil || n == 0 {
		return entry{}, errCursor
	}
	return entry{ua: c.UpdatedAt, idx: int32(n - 1)}, nil
}

// page reads one page: up to q.limit live records after the cursor and
// the first q.offset live records, and whether more follow inside the
// window.
func (m *Mock) page(q pageQuery) (items []served, more bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	i := m.lowerBound(q.since)
	if q.after != nil {
		j, found := slices.BinarySearchFunc(m.order, *q.after, compareEntry)
		if found {
			j++
		}
		i = max(i, j)
	}
	items = make([]served, 0, min(q.limit, len(m.order)-i))
	skip := q.offset
	for ; i < len(m.order); i++ {
		e := m.order[i]
		if e.ua >= q.until {
			return items, false
		}
		r := m.recs[e.idx]
		if !m.live(e) || !m.inTenant(q.window, e.idx) {
			continue // the record has moved on, is deleted or another tenant's
		}
		if skip > 0 {
			skip--
			continue
		}
		if len(items) == q.limit {
			return items, true
		}
		items = append(items, served{idx: e.idx, r: r})
	}
	return items, false
}

// count counts the live records inside w.
func (m *Mock) count(w window) int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	lo, hi := m.lowerBound(w.since), m.lowerBound(w.until)
	if hi <= lo {
		return 0
	}
	if m.stale == 0 && w.tenant == 0 {
		return int64(hi - lo)
	}
	var n int64
	for _, e := range m.order[lo:hi] {
		if m.live(e) && m.inTenant(w, e.idx) {
			n++
		}
	}
	return n
}

// lowerBound returns the position of the first entry with updated_at >= ua;
// m.mu is held.
func (m *Mock) lowerBound(ua int64) int {
	i, _ := slices.BinarySearchFunc(m.order, entry{ua: ua, idx: -1}, compareEntry)
	return i
}

// staleCopy returns an older version of the valid record s, with other
// field values and an older updated_at, or false when s has no older
// version.
func (m *Mock) staleCopy(s served) (served, bool) {
	if s.r.invalid != flawNone || s.r.version < 2 {
		return s, false
	}
	back := 1 + int64(m.intN(int(min(s.r.version-1, 1<<20))))
	s.r.version -= back
	s.r.ua -= back * 1000
	s.r.status = (s.r.status + 1) % uint8(len(statuses))
	s.r.product = (s.r.product + 1) % uint8(len(products))
	return s, true
}

// appendPage appends the JSON body of a page.
func (m *Mock) appendPage(b []byte, items []served, next string) []byte {
	b = m.appendItems(append(b, `{"data":[`...), &specFormat, items)
	b = appendStringOrNull(append(b, `],"next_cursor":`...), next)
	return append(b, "}\n"...)
}

// appendItems appends items in format f, comma-separated.
func (m *Mock) appendItems(b []byte, f *itemFormat, items []served) []byte {
	for k, s := range items {
		if k > 0 {
			b = append(b, ',')
		}
		b = m.appendItemAs(b, f, s.idx, s.r)
	}
	return b
}

// appendStringOrNull appends s as a JSON string, or null when empty.
func appendStringOrNull(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendJSONString(b, s)
}

// itemFormat spells a face's item: the JSON text before each value, the
// status values and the invalid one.
type itemFormat struct {
	open, member, product, status, starts, ends string
	version                                     string // "" leaves the version out
	updated                                     string
	statuses                                    *[4]string
	pending                                     string
}

// specFormat is the item format of the spec.
var specFormat = itemFormat{
	open: `{"erp_id":"`, member: `,"member_id":"`, product: `,"product_code":"`, status: `","status":"`,
	starts: `","starts_at":"`, ends: `","ends_at":`, version: `,"version":`, updated: `,"updated_at":"`,
	statuses: &statuses, pending: "PENDING",
}

// appendItem appends record idx as a JSON object, with its flaw if it has
// one.
func (m *Mock) appendItem(b []byte, idx int32, r rec) []byte {
	return m.appendItemAs(b, &specFormat, idx, r)
}

// appendItemAs appends record idx as an item of format f. A format
// without a version serves a record whose flaw is in its version with an
// invalid start date instead.
func (m *Mock) appendItemAs(b []byte, f *itemFormat, idx int32, r rec) []byte {
	if f.version == "" && (r.invalid == flawVersionZero || r.invalid == flawVersionString) {
		r.invalid = flawDate
	}
	b = append(b, f.open...)
	b = m.appendErpID(b, idx, r.invalid) // no character of it needs escaping
	b = append(b, '"')
	if r.invalid != flawMissingMemberID {
		b = append(b, f.member...)
		b = appendPadded(b, 'U', uint64(r.member), m.width)
		b = append(b, '"')
	}
	b = append(b, f.product...)
	b = append(b, products[r.product]...)
	b = append(b, f.status...)
	if r.invalid == flawStatus {
		b = append(b, f.pending...)
	} else {
		b = append(b, f.statuses[r.status]...)
	}
	b = append(b, f.starts...)
	if r.invalid == flawDate {
		b = append(b, badDates[int(idx)%len(badDates)]...)
	} else {
		b = appendWireTime(b, r.startsAt)
	}
	b = append(b, f.ends...)
	switch {
	case r.invalid == flawEndsBeforeStarts:
		b = append(b, '"')
		b = appendWireTime(b, r.startsAt-dayMs)
		b = append(b, '"')
	case r.endsAt == noEnd:
		b = append(b, "null"...)
	default:
		b = append(b, '"')
		b = appendWireTime(b, r.endsAt)
		b = append(b, '"')
	}
	if f.version != "" {
		b = append(b, f.version...)
		switch r.invalid {
		case flawVersionZero:
			b = append(b, '0')
		case flawVersionString:
			b = append(b, '"')
			b = strconv.AppendInt(b, r.version, 10)
			b = append(b, '"')
		default:
			b = strconv.AppendInt(b, r.version, 10)
		}
	}
	b = append(b, f.updated...)
	b = appendWireTime(b, r.ua)
	if len(m.tenants) == 0 {
		return append(b, `"}`...)
	}
	b = append(b, `","tenant":`...)
	b = appendJSONString(b, m.tenants[int(idx)%len(m.tenants)])
	return append(b, '}')
}

// badDates are the starts_at values of records with flawDate.
var badDates = [...]string{"2025-02-30T10:00:00Z", "not a date", "2025-01-01 10:00:00"}

// appendErpID appends the erp_id of record idx as served. A flawed erp_id
// keeps the valid one as its prefix, so that the feed order by erp_id is
// the order by index either way.
func (m *Mock) appendErpID(b []byte, idx int32, flaw uint8) []byte {
	start := len(b)
	b = appendPadded(b, 'M', uint64(idx)+1, m.width)
	switch flaw {
	case flawErpIDChars:
		b = append(b, " bad/id"...)
	case flawErpIDLength:
		for len(b)-start <= 64 {
			b = append(b, 'X')
		}
	}
	return b
}
