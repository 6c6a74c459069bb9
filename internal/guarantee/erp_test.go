package guarantee

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/erpsync/erpsync/erpmock"
)

// typedLog follows the id of an execution in the id its requests of the
// typed face are logged under: an execution of both entities is two logs.
const typedLog = "#contracts"

// tsLayout is how the simulated ERP writes a date-time: RFC 3339 with
// milliseconds, "Z" for UTC.
const tsLayout = "2006-01-02T15:04:05.000Z07:00"

// record is one version of a valid membership: what the model holds and
// what memberships must end up with.
type record struct {
	ID, Member, Product, Status string
	Starts                      time.Time
	Ends                        *time.Time
	Version                     int64
	Updated                     time.Time
	// Lines is how many times the ERP changed the lines of the record's
	// document at its version (erpmock.OrderLinesAt): 0 but in feeds that
	// change them (lines_test.go).
	Lines int
}

func (r record) json() []byte {
	w := map[string]any{
		"erp_id": r.ID, "member_id": r.Member, "product_code": r.Product, "status": r.Status,
		"starts_at": r.Starts.Format(tsLayout), "version": r.Version, "updated_at": r.Updated.Format(tsLayout),
	}
	if r.Ends != nil {
		w["ends_at"] = r.Ends.Format(tsLayout)
	} else if r.Version%2 == 0 {
		w["ends_at"] = nil // explicit null half of the time
	}
	b, _ := json.Marshal(w)
	return b
}

// item is one entry of the feed as the ERP orders it: a valid record's
// version, or an invalid item with the time it sorts at.
type item struct {
	id  string
	at  time.Time
	raw []byte
	rec *record // nil for an invalid item
	// spoilt says the invalid item is the current copy of record id, at
	// version ver (0: a version that cannot be read).
	spoilt bool
	ver    int64
}

