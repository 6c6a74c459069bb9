package syncer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
	"github.com/erpsync/erpsync/internal/testenv"
)

// markCopy is one copy of a record the ERP served: version n of its
// history (a later version is a later updated_at), valid or not, and
// whether its version and updated_at can be read.
type markCopy struct {
	n                  int
	invalid            bool
	noVersion, noStamp bool
}

// item is c as an item of the contract's feed.
func (c markCopy) item(id string) string {
	status := "ACTIVE"
	if c.invalid {
		status = "BOGUS"
	}
	s := fmt.Sprintf(`{"erp_id":%q,"member_id":"U%d","product_code":"GYM","status":%q,"starts_at":"2024-01-01T00:00:00Z"`, id, c.n, status)
	if !c.noVersion {
		s += `,"version":` + strconv.Itoa(c.n)
	}
	if !c.noStamp {
		s += `,"updated_at":"` + markEpoch.AddDate(0, 0, c.n).Format(time.RFC3339) + `"`
	}
	return s + "}"
}

var markEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// TestMarksAcrossRunsMatchAModel: whatever runs and reconciles meet the
// copies of a record, in whatever order, one a run or two in one run, the
// row ends as the model of the ERP says. The model: the row holds the
// highest valid version served, and is marked quarantined when the newest
// copy served (the highest version; a copy without a readable version
// placed by its updated_at) is invalid, at that copy's version when it
// can be read.
//
// Half of the records have a row before their first invalid copy is
// served (the first run writes a valid version 1 of them); the others are
// new, their copies served to one run or spread over several, so that a
// run may meet an invalid copy before the record has a row and another
// make the row later from an older valid copy. Reconciles between the
// runs, and maybe after the last, are each served one copy of every
// record, so a reconcile too may meet an invalid copy before a run makes
// the row. A history's versions are valid, invalid, and invalid without a
// readable version or, in other histories, without a readable updated_at.
// Left out: an invalid copy without a version next to one without an
// updated_at in one history (neither can be placed against the other), and
// an invalid copy with neither (it counts as newest whenever a run meets
// it).
//
// Seeds: ERPSYNC_PROPERTY_SEED replays one.
func TestMarksAcrossRunsMatchAModel(t *testing.T) {
	t.Parallel()
	rng := testenv.PropertyRand(t, 36)
	for i := range 10 {
		sub := rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))
		t.Run(fmt.Sprint(i), func(t *testing.T) { marksAgainstModel(t, sub) })
	}
}

