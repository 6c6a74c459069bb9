package erpmock

import (
	"cmp"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures a Mock.
type Options struct {
	// Records is the number of records in the feed. Defaults to 0, an empty
	// feed.
	Records int
	// Seed selects the records and the sequence of fault decisions: the same
	// Seed and Records give the same records.
	Seed int64
	// Token, when non-empty, is the bearer token every API request must
	// carry ("Authorization: Bearer <Token>"); a request without it gets 401.
	// Defaults to empty: no authentication.
	Token string
	// Faults are the fault switches at start. Faults.InvalidRate is read only
	// here. Defaults to no faults.
	Faults Faults
	// Clock gives the updated_at of changed records. Defaults to time.Now.
	Clock func() time.Time
	// Face is the API the records are served under. Defaults to FaceSpec.
	Face Face
	// NoRev leaves rev out of FaceV2's items: a source then takes a
	// record's version from its modified time. Defaults to false.
	NoRev bool
	// Tenants, when set, spreads the records over tenants (companies):
	// record i belongs to Tenants[i % len(Tenants)], and its items carry
	// it as "tenant" (contracts and orders too). A page or count asked
	// with the query parameter tenant=T serves the records of T only, none
	// for a T not listed; without it, every record. Other query
	// parameters are ignored, as a server ignores a filter it does not
	// know. Defaults to none: no tenant, and tenant= is ignored.
	Tenants []string
}

// Mock is the mock ERP. It implements http.Handler and is safe for
// concurrent use.
type Mock struct {
	token       string
	clock       func() time.Time
	face        Face
	noRev       bool
	tenants     []string
	width       int // digits in erp_id and member_id
	invalidRate float64
	mux         *http.ServeMux

	mu      sync.RWMutex
	recs    []rec   // by index; erp_id order is index order
	order   []entry // by (updated_at, index); an entry is stale when its record has moved on
	stale   int     // stale entries in order
	maxUA   int64   // newest updated_at
	valid   []int32 // indexes of valid records in the feed, ascending
	flaws   []int32 // indexes of invalid records
	deleted int     // valid records deleted
	// linesRev holds the revision of the lines of records whose lines
	// ChangeLines changed at their version; nil until it did.
	linesRev map[int32]linesRev

	fmu    sync.Mutex // guards faults, rng and the token bucket
	faults Faults
	rng    *rand.Rand
	bucket bucket

	requests   atomic.Int64
	byStatus   [600]atomic.Int64
	truncated  atomic.Int64
	hung       atomic.Int64
	duplicates atomic.Int64
	staled     atomic.Int64
	changed    atomic.Int64
}

// entry places a record version in the feed order.
type entry struct {
	ua  int64
	idx int32
}

// New returns a mock serving opt.Records records generated from opt.Seed.
func New(opt Options) *Mock {
	n := max(opt.Records, 0)
	m := &Mock{
		token:       opt.Token,
		clock:       opt.Clock,
		face:        opt.Face,
		noRev:       opt.NoRev,
		tenants:     slices.Clone(opt.Tenants),
		width:       max(7, len(strconv.Itoa(n))),
		invalidRate: opt.Faults.InvalidRate,
		recs:        make([]rec, n),
		order:       make([]entry, n),
		rng:         rand.New(rand.NewPCG(uint64(opt.Seed), 0x6572706d6f636b)),
		faults:      opt.Faults,
	}
	if m.clock == nil {
		m.clock = time.Now
	}
	members := uint32(max(n/2, 1))
	m.valid = make([]int32, 0, n)
	m.maxUA = feedStart
	for i := range n {
		r := generate(opt.Seed, i, members)
		if m.invalidRate > 0 && unit(mix(opt.Seed, i, 4)) < m.invalidRate {
			r.invalid = flawNone + 1 + uint8(len(m.flaws)%int(flawCount))
			m.flaws = append(m.flaws, int32(i))
		} else {
			m.valid = append(m.valid, int32(i))
		}
		m.recs[i] = r
		m.order[i] = entry{ua: r.ua, idx: int32(i)}
		m.maxUA = r.ua
	}
	m.routes()
	return m
}

// SetFaults switches the faults at runtime. InvalidRate cannot change after
// New and is ignored.
func (m *Mock) SetFaults(f Faults) {
	f.InvalidRate = m.invalidRate
	m.fmu.Lock()
	m.faults = f
	m.fmu.Unlock()
}

// Faults returns the current fault switches.
func (m *Mock) Faults() Faults {
	m.fmu.Lock()
	defer m.fmu.Unlock()
	return m.faults
}

// Change changes n random valid records now, as the ERP would: version+1,
// some fields changed and an updated_at from the clock, never below the
// newest updated_at in the feed. It returns the erp_ids of the changed
// records, sorted.
func (m *Mock) Change(n int) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	picked := m.pick(n)
	if len(picked) == 0 {
		return nil
	}
	ua := max(m.clock().UnixMilli(), m.maxUA+1)
	ids := make([]string, len(picked))
	for k, idx := range picked {
		r := &m.recs[idx]
		m.mutate(r)
		r.version++
		r.ua = ua
		// All changed records share ua and are appended in index order, so
		// order stays sorted.
		m.order = append(m.order, entry{ua: ua, idx: idx})
		ids[k] = m.erpID(idx)
	}
	m.maxUA = ua
	m.stale += len(picked)
	if m.stale > len(m.order)/2 {
		m.compact()
	}
	m.changed.Add(int64(len(picked)))
	return ids
}