func (a item) cmp(b item) int {
	if c := a.at.Compare(b.at); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

// linesRev is the revision of the lines of the document of it at its
// version: that of the copy of the record it is.
func (it item) linesRev(string, int64) int {
	if it.rec == nil {
		return 0
	}
	return it.rec.Lines
}

func recordItem(r record) item { return item{id: r.ID, at: r.Updated, raw: r.json(), rec: &r} }

// adversary is how hostile the ERP is, in percent per page request.
type adversary struct {
	Replay   int // replay the previous page's tail at the start of the page
	Stale    int // a replayed or duplicated copy carries an older version
	Dup      int // a duplicate of one of the page's records, anywhere in it
	StaleAny int // an old version of any record, anywhere in the page
	Boundary int // the last record this client was served changes before the page
	Change   int // one or two random records change before the page
	Create   int // a new record appears before the page
	Delete   int // a record is deleted before the page: it leaves every page
	Recreate int // a deleted record comes back before the page, mostly at a higher version
	Spoil    int // a record's current copy turns invalid before the page, one version higher
	Mend     int // a record whose current copy is invalid turns valid again before the page, one version higher
	Stall    int // a part of a window (a first page with an updated_until) is held back while the others are paged (parts_test.go)
}

// execLog is what the ERP served one execution.
type execLog struct {
	requests int
	first    time.Time        // ERP clock at the first request
	served   map[string]int64 // erp_id -> highest valid version served
	last     []item           // the previous page as served
	done     bool             // served a page with next_cursor null
	// onPage, when set, runs before the n-th page's answer is written,
	// outside the ERP's lock: a test kills a process there.
	onPage func(n int)
	// spoilt is the erp_id -> version (0: unreadable) of the invalid
	// current copies of records served.
	spoilt map[string]int64
	// reconcile says the execution is a reconcile: from the end of its
	// first pass (the first page served with next_cursor null) until
	// endHold, held holds the erp_ids the ERP has held unchanged since.
	reconcile bool
	held      map[string]bool
	// hide lists records of which the reconcile hides the first the ERP
	// holds, from its first request to the end of its first pass; hidden
	// is that one.
	hide   []string
	hidden string
}

// erpSim is the simulated ERP: its records, their histories, its invalid
// items and its clock. It serves the feed's API under /x/<execution>/.
type erpSim struct {
	mu      sync.Mutex
	rng     *rand.Rand
	adv     adversary
	frozen  bool          // no changes, no creations
	start   time.Time     // real time the clock started
	base    time.Time     // the ERP clock at start
	skew    time.Duration // added to the clock (advance)
	cur     map[string]record
	hist    map[string][]record  // older versions, oldest first
	gone    map[string]record    // deleted records, at their last version
	born    map[string]time.Time // ERP clock when a version was made (id@version), for versions made while clients page
	invalid []item
	nextNew int
	execs   map[string]*execLog
	face    *face          // the OData face (odata_face_test.go); nil: the REST API
	docs    *docsODataSpec // the documents' OData face (odata_docs_test.go)
	// budget is how many more changes and creations the adversary may
	// make: without a bound, a client reading one record a page could
	// chase a tail that moves as fast as it reads.
	budget int

	bad    map[string]item   // records whose current copy is invalid: that item
	hidden map[string]record // records a reconcile hides during its first pass
	// wasGone and wasBad name the records ever deleted and ever invalid;
	// reborn the ones recreated at a lower version. A record invalid once
	// is never deleted, and a deleted one never turns invalid: the mark of a
	// soft-deleted row is no part of the model.
	wasGone, wasBad, reborn map[string]bool
	holding                 map[string]*execLog // reconciles whose held sets are open
	// ever holds every valid version the ERP made of each record, in
	// every life of it, oldest first: what a change event may carry.
	ever map[string][]record
	// lastLife is the version each record recreated at a lower version
	// was deleted at: where its previous life ended.
	lastLife map[string]int64
}

func newERP(seed uint64, base time.Time, adv adversary) *erpSim {
	return &erpSim{
		rng:   rand.New(rand.NewPCG(seed, seed^0x5bd1e995)),
		adv:   adv,
		start: time.Now(),
		base:  base,
		cur:   map[string]record{},
		hist:  map[string][]record{},
		gone:  map[string]record{},
		born:  map[string]time.Time{},
		execs: map[string]*execLog{},

		bad:     map[string]item{},
		hidden:  map[string]record{},
		wasGone: map[string]bool{},
		wasBad:  map[string]bool{},
		reborn:  map[string]bool{},
		holding: map[string]*execLog{},
		ever:    map[string][]record{},

		lastLife: map[string]int64{},
	}
}

// now is the ERP's clock, in milliseconds; it moves with real time from
// base, plus what advance added. Callers hold mu.
func (e *erpSim) now() time.Time {
	return e.base.Add(time.Since(e.start) + e.skew).Truncate(time.Millisecond)
}

// advance moves the ERP's clock forward by d.
func (e *erpSim) advance(d time.Duration) {
	e.mu.Lock()
	e.skew += d
	e.mu.Unlock()
}

// clock reads the ERP's clock.
func (e *erpSim) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now()
}

// onPage sets the hook run before each page answer to execution x.
func (e *erpSim) onPage(x string, fn func(n int)) {
	e.mu.Lock()
	e.logLocked(x).onPage = fn
	e.mu.Unlock()
}

// freeze stops changes while clients page.
func (e *erpSim) freeze() {
	e.mu.Lock()
	e.frozen = true
	e.mu.Unlock()
}

// thaw lets the adversary change records again, on up to budget pages.
func (e *erpSim) thaw(budget int) {
	e.mu.Lock()
	e.frozen = false
	e.budget = budget
	e.mu.Unlock()
}

// locked returns what read reads of e, under its lock.
func locked[T any](e *erpSim, read func() T) T {
	e.mu.Lock()
	defer e.mu.Unlock()
	return read()
}

// truth returns the latest version of every valid record.
func (e *erpSim) truth() map[string]record {
	return locked(e, func() map[string]record { return maps.Clone(e.cur) })
}