func marksAgainstModel(t *testing.T, rng *rand.Rand) {
	const records = 48
	// runs[k] are the copies run k is served, a page each record at most
	// once; two copies of one record in one run go on separate pages.
	runs := make([][]map[string]markCopy, 1) // run 0: version 1 of the records with a row
	serve := func(k, page int, id string, c markCopy) {
		for len(runs) <= k {
			runs = append(runs, nil)
		}
		for len(runs[k]) <= page {
			runs[k] = append(runs[k], map[string]markCopy{})
		}
		runs[k][page][id] = c
	}
	served := map[string][]markCopy{}
	hists := map[string][]markCopy{}
	ids := make([]string, records)
	first := map[string]markCopy{}
	for r := range records {
		id := fmt.Sprintf("r%02d", r)
		ids[r] = id
		// Half of the records are new: no row before this history; a
		// quarter have all of it served to one run, a copy a page.
		fresh := r%2 == 0
		oneRun := r%4 == 0
		if !fresh {
			first[id] = markCopy{n: 1}
			served[id] = []markCopy{first[id]}
		}
		// A history's invalid copies lack a version, or an updated_at, not
		// both kinds in one history: the two cannot be placed against each
		// other.
		noStamp := rng.IntN(3) == 0
		var hist []markCopy
		for n, last := 2, 2+rng.IntN(6); n <= last; n++ {
			c := markCopy{n: n}
			switch rng.IntN(8) {
			case 0, 1, 2:
				c.invalid = true
				c.noVersion, c.noStamp = !noStamp, noStamp
			case 3, 4:
				c.invalid = true
			}
			hist = append(hist, c)
		}
		// Served: some of its copies, some twice, in any order.
		var order []markCopy
		for _, c := range hist {
			for range rng.IntN(3) {
				order = append(order, c)
			}
		}
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		served[id] = append(served[id], order...)
		hists[id] = hist
		if oneRun {
			k := 1 + rng.IntN(3)
			for i, c := range order {
				serve(k, i, id, c)
			}
			continue
		}
		k := 1
		for i := 0; i < len(order); i++ {
			serve(k, 0, id, order[i])
			if i+1 < len(order) && rng.IntN(4) == 0 { // the next copy in the same run, a page later
				i++
				serve(k, 1, id, order[i])
			}
			k++
		}
	}
	runs[0] = []map[string]markCopy{first}
	// Reconciles go between the runs, and maybe after the last: each is
	// served one copy of every record, any of its history, as a scan of
	// the ERP at some moment would be.
	type execution struct {
		reconcile bool
		pages     []map[string]markCopy
	}
	reconcileOf := func() execution {
		x := execution{reconcile: true}
		for r, id := range ids {
			if r%16 == 0 {
				x.pages = append(x.pages, map[string]markCopy{})
			}
			c := hists[id][rng.IntN(len(hists[id]))]
			x.pages[len(x.pages)-1][id] = c
			served[id] = append(served[id], c)
		}
		return x
	}
	var execs []execution
	for k, run := range runs {
		if k > 0 && rng.IntN(4) == 0 {
			execs = append(execs, reconcileOf())
		}
		execs = append(execs, execution{pages: run})
	}
	if rng.IntN(3) == 0 {
		execs = append(execs, reconcileOf())
	}

	var mu sync.Mutex
	var pages []map[string]markCopy
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/count") {
			n := 0
			for _, p := range pages {
				n += len(p)
			}
			fmt.Fprintf(w, `{"count":%d}`, n)
			return
		}
		i, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		var items []string
		if i < len(pages) {
			for _, id := range slices.Sorted(maps.Keys(pages[i])) {
				items = append(items, pages[i][id].item(id))
			}
		}
		next := "null"
		if i+1 < len(pages) {
			next = strconv.Quote(strconv.Itoa(i + 1))
		}
		fmt.Fprintf(w, `{"data":[%s],"next_cursor":%s}`, strings.Join(items, ","), next)
	}))
	t.Cleanup(srv.Close)
	src, err := erp.New(erp.Config{BaseURL: srv.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	st, locks, job := markWorld(t)
	var log []string
	for k, x := range execs {
		mu.Lock()
		pages = x.pages
		mu.Unlock()
		what := "run"
		if x.reconcile {
			what = "reconcile"
		}
		for p, page := range x.pages {
			for _, id := range slices.Sorted(maps.Keys(page)) {
				log = append(log, fmt.Sprintf("%s %d page %d: %s %s", what, k, p, id, page[id]))
			}
		}
		if x.reconcile {
			if rep, err := reconcileOnce(job, src, st, locks); err != nil || rep.Status != store.StatusSucceeded {
				t.Fatalf("reconcile %d: %v, %+v", k, err, rep)
			}
			continue
		}
		s, err := syncer.New(syncer.Config{Job: job, Mode: syncer.ModeBackfill, Since: markEpoch.AddDate(-1, 0, 0), ChunkSize: 1 + rng.IntN(8)}, src, st, locks, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		if rep, err := s.Run(context.Background()); err != nil || rep.Status != store.StatusSucceeded {
			t.Fatalf("run %d: %v, %+v", k, err, rep)
		}
	}

	type state struct {
		Version int64
		Marked  bool
		Mark    *int64
	}
	var rows []struct {
		ErpID   string
		Version int64
		Marked  bool
		Mark    *int64
	}
	if err := st.DB().Raw("SELECT erp_id, erp_version AS version, quarantined_at IS NOT NULL AS marked, quarantined_version AS mark FROM memberships").Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	got := map[string]state{}
	for _, r := range rows {
		got[r.ErpID] = state{r.Version, r.Marked, r.Mark}
	}
	var wrong []string
	for _, id := range ids {
		cs := served[id]
		if len(cs) == 0 {
			continue // a new record none of whose copies was served
		}
		var want state
		newest := slices.MaxFunc(cs, func(a, b markCopy) int { return a.n - b.n })
		for _, c := range cs {
			if !c.invalid {
				want.Version = max(want.Version, int64(c.n))
			}
		}
		want.Marked = newest.invalid && want.Version > 0
		g := got[id]
		switch {
		case g.Version != want.Version || g.Marked != want.Marked:
		case want.Marked && !newest.noVersion && (g.Mark == nil || *g.Mark != int64(newest.n)):
		default:
			continue
		}
		wrong = append(wrong, fmt.Sprintf("%s: version %d, marked %t at %s; want version %d, marked %t (newest copy served: %s)",
			id, g.Version, g.Marked, markOf(g.Mark), want.Version, want.Marked, newest))
	}
	if len(wrong) > 0 {
		var trail []string
		for _, id := range wrong {
			id = id[:strings.Index(id, ":")]
			for _, l := range log {
				if strings.Contains(l, " "+id+" ") {
					trail = append(trail, l)
				}
			}
		}
		t.Errorf("%d of %d rows differ from the model:\n%s\nserved:\n%s", len(wrong), records, strings.Join(wrong, "\n"), strings.Join(trail, "\n"))
	}
}

func (c markCopy) String() string {
	b, _ := json.Marshal(struct {
		V                  int
		Invalid            bool
		NoVersion, NoStamp bool
	}{c.n, c.invalid, c.noVersion, c.noStamp})
	return string(b)
}

func markOf(m *int64) string {
	if m == nil {
		return "NULL"
	}
	return strconv.FormatInt(*m, 10)
}
