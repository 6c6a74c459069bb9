package guarantee

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

var (
	statuses = []string{"ACTIVE", "SUSPENDED", "CANCELLED", "EXPIRED"}
	products = []string{"GYM", "POOL", "SPA", "ALL-IN"}
	// Storable extremes and far-away dates a valid record may carry.
	minStorable = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	maxStorable = time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC)
	year2999    = time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)
	epoch       = time.Unix(0, 0).UTC()
)

// source draws the generator's decisions: from the fuzz bytes while they
// last, then from a PCG seeded by the seed and the bytes.
type source struct {
	b []byte
	r *rand.Rand
}

func newSource(seed uint64, data []byte) *source {
	h := fnv.New64a()
	h.Write(data)
	return &source{b: data, r: rand.New(rand.NewPCG(seed, h.Sum64()))}
}

// intn returns a number in [0, n).
func (s *source) intn(n int) int {
	if n <= 1 {
		return 0
	}
	if len(s.b) > 0 {
		v := int(s.b[0])
		s.b = s.b[1:]
		return v % n
	}
	return s.r.IntN(n)
}

func (s *source) pct(p int) bool { return s.intn(100) < p }

func (s *source) u64() uint64 { return uint64(s.intn(1<<30))<<30 | uint64(s.intn(1<<30)) }

// execSpec is one execution of a wave.
type execSpec struct {
	Mode          string // "run", "backfill" or "reconcile"
	Since, Until  time.Time
	Shard, Shards int
	PageSize      int
	ChunkSize     int
	Workers       int
	Fetchers      int // parts of the window read at once (0: the syncer's default, 1; a process's, 4)
	Overlap       time.Duration
	Proc          bool   // a bin/erpsync process instead of the syncer in this process
	KillAt        int    // a process is killed with SIGKILL before its KillAt-th page (0: never), then run again
	StopAt        int    // in this process, the run's context ends before its StopAt-th page (0: never), then it runs again (parts_test.go)
	MaxDelete     string // a reconcile's --max-delete ("": the default, 5%)
	Force         bool   // a reconcile's --force
	// Race, for a reconcile: the ERP deletes two records as it starts; between its comparison and its writes, the ERP recreates every
	// record it deleted, at a higher version, and a backfill writes them.
	Race bool
	// Hide, for a reconcile: the ERP hides a record that has a live row
	// from the reconcile's first request to the end of its first pass, and
	// then holds it again, unchanged.
	Hide bool
	// Creep, for a reconcile: a run, then Creep reconciles one after the
	// other, each after the ERP deleted CreepDelete records (MaxDelete
	// allows each), with the guard over the window MaxDeleteTotal (a
	// count) below their sum.
	Creep, CreepDelete int
	MaxDeleteTotal     string
}

func (x execSpec) String() string {
	s := fmt.Sprintf("%s page=%d chunk=%d workers=%d", x.Mode, x.PageSize, x.ChunkSize, x.Workers)
	if x.Fetchers > 0 {
		s += fmt.Sprintf(" fetchers=%d", x.Fetchers)
	}
	switch x.Mode {
	case "reconcile":
		if x.MaxDelete != "" {
			s += " max-delete=" + x.MaxDelete
		}
		if x.Force {
			s += " force"
		}
		if x.Race {
			s += " racing-recreations"
		}
		if x.Hide {
			s += " hides-a-record-during-its-first-pass"
		}
		if x.Creep > 0 {
			s += fmt.Sprintf(" creep=%dx(delete %d) max-delete-total=%s", x.Creep, x.CreepDelete, x.MaxDeleteTotal)
		}
	case "backfill":
		s += " since=" + x.Since.Format(tsLayout)
		if !x.Until.IsZero() {
			s += " until=" + x.Until.Format(tsLayout)
		}
		if x.Shards > 1 {
			s += fmt.Sprintf(" shard=%d/%d", x.Shard, x.Shards)
		}
	default:
		s += " overlap=" + x.Overlap.String()
	}
	if x.StopAt > 0 {
		s += fmt.Sprintf(" stopped@page%d", x.StopAt)
	}
	if x.Proc {
		s += " process"
		if x.KillAt > 0 {
			s += fmt.Sprintf(" SIGKILL@page%d", x.KillAt)
		}
	}
	return s
}