// deleted returns the last version of every record the ERP deleted and
// has not recreated.
func (e *erpSim) deleted() map[string]record {
	return locked(e, func() map[string]record { return maps.Clone(e.gone) })
}

// had reports whether the ERP had g, field by field, as a valid version of
// its record (since its last recreation at a lower version).
func (e *erpSim) had(g record) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range append([]record{e.cur[g.ID], e.gone[g.ID], e.hidden[g.ID]}, e.hist[g.ID]...) {
		if sameRecord(r, g) {
			return true
		}
	}
	return false
}

// spoilt returns the invalid current copy of every record that has one.
func (e *erpSim) spoilt() map[string]item {
	return locked(e, func() map[string]item { return maps.Clone(e.bad) })
}

// wasReborn reports whether the ERP recreated id at a lower version.
func (e *erpSim) wasReborn(id string) bool {
	return locked(e, func() bool { return e.reborn[id] })
}

func bornKey(id string, v int64) string { return fmt.Sprintf("%s@%d", id, v) }

// bornAfter reports whether the ERP made version v of id after execution
// x's first request.
func (e *erpSim) bornAfter(id string, v int64, x string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, ok := e.born[bornKey(id, v)]
	return ok && b.After(e.logLocked(x).first)
}

// done reports whether execution x was served the feed's last page.
func (e *erpSim) done(x string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.logLocked(x).done
}

func (e *erpSim) logLocked(x string) *execLog {
	l := e.execs[x]
	if l == nil {
		l = &execLog{served: map[string]int64{}, spoilt: map[string]int64{}}
		e.execs[x] = l
	}
	return l
}

// served returns a copy of what execution x was served.
func (e *erpSim) served(x string) (map[string]int64, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.logLocked(x)
	return maps.Clone(l.served), l.requests
}

// servedSpoilt returns erp_id -> version (0: unreadable) of the invalid
// current copies of records execution x was served.
func (e *erpSim) servedSpoilt(x string) map[string]int64 {
	return locked(e, func() map[string]int64 { return maps.Clone(e.logLocked(x).spoilt) })
}

// change makes a new version of record id, one or two above its last,
// stamped with the clock. Callers hold mu.
func (e *erpSim) change(id string) {
	old, ok := e.cur[id]
	if !ok {
		return
	}
	e.changeTo(id, old.Version+1+int64(e.rng.IntN(2)))
}

// changeTo makes version v of record id, stamped with the clock. Callers
// hold mu.
func (e *erpSim) changeTo(id string, v int64) {
	old, ok := e.cur[id]
	if !ok {
		return
	}
	e.touch(id)
	e.hist[id] = append(e.hist[id], old)
	n := old
	n.Version = v
	n.Updated = e.now()
	e.born[bornKey(id, n.Version)] = n.Updated
	e.face.changed(e, &n, old)
	switch e.rng.IntN(3) {
	case 0:
		n.Status = statuses[e.rng.IntN(len(statuses))]
	case 1:
		n.Member = fmt.Sprintf("U%d", e.rng.IntN(1000))
	}
	e.put(n)
}

// put makes r the current version of its record: a version the ERP made.
// Callers hold mu.
func (e *erpSim) put(r record) {
	e.cur[r.ID] = r
	e.ever[r.ID] = append(e.ever[r.ID], r)
}

// made returns the valid versions the ERP made of record id at version v,
// in any of its lives.
func (e *erpSim) made(id string, v int64) []record {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []record
	for _, r := range e.ever[id] {
		if r.Version == v {
			out = append(out, r)
		}
	}
	return out
}

// deleteSome deletes up to n records, the first deletable ones.
func (e *erpSim) deleteSome(n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := e.deletable()
	for _, id := range ids[:min(n, len(ids))] {
		e.remove(id)
	}
}

// deletable returns the erp_ids of the records the ERP may delete: the
// valid ones never invalid nor recreated at a lower version.
func (e *erpSim) deletable() []string {
	var ids []string
	for _, id := range e.ids() {
		if !e.wasBad[id] && !e.reborn[id] {
			ids = append(ids, id)
		}
	}
	return ids
}