// pick returns, sorted, n distinct indexes of valid records (all of them
// when there are fewer); m.mu is held.
func (m *Mock) pick(n int) []int32 {
	n = min(max(n, 0), len(m.valid))
	if n == 0 {
		return nil
	}
	m.fmu.Lock()
	defer m.fmu.Unlock()
	out := make([]int32, 0, n)
	if n > len(m.valid)/2 {
		for _, p := range m.rng.Perm(len(m.valid))[:n] {
			out = append(out, m.valid[p])
		}
	} else {
		seen := make(map[int32]struct{}, n)
		for len(out) < n {
			idx := m.valid[m.rng.IntN(len(m.valid))]
			if _, dup := seen[idx]; !dup {
				seen[idx] = struct{}{}
				out = append(out, idx)
			}
		}
	}
	slices.Sort(out)
	return out
}

// mutate changes the fields of r the way a new version would, keeping it
// valid; m.mu is held.
func (m *Mock) mutate(r *rec) {
	m.fmu.Lock()
	defer m.fmu.Unlock()
	r.status = (r.status + 1 + uint8(m.rng.IntN(len(statuses)-1))) % uint8(len(statuses))
	switch m.rng.IntN(3) {
	case 0:
		r.product = (r.product + 1) % uint8(len(products))
	case 1:
		r.endsAt = r.startsAt + (30+m.rng.Int64N(700))*dayMs
	}
}

// compact drops the stale entries of order; m.mu is held for writing.
func (m *Mock) compact() {
	live := m.order[:0]
	for _, e := range m.order {
		if m.live(e) {
			live = append(live, e)
		}
	}
	clear(m.order[len(live):])
	m.order = live
	m.stale = 0
}

// live reports whether e is the current entry of a record in the feed: the
// record has not moved on since, and is not deleted; m.mu is held.
func (m *Mock) live(e entry) bool {
	r := &m.recs[e.idx]
	return r.ua == e.ua && !r.deleted
}

// Truth returns the latest version of every valid record the feed holds
// (deleted records are not), sorted by erp_id.
func (m *Mock) Truth() []Record {
	recs := m.snapshot()
	out := make([]Record, 0, len(recs))
	for i := range recs {
		if recs[i].invalid == flawNone && !recs[i].deleted {
			out = append(out, m.record(int32(i), recs[i]))
		}
	}
	return out
}

// snapshot copies the records, so that long work on them does not hold
// the lock.
func (m *Mock) snapshot() []rec {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Clone(m.recs)
}

// record converts the valid record idx to a Record.
func (m *Mock) record(idx int32, r rec) Record {
	out := Record{
		ErpID:       m.erpID(idx),
		MemberID:    string(appendPadded(nil, 'U', uint64(r.member), m.width)),
		ProductCode: products[r.product],
		Status:      statuses[r.status],
		StartsAt:    ms(r.startsAt),
		Version:     r.version,
		UpdatedAt:   ms(r.ua),
	}
	if r.endsAt != noEnd {
		t := ms(r.endsAt)
		out.EndsAt = &t
	}
	if len(m.tenants) > 0 {
		out.Tenant = m.tenants[int(idx)%len(m.tenants)]
	}
	return out
}

// InvalidIDs returns the erp_ids, as served, of the invalid records, in
// feed order of their first appearance. Some are not usable as erp_ids:
// that is their flaw.
func (m *Mock) InvalidIDs() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]string, len(m.flaws))
	for k, idx := range m.flaws {
		out[k] = string(m.appendErpID(nil, idx, m.recs[idx].invalid))
	}
	return out
}

// Requests returns the number of API requests received, whatever their
// answer.
func (m *Mock) Requests() int64 { return m.requests.Load() }

// Stats counts what the mock has done since New.
type Stats struct {
	// Requests is the number of API requests received.
	Requests int64 `json:"requests"`
	// Statuses counts API answers by HTTP status. A truncated body counts
	// as 200; a hung request the client gave up on counts nowhere.
	Statuses map[int]int64 `json:"statuses"`
	// Truncated, Hung, Duplicates and Stale count injected faults.
	Truncated  int64 `json:"truncated"`
	Hung       int64 `json:"hung"`
	Duplicates int64 `json:"duplicates"`
	Stale      int64 `json:"stale"`
	// Changed counts record changes, by Change and by Faults.ChangeRate.
	Changed int64 `json:"changed"`
	// Deleted counts the records deleted now (by Delete and by
	// Faults.DeleteRate, less those Recreate brought back).
	Deleted int `json:"deleted"`
	// Records, Valid and Invalid count the records (Valid: those in the
	// feed, deleted ones not).
	Records int `json:"records"`
	Valid   int `json:"valid"`
	Invalid int `json:"invalid"`
}

// Stats returns the counters.
func (m *Mock) Stats() Stats {
	s := Stats{
		Requests:   m.requests.Load(),
		Statuses:   make(map[int]int64),
		Truncated:  m.truncated.Load(),
		Hung:       m.hung.Load(),
		Duplicates: m.duplicates.Load(),
		Stale:      m.staled.Load(),
		Changed:    m.changed.Load(),
		Records:    len(m.recs),
		Invalid:    len(m.flaws),
	}
	m.mu.RLock()
	s.Valid, s.Deleted = len(m.valid), m.deleted
	m.mu.RUnlock()
	for code := range m.byStatus {
		if v := m.byStatus[code].Load(); v > 0 {
			s.Statuses[code] = v
		}
	}
	return s
}

// compareEntry orders entries by (updated_at, erp_id).
func compareEntry(a, b entry) int {
	return cmp.Or(cmp.Compare(a.ua, b.ua), cmp.Compare(a.idx, b.idx))
}