// scenario is one generated feed and what runs against it.
type scenario struct {
	ERPSeed uint64
	Base    time.Time // the ERP clock at start
	Adv     adversary
	Records []record
	Invalid []item
	Waves   [][]execSpec
	Advance []time.Duration // ERP clock moved forward after each wave
	Budget  int             // page requests on which the adversary may change or create records
	// Reconcile says the waves may hold reconciles and each settling ends
	// with one; always so when the ERP deletes records.
	Reconcile bool
	// Sigterm adds the scenario of a run stopped by SIGTERM while it
	// still writes for a grace longer than its lock TTL, and a second run
	// started meanwhile.
	Sigterm bool
	// Rebirth is how many records with a live row the ERP deletes after
	// each wave, before its settling (whose reconcile soft-deletes them),
	// and recreates after it at a lower version.
	Rebirth int
	// Relive is how many records with a live row, after the waves, leave
	// the ERP unchanged, come back unchanged, and do both again, each step
	// followed by a settling (whose reconcile soft-deletes them, then
	// restores them): a key that goes through the same delete and restore,
	// at one version, twice.
	Relive int
	// Climb is how many records with a live row, after the waves, the ERP
	// changes, deletes, recreates at a lower version, then changes to the
	// version it deleted them at and to one past it, each step followed by
	// a settling; the records Rebirth recreated climb with them. A new life
	// of a key goes through an update at a version its previous life went
	// through an update at.
	Climb int
	// Spoil is how many records with a row turn invalid after each
	// settling (about half of those invalid turn valid again).
	Spoil int
	// Locks is the lock service (locks_test.go); OData, when set, serves
	// the ERP as an OData v4 entity set (odata_face_test.go).
	Locks string
	OData *odataSpec
	// Typed, when set, syncs the entities of a config file instead of the
	// built-in one, every execution a bin/erpsync process (typed_test.go).
	Typed *typedSpec
}

func (sc *scenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d valid records, %d invalid items, adversary %+v for %d pages", len(sc.Records), len(sc.Invalid), sc.Adv, sc.Budget)
	for i, w := range sc.Waves {
		fmt.Fprintf(&b, "\n  wave %d (then clock +%s):", i, sc.Advance[i])
		for _, x := range w {
			b.WriteString("\n    " + x.String())
		}
	}
	if sc.Rebirth > 0 {
		fmt.Fprintf(&b, "\n  after each wave: %d records deleted before its settling, recreated at a lower version after it", sc.Rebirth)
	}
	if sc.Relive > 0 {
		fmt.Fprintf(&b, "\n  after the waves: %d records leave the ERP and come back unchanged, twice (the same delete and restore again)", sc.Relive)
	}
	if sc.Climb > 0 {
		fmt.Fprintf(&b, "\n  after the waves: %d records changed, deleted, recreated at a lower version, then changed to the version they were deleted at and past it (an update at a version of their previous life), with the records reborn after a wave", sc.Climb)
	}
	if sc.Spoil > 0 {
		fmt.Fprintf(&b, "\n  after each settling: %d records turn invalid, half of the invalid ones valid again", sc.Spoil)
	}
	if sc.Sigterm {
		b.WriteString("\n  then: SIGTERM a run that still writes, lock TTL < grace, a second run")
	}
	b.WriteString("\n  " + sc.services())
	if sc.Typed != nil {
		b.WriteString("\n  " + sc.Typed.String())
	}
	return b.String()
}

// opts bound what generate makes.
type opts struct {
	MaxRecords int  // valid records at most
	MaxWaves   int  // waves at most
	MaxExecs   int  // executions per wave at most
	Procs      bool // some executions are processes
	Sigterm    bool // add the SIGTERM scenario
	Typed      *typedSpec
}

func newRecord(id string, r interface{ IntN(int) int }) record {
	starts := time.Date(2000+r.IntN(30), time.Month(1+r.IntN(12)), 1+r.IntN(28), 0, 0, 0, 0, time.UTC)
	switch r.IntN(10) {
	case 0:
		starts = minStorable
	case 1:
		starts = maxStorable
	}
	rec := record{
		ID: id, Member: fmt.Sprintf("U%d", r.IntN(1000)), Product: products[r.IntN(len(products))],
		Status: statuses[r.IntN(len(statuses))], Starts: starts, Version: 1 + int64(r.IntN(5)),
	}
	if r.IntN(2) == 0 {
		ends := starts.Add(time.Duration(r.IntN(1000)) * time.Hour)
		if ends.After(maxStorable) {
			ends = maxStorable
		}
		rec.Ends = &ends
	}
	return rec
}

// intner adapts a source to newRecord.
type intner struct{ s *source }

func (i intner) IntN(n int) int { return i.s.intn(n) }