// remove deletes record id. Callers hold mu.
func (e *erpSim) remove(id string) {
	e.touch(id)
	e.gone[id] = e.cur[id]
	e.wasGone[id] = true
	delete(e.cur, id)
}

// deleteOf deletes up to n of the records ids names that the ERP may
// delete and whose versions are all dated before its clock (so that a
// stamp of the clock is later than any row of them), and returns their
// erp_ids.
func (e *erpSim) deleteOf(ids []string, n int) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, id := range ids {
		if len(out) < n && e.mayDelete(id, true) {
			e.remove(id)
			out = append(out, id)
		}
	}
	return out
}

// mayDelete reports whether the ERP may delete the record id: it has it,
// never served it invalid, did not recreate it, and (dated) all its
// versions are dated before its clock. The caller holds e.mu.
func (e *erpSim) mayDelete(id string, dated bool) bool {
	_, ok := e.cur[id]
	return ok && !e.wasBad[id] && !e.reborn[id] && (!dated || e.datedBefore(id, e.now()))
}

// rebirth recreates the deleted records ids at a lower version (version 1,
// or one below their last), with new fields, stamped with the clock: a new
// life of the key. Their older versions are gone for good.
func (e *erpSim) rebirth(ids []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		last, ok := e.gone[id]
		if !ok {
			continue
		}
		n := newRecord(id, e.rng)
		n.Version = 1
		if last.Version > 2 && e.rng.IntN(3) == 0 {
			n.Version = 1 + int64(e.rng.IntN(int(last.Version-1)))
		}
		n.Updated = e.now()
		e.born[bornKey(id, n.Version)] = n.Updated
		delete(e.gone, id)
		delete(e.hist, id)
		e.put(n)
		e.reborn[id] = true
		e.lastLife[id] = last.Version
	}
}

// pickLives returns up to n of the records ids names, but those of skip,
// that the ERP may delete (and, when dated, whose versions are all dated
// before its clock, as deleteOf's).
func (e *erpSim) pickLives(ids []string, n int, skip []string, dated bool) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, id := range ids {
		if len(out) < n && !slices.Contains(skip, id) && e.mayDelete(id, dated) {
			out = append(out, id)
		}
	}
	return out
}

// leave deletes the records ids, unchanged: each may come back as it was.
func (e *erpSim) leave(ids []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		if _, ok := e.cur[id]; ok {
			e.remove(id)
		}
	}
}

// comeBack brings the deleted records ids back as they were: the same
// version, the same fields and updated_at.
func (e *erpSim) comeBack(ids []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		if r, ok := e.gone[id]; ok {
			e.touch(id)
			e.cur[id] = r
			delete(e.gone, id)
		}
	}
}

// changeEach changes each of the records ids once.
func (e *erpSim) changeEach(ids []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		e.change(id)
	}
}

// climb changes every record recreated at a lower version to exactly
// past versions above the one its previous life ended at, unless it is
// there already, and returns erp_id -> the version it made of each.
func (e *erpSim) climb(past int64) map[string]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]int64{}
	for _, id := range sortedKeys(e.lastLife) {
		to := e.lastLife[id] + past
		if r, ok := e.cur[id]; ok && r.Version < to {
			e.changeTo(id, to)
			out[id] = to
		}
	}
	return out
}

// spoil turns the current copy of record id invalid: an item with its
// erp_id, one version higher (or a version that cannot be read), stamped
// with the clock. Only a record never deleted, whose versions are all dated
// before the clock, turns invalid. Callers hold mu.
func (e *erpSim) spoil(id string) bool {
	r, ok := e.cur[id]
	now := e.now()
	if !ok || e.wasGone[id] || e.reborn[id] || !e.datedBefore(id, now) {
		return false
	}
	e.touch(id)
	e.hist[id] = append(e.hist[id], r)
	delete(e.cur, id)
	it := invalidCopy(r, now, e.rng)
	e.bad[id] = it
	e.wasBad[id] = true
	return true
}

// invalidCopy is an invalid item of record r at version r.Version+1 (or at
// a version that cannot be read, one in five), stamped at: a status the
// decoder refuses, a missing required field, or ends_at before starts_at.
func invalidCopy(r record, at time.Time, rng *rand.Rand) item {
	w := map[string]any{
		"erp_id": r.ID, "member_id": r.Member, "product_code": r.Product, "status": r.Status,
		"starts_at": r.Starts.Format(tsLayout), "version": r.Version + 1, "updated_at": at.Format(tsLayout),
	}
	ver := r.Version + 1
	switch rng.IntN(5) {
	case 0:
		w["status"] = "BOGUS"
	case 1:
		delete(w, []string{"member_id", "product_code", "status", "starts_at"}[rng.IntN(4)])
	case 2:
		w["ends_at"] = r.Starts.Add(-24 * time.Hour).Format(tsLayout)
	case 3:
		w["status"] = strings.ToLower(r.Status)
	default:
		w["status"] = "BOGUS"
		ver = 0
		if v := []any{"7", 1.5, nil}[rng.IntN(3)]; v != nil {
			w["version"] = v
		} else {
			delete(w, "version")
		}
	}
	raw, _ := json.Marshal(w)
	return item{id: r.ID, at: at, raw: raw, spoilt: true, ver: ver}
}

// mend turns the invalid current copy of record id valid again, one
// version above both its invalid copy and its last valid version, stamped
// with the clock. Callers hold mu.
func (e *erpSim) mend(id string) {
	it, ok := e.bad[id]
	if !ok {
		return
	}
	n := e.hist[id][len(e.hist[id])-1] // its last valid version
	n.Version = max(it.ver, n.Version) + 1
	n.Updated = e.now()
	if e.rng.IntN(2) == 0 {
		n.Status = statuses[e.rng.IntN(len(statuses))]
	}
	e.born[bornKey(id, n.Version)] = n.Updated
	e.touch(id)
	delete(e.bad, id)
	e.put(n)
}

// spoilOf turns invalid the current copies of up to n of the records ids
// names, and mends about half of the records already invalid.
func (e *erpSim) spoilOf(ids []string, n int) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	changed := 0
	for _, id := range sortedKeys(e.bad) {
		if e.rng.IntN(2) == 0 {
			e.mend(id)
			changed++
		}
	}
	for _, id := range ids {
		if n > 0 && e.spoil(id) {
			n--
			changed++
		}
	}
	return changed
}

// datedBefore reports whether every version of record id is dated before
// t. Callers hold mu.
func (e *erpSim) datedBefore(id string, t time.Time) bool {
	for _, r := range append([]record{e.cur[id]}, e.hist[id]...) {
		if !r.Updated.Before(t) {
			return false
		}
	}
	return true
}

// touch closes the held sets of the open reconciles to record id: it
// changed, went or came back. Callers hold mu.
func (e *erpSim) touch(id string) {
	for _, l := range e.holding {
		delete(l.held, id)
	}
}

// reconciling says execution x is a reconcile, and makes it hide the
// first record of hide the ERP holds, from its first request to the end of
// its first pass.
func (e *erpSim) reconciling(x string, hide []string) {
	e.mu.Lock()
	l := e.logLocked(x)
	l.reconcile, l.hide = true, hide
	e.mu.Unlock()
}

// endHold closes the held set of reconcile x and returns it, with the
// record it hid ("" when none). A record still hidden comes back.
func (e *erpSim) endHold(x string) (map[string]bool, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.logLocked(x)
	e.unhide(l)
	delete(e.holding, x)
	return l.held, l.hidden
}

// unhide restores the record l hides, unchanged. Callers hold mu.
func (e *erpSim) unhide(l *execLog) {
	if r, ok := e.hidden[l.hidden]; ok {
		e.cur[l.hidden] = r
		delete(e.hidden, l.hidden)
	}
}