// generate builds a scenario from s.
func generate(s *source, o opts) *scenario {
	base := time.Now().UTC().Truncate(time.Second)
	sc := &scenario{ERPSeed: s.u64(), Base: base}
	if s.pct(80) {
		sc.Adv = adversary{
			Replay: s.intn(90), Stale: s.intn(80), Dup: s.intn(40), StaleAny: s.intn(30),
			Boundary: s.intn(50), Change: s.intn(40), Create: s.intn(20),
		}
		if s.pct(50) {
			sc.Adv.Delete, sc.Adv.Recreate = 1+s.intn(30), s.intn(60)
		}
	}
	sc.Reconcile = sc.Adv.Delete > 0 || s.pct(30)
	// Times valid records are stamped with: a few shared ones (ties,
	// across page boundaries), the far past, and, in some feeds, the future.
	ties := make([]time.Time, 1+s.intn(6))
	for i := range ties {
		ties[i] = base.Add(-time.Duration(1+s.intn(3600_000)) * time.Millisecond)
	}
	future := s.pct(30)
	stamp := func() time.Time {
		switch k := s.intn(20); {
		case k == 0:
			return minStorable
		case k == 1:
			return epoch
		case k == 2 && future:
			return base.Add(time.Duration(1+s.intn(7200)) * time.Second)
		case k == 3 && future:
			return []time.Time{year2999, maxStorable}[s.intn(2)]
		case k < 12:
			return ties[s.intn(len(ties))]
		default:
			return base.Add(-time.Duration(1+s.intn(7200_000)) * time.Millisecond)
		}
	}
	n := 1 + s.intn(o.MaxRecords)
	for i := range n {
		id := fmt.Sprintf("m%03d", i)
		if s.pct(5) {
			id = strings.ToUpper(fmt.Sprintf("m%03d", i-1)) // differs only in case from another id
		}
		r := newRecord(id, intner{s})
		r.Updated = stamp()
		sc.Records = append(sc.Records, r)
	}
	sc.Budget = s.intn(4 * n)
	for i := range s.intn(6) {
		sc.Invalid = append(sc.Invalid, invalidItem(s, i, stamp))
	}
	waves := 1 + s.intn(o.MaxWaves)
	for range waves {
		var wave []execSpec
		for range 1 + s.intn(o.MaxExecs) {
			wave = append(wave, genExec(s, o, sc))
		}
		sc.Waves = append(sc.Waves, wave)
		var adv time.Duration
		if future && s.pct(40) {
			adv = time.Duration(s.intn(3*3600)) * time.Second
		}
		sc.Advance = append(sc.Advance, adv)
	}
	sc.Sigterm, sc.Typed = o.Sigterm, o.Typed
	genSources(s, sc)
	later(s, sc)
	return sc
}

// later draws the choices added after the ones of generate, so that the
// feeds of older seeds and corpus entries keep their shape: records that
// turn invalid and valid again, recreations at a lower version, reconciles
// that a record hides from, and deletions that creep across reconciles.
func later(s *source, sc *scenario) {
	// Neither in a feed served as OData: the face has its own invalid
	// items, and with version= versions that are updated_at in µs. No
	// invalid copies with the SIGTERM scenario, whose run must have
	// changed records to write.
	if s.pct(25) && sc.OData == nil && !sc.Sigterm {
		sc.Spoil = 1 + s.intn(3)
		if sc.Adv != (adversary{}) {
			sc.Adv.Spoil, sc.Adv.Mend = 3+s.intn(25), s.intn(50)
		}
	}
	if !sc.Reconcile {
		return
	}
	if s.pct(30) && sc.OData == nil {
		sc.Rebirth = 1 + s.intn(3)
	}
	for _, w := range sc.Waves {
		for i := range w {
			if w[i].Hide = w[i].Mode == "reconcile" && !w[i].Race && s.pct(60); w[i].Hide && !w[i].Force {
				w[i].MaxDelete = "100%" // a guard that lets it delete what it does not see
			}
		}
	}
	if s.pct(25) {
		x := execSpec{Mode: "reconcile", PageSize: 1 + s.intn(40), ChunkSize: 1 + s.intn(20), Workers: 1 + s.intn(8)}
		x.Creep, x.CreepDelete = 3+s.intn(2), 1+s.intn(2)
		x.MaxDelete = strconv.Itoa(x.CreepDelete)
		// Below the sum of Creep reconciles' deletions: at most Creep - 1 of them.
		x.MaxDeleteTotal = strconv.Itoa(x.CreepDelete + s.intn(x.CreepDelete*(x.Creep-2)+1))
		w := s.intn(len(sc.Waves))
		sc.Waves[w] = append(sc.Waves[w], x)
	}
}