// recreateAll brings every deleted record back at a higher version.
func (e *erpSim) recreateAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range sortedKeys(e.gone) {
		e.cur[id] = e.gone[id]
		delete(e.gone, id)
		e.change(id)
	}
}

// changeAll changes every valid record once.
func (e *erpSim) changeAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range e.ids() {
		e.change(id)
	}
}

func (e *erpSim) ids() []string { return sortedKeys(e.cur) }

// mutate applies the changes the adversary makes before a page of l.
func (e *erpSim) mutate(l *execLog) {
	if e.frozen || e.budget <= 0 {
		return
	}
	e.budget--
	if len(l.last) > 0 && e.rng.IntN(100) < e.adv.Boundary {
		for i := len(l.last) - 1; i >= 0; i-- {
			if l.last[i].rec != nil {
				e.change(l.last[i].id)
				break
			}
		}
	}
	if e.rng.IntN(100) < e.adv.Change && len(e.cur) > 0 {
		ids := e.ids()
		for range 1 + e.rng.IntN(2) {
			e.change(ids[e.rng.IntN(len(ids))])
		}
	}
	if e.rng.IntN(100) < e.adv.Create {
		e.nextNew++
		r := newRecord(fmt.Sprintf("n%d-%d", e.nextNew, e.rng.IntN(100)), e.rng)
		r.Updated = e.now()
		e.born[bornKey(r.ID, r.Version)] = r.Updated
		e.face.created(e, &r)
		e.put(r)
	}
	if e.rng.IntN(100) < e.adv.Delete && len(e.cur) > 0 {
		if ids := e.deletable(); len(ids) > 0 {
			e.remove(ids[e.rng.IntN(len(ids))])
		}
	}
	if e.rng.IntN(100) < e.adv.Recreate && len(e.gone) > 0 {
		ids := sortedKeys(e.gone)
		id := ids[e.rng.IntN(len(ids))]
		e.cur[id] = e.gone[id] // restored as it was: same version, same updated_at
		delete(e.gone, id)
		if e.rng.IntN(3) > 0 {
			e.change(id) // recreated at a higher version, stamped now
		}
	}
	if e.adv.Spoil > 0 && e.rng.IntN(100) < e.adv.Spoil && len(e.cur) > 0 {
		ids := e.ids()
		e.spoil(ids[e.rng.IntN(len(ids))])
	}
	if e.adv.Mend > 0 && e.rng.IntN(100) < e.adv.Mend && len(e.bad) > 0 {
		ids := sortedKeys(e.bad)
		e.mend(ids[e.rng.IntN(len(ids))])
	}
}

// older returns a version of id older than v, if the ERP had one.
func (e *erpSim) older(id string, v int64) (record, bool) {
	var cands []record
	for _, r := range e.hist[id] {
		if r.Version < v {
			cands = append(cands, r)
		}
	}
	if len(cands) == 0 {
		return record{}, false
	}
	return cands[e.rng.IntN(len(cands))], true
}

// copyOf is a copy of it for a replay or a duplicate: the same version, or
// an older one when the adversary asks for it and one exists.
func (e *erpSim) copyOf(it item) item {
	if it.rec != nil && e.rng.IntN(100) < e.adv.Stale {
		if r, ok := e.older(it.id, it.rec.Version); ok {
			return recordItem(r)
		}
	}
	return it
}

// feed returns every item the ERP holds now, in feed order.
func (e *erpSim) feed() []item {
	items := make([]item, 0, len(e.cur)+len(e.invalid)+len(e.bad))
	for _, r := range e.cur {
		items = append(items, recordItem(r))
	}
	items = append(items, e.invalid...)
	for _, it := range e.bad {
		items = append(items, it)
	}
	slices.SortFunc(items, item.cmp)
	return items
}

// cursorOf and parseCursor are the keyset cursor: (at, id) of the last
// item of a page. Seconds and nanoseconds, since years outside 1678-2262
// overflow UnixNano.
func cursorOf(it item) string {
	return base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%d.%d|%s", it.at.Unix(), it.at.Nanosecond(), it.id)))
}