func genExec(s *source, o opts, sc *scenario) execSpec {
	x := execSpec{Mode: "run", Workers: 1 + s.intn(8), ChunkSize: 1 + s.intn(20)}
	switch k := s.intn(10); {
	case k < 5:
		x.PageSize = 1 + s.intn(4)
	case k < 9:
		x.PageSize = 1 + s.intn(40)
	default:
		x.PageSize = 1 + s.intn(1000)
	}
	x.Overlap = []time.Duration{3 * time.Second, 10 * time.Second, time.Minute}[s.intn(3)]
	switch {
	case sc.Reconcile && s.pct(20):
		// A reconcile, in this process: a guard that lets it delete what
		// the adversary deleted, or the default one that may refuse.
		x.Mode = "reconcile"
		switch s.intn(4) {
		case 0:
		case 1:
			x.Force = true
		case 2:
			x.MaxDelete = "100%"
		default:
			x.MaxDelete = strconv.Itoa(s.intn(2 * len(sc.Records)))
		}
		x.Race = sc.Adv.Delete > 0 && s.pct(50)
		return x
	case s.pct(45):
		x.Mode = "backfill"
		// A --since in the future is bad usage (exit 2, the e2e test
		// TestBackfillSinceInTheFutureIsBadUsage): the model's windows
		// start at a record's time that has come.
		times := []time.Time{minStorable}
		for _, r := range sc.Records {
			if !r.Updated.After(time.Now()) {
				times = append(times, r.Updated)
			}
		}
		x.Since = times[s.intn(len(times))]
		if s.pct(50) {
			if u := times[s.intn(len(times))]; u.After(x.Since) {
				x.Until = u
			}
		}
		if s.pct(40) {
			x.Shards = 2 + s.intn(3)
			x.Shard = s.intn(x.Shards)
		}
	}
	if o.Procs && s.pct(35) {
		x.Proc = true
		if s.pct(70) {
			x.KillAt = 1 + s.intn(4)
		}
	}
	return x
}

// invalidItem makes an item the consumer must quarantine, on an erp_id no
// valid record uses: a bad status, a bad erp_id, a missing field, a bad
// version, a date-time the table cannot store, or a broken updated_at.
func invalidItem(s *source, i int, stamp func() time.Time) item {
	at := stamp()
	if s.pct(40) {
		at = []time.Time{year2999, epoch, maxStorable, time.Date(2999, 12, 31, 0, 0, 0, 0, time.UTC)}[s.intn(4)]
	}
	w := map[string]any{
		"erp_id": fmt.Sprintf("inv-%d", i), "member_id": "U1", "product_code": "GYM", "status": "ACTIVE",
		"starts_at": "2024-01-01T00:00:00Z", "version": 1 + s.intn(9), "updated_at": at.Format(tsLayout),
	}
	kind := s.intn(8)
	switch kind {
	case 0:
		w["status"] = "BOGUS"
	case 1:
		w["erp_id"] = []string{fmt.Sprintf("bad id %d", i), fmt.Sprintf("x{%d}", i), "", strings.Repeat("z", 65) + fmt.Sprint(i)}[s.intn(4)]
	case 2:
		delete(w, []string{"member_id", "product_code", "status", "starts_at", "version"}[s.intn(5)])
	case 3:
		w["version"] = []any{0, -3, "7", 1.5}[s.intn(4)]
	case 4:
		// Valid RFC 3339 the table cannot store: past year 9999 in UTC.
		w["updated_at"] = "9999-12-31T23:59:59-23:59"
		at, _ = time.Parse(time.RFC3339, "9999-12-31T23:59:59-23:59")
	case 5:
		w[[]string{"starts_at", "ends_at"}[s.intn(2)]] = []string{"0999-12-31T23:59:59Z", "9999-12-31T23:59:59-23:59"}[s.intn(2)]
	case 6:
		if s.pct(50) {
			delete(w, "updated_at")
		} else {
			w["updated_at"] = "not-a-date"
		}
	default:
		w["ends_at"] = "2000-01-01T00:00:00Z" // before starts_at
	}
	if s.pct(30) {
		w["status"] = "BOGUS"
		w["updated_at"] = "2999-01-01T00:00:00Z"
		at = year2999
	}
	raw, _ := json.Marshal(w)
	id, _ := w["erp_id"].(string)
	return item{id: fmt.Sprintf("~%d:%s", i, id), at: at, raw: raw}
}