func parseCursor(s string) (item, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return item{}, err
	}
	ts, id, ok := strings.Cut(string(b), "|")
	sec, nsec, ok2 := strings.Cut(ts, ".")
	if !ok || !ok2 {
		return item{}, fmt.Errorf("cursor %q", s)
	}
	a, err1 := strconv.ParseInt(sec, 10, 64)
	n, err2 := strconv.ParseInt(nsec, 10, 64)
	if err1 != nil || err2 != nil {
		return item{}, fmt.Errorf("cursor %q", s)
	}
	return item{id: id, at: time.Unix(a, n).UTC()}, nil
}

func badRequest(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	b, _ := json.Marshal(map[string]string{"error": msg})
	w.Write(b)
}

func (e *erpSim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if e.face != nil {
		e.serveOData(w, r)
		return
	}
	if e.docs != nil {
		e.serveDocsOData(w, r)
		return
	}
	x, rest, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/x/"), "/")
	if !ok || !strings.HasPrefix(r.URL.Path, "/x/") {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	var since, until time.Time
	var err error
	if v := q.Get("updated_since"); v != "" {
		if since, err = time.Parse(time.RFC3339Nano, v); err != nil {
			badRequest(w, "updated_since: "+err.Error())
			return
		}
	}
	if v := q.Get("updated_until"); v != "" {
		if until, err = time.Parse(time.RFC3339Nano, v); err != nil {
			badRequest(w, "updated_until: "+err.Error())
			return
		}
	}
	inWindow := func(it item) bool {
		return !it.at.Before(since) && (until.IsZero() || it.at.Before(until))
	}
	e.stall(x, rest, q, since, until)

	e.mu.Lock()
	now := e.now()
	w.Header().Set("Date", now.UTC().Format(http.TimeFormat))
	w.Header().Set("Content-Type", "application/json")
	// The typed face serves every item as a contract (erpmock.ContractOf;
	// the documents face as an order with its lines, erpmock.OrderOf),
	// and logs what it served under the execution's id with typedLog.
	render := func(it item) ([]byte, error) { return erpmock.ContractOf(it.raw) }
	if strings.HasPrefix("/"+rest, erpmock.OrdersPath) { // the documents face
		render = func(it item) ([]byte, error) { return erpmock.OrderOfAt(it.raw, it.linesRev) }
		rest = strings.Replace("/"+rest, erpmock.OrdersPath, erpmock.ContractsPath, 1)[1:]
	}
	typed := strings.HasPrefix("/"+rest, erpmock.ContractsPath)
	if typed {
		rest = strings.Replace("/"+rest, erpmock.ContractsPath, "api/v1/memberships", 1)
		x += typedLog
	}
	switch rest {
	case "api/v1/memberships/count":
		n := 0
		for _, it := range e.feed() {
			if inWindow(it) {
				n++
			}
		}
		e.mu.Unlock()
		fmt.Fprintf(w, `{"count":%d}`, n)
		return
	case "api/v1/memberships":
	default:
		e.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	limit := 500
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 1000 {
			e.mu.Unlock()
			badRequest(w, "limit: want 1..1000")
			return
		}
	}
	var after *item
	if v := q.Get("cursor"); v != "" {
		c, err := parseCursor(v)
		if err != nil {
			e.mu.Unlock()
			badRequest(w, "cursor: "+err.Error())
			return
		}
		after = &c
	}
	l, n := e.pageRequest(x)
	var match []item
	for _, it := range e.feed() {
		if inWindow(it) && (after == nil || it.cmp(*after) > 0) {
			match = append(match, it)
		}
	}
	page, base := e.page(l, match, limit, after != nil)
	more := base < len(match)
	hook := e.logServed(x, l, page, more)
	e.mu.Unlock()

	var body strings.Builder
	body.WriteString(`{"data":[`)
	for i, it := range page {
		if i > 0 {
			body.WriteByte(',')
		}
		if !typed {
			body.Write(it.raw)
			continue
		}
		c, err := render(it)
		if err != nil {
			c = it.raw // not an object: no contract either
		}
		body.Write(c)
	}
	body.WriteString(`],"next_cursor":`)
	if more {
		body.WriteString(`"` + cursorOf(match[base-1]) + `"`)
	} else {
		body.WriteString("null")
	}
	body.WriteString("}")
	if hook != nil {
		hook(n)
	}
	w.Write([]byte(body.String()))
}

// pageRequest counts a page request of execution x and lets the
// adversary act before it is answered: it returns x's log and the
// request's number. Callers hold mu.
func (e *erpSim) pageRequest(x string) (*execLog, int) {
	l := e.logLocked(x)
	if l.requests == 0 {
		l.first = e.now()
	}
	l.requests++
	e.hideAt(l, l.requests)
	e.mutate(l)
	return l, l.requests
}

// page builds one page from the items after the cursor: the keyset part
// and the adversary's extras, at most limit items (at least one of them
// from the keyset when any is left). It returns the page and how many items
// of match it holds.
func (e *erpSim) page(l *execLog, match []item, limit int, continued bool) ([]item, int) {
	var extras []item
	if continued && len(l.last) > 0 && e.rng.IntN(100) < e.adv.Replay {
		r := 1 + e.rng.IntN(min(3, len(l.last)))
		for _, it := range l.last[len(l.last)-r:] {
			if !e.absent(it.id) {
				extras = append(extras, e.copyOf(it))
			}
		}
	}
	nExtra := min(len(extras), limit-1)
	if len(match) == 0 {
		nExtra = 0
	}
	base := min(len(match), limit-nExtra)
	page := append([]item(nil), extras[:nExtra]...)
	page = append(page, match[:base]...)
	// Duplicates and stale copies anywhere, while the page has room.
	if len(page) > 0 && len(page) < limit && e.rng.IntN(100) < e.adv.Dup {
		c := e.copyOf(page[e.rng.IntN(len(page))])
		page = slices.Insert(page, e.rng.IntN(len(page)+1), c)
	}
	if len(page) > 0 && len(page) < limit && e.rng.IntN(100) < e.adv.StaleAny && len(e.hist) > 0 {
		ids := sortedKeys(e.hist)
		id := ids[e.rng.IntN(len(ids))]
		if !e.absent(id) {
			h := e.hist[id]
			c := recordItem(h[e.rng.IntN(len(h))])
			page = slices.Insert(page, e.rng.IntN(len(page)+1), c)
		}
	}
	return page, base
}

// hideAt hides, at a reconcile's first request (n), the first record of
// l.hide the ERP holds. Callers hold mu.
func (e *erpSim) hideAt(l *execLog, n int) {
	if n != 1 {
		return
	}
	for _, id := range l.hide {
		if r, ok := e.cur[id]; ok {
			e.touch(id)
			l.hidden = id
			e.hidden[id] = r
			delete(e.cur, id)
			return
		}
	}
}

// logServed logs that page was served to execution x, the last of a pass
// unless more, and returns its page hook: the invalid current copies
// served, and, at the end of a reconcile's first pass, the hidden record
// back unchanged and the held set opened. Callers hold mu.
func (e *erpSim) logServed(x string, l *execLog, page []item, more bool) func(int) {
	for _, it := range page {
		if it.spoilt && e.bad[it.id].at.Equal(it.at) { // the current copy, not a replay of an older one
			l.spoilt[it.id] = it.ver
		}
	}
	if !more && !l.done && l.reconcile {
		e.unhide(l)
		l.held = map[string]bool{}
		for _, it := range e.feed() {
			if it.rec != nil || it.spoilt {
				l.held[it.id] = true
			}
		}
		e.holding[x] = l
	}
	return l.logPage(page, more)
}

// absent reports whether the ERP holds no copy of record id now: deleted,
// or hidden by a reconcile. Callers hold mu.
func (e *erpSim) absent(id string) bool {
	_, gone := e.gone[id]
	_, hidden := e.hidden[id]
	return gone || hidden
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
