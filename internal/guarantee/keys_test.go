package guarantee

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/proctest"
)

// keyRecord is one version of a record of the keys feed: its key as the
// ERP sends it, its fields and its version.
type keyRecord struct {
	Code  string
	Label string
	At    time.Time // a datetime column: milliseconds
	At6   time.Time // a datetime(6) column: microseconds
	Rev   int64
	// Changed is the change cursor, with seven fraction digits as
	// Dataverse and S/4HANA serve it: the cursor is no column.
	Changed time.Time
}

// keysFeed is the ERP of TestExactKeysGuarantee's seed: records of an
// entity whose string keys differ in case, by a trailing or leading space
// or only in what follows the ASCII ("A", "a", "A ", " A", "A  ", "Ä"),
// and items the decoder must refuse, on keys no valid record uses: a key
// with a lone UTF-16 surrogate (two of them, which encoding/json read as
// one U+FFFD), a member given twice whose last copy is valid, a datetime
// with a fourth non-zero fraction digit and, in the feeds with a
// datetime(6) column, one with a seventh. Records change between waves.
type keysFeed struct {
	precise bool // the entity has the datetime(6) column at6

	mu   sync.Mutex
	recs map[string]keyRecord // the current version, by key
	bad  [][]byte             // the items to refuse, served on every page
	now  time.Time
	rng  *rand.Rand
}

// keyVariants are the keys of the feed's records: each differs from
// another in case, by spaces, or in a character past ASCII.
var keyVariants = []string{"A", "a", "A ", " A", "A  ", "Ä", "ä", "B", "b ", "B "}

func newKeysFeed(seed uint64) *keysFeed {
	f := &keysFeed{rng: rand.New(rand.NewPCG(seed, 0xC0DE)), recs: map[string]keyRecord{}, precise: seed%2 == 0,
		now: time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)}
	n := 3 + f.rng.IntN(len(keyVariants)-2)
	for _, i := range f.rng.Perm(len(keyVariants))[:n] {
		f.put(keyVariants[i])
	}
	// Keys that differ by a trailing space always: the case the PAD SPACE
	// collation merged.
	f.put("K")
	f.put("K ")
	tail := func(b []byte) []byte { return append(b, f.tail(1)...) }
	f.bad = [][]byte{
		tail([]byte(`{"code":"S\ud800","label":"lone high"`)),
		tail([]byte(`{"code":"S\udfff","label":"lone low"`)),
		tail([]byte(`{"code":"T2","label":"x","label":"last ok"`)),
		[]byte(fmt.Sprintf(`{"code":"T7","label":"x","at":"2025-01-01T00:00:00.1231Z","at6":"2025-01-01T00:00:00.123Z","rev":1,"changed_at":%q}`, f.stamp())),
	}
	if f.precise {
		f.bad = append(f.bad, []byte(fmt.Sprintf(`{"code":"T8","label":"x","at":"2025-01-01T00:00:00.123Z","at6":"2025-01-01T00:00:00.1234567Z","rev":1,"changed_at":%q}`, f.stamp())))
	}
	return f
}

// stamp advances the ERP's clock and returns it with seven fraction
// digits.
func (f *keysFeed) stamp() string {
	f.now = f.now.Add(time.Duration(1+f.rng.IntN(1e6)) * 100)
	return f.now.Format("2006-01-02T15:04:05.0000000Z")
}

// tail is the members after label of a valid item at version rev.
func (f *keysFeed) tail(rev int64) string {
	return fmt.Sprintf(`,"at":"2025-01-01T00:00:00.123Z","at6":"2025-01-01T00:00:00.123Z","rev":%d,"changed_at":%q}`, rev, f.stamp())
}

// put makes a new version of the record code.
func (f *keysFeed) put(code string) {
	r := f.recs[code]
	r.Code, r.Rev = code, r.Rev+1
	r.Label = fmt.Sprintf("%s v%d", strings.TrimSpace(code), r.Rev)
	r.At = time.Date(2025, 1, 1, 0, 0, f.rng.IntN(60), f.rng.IntN(1000)*1e6, time.UTC)
	r.At6 = r.At
	if f.precise {
		r.At6 = r.At6.Add(time.Duration(f.rng.IntN(1000)) * time.Microsecond)
	}
	r.Changed, _ = time.Parse(time.RFC3339Nano, f.stamp())
	f.recs[code] = r
}

// intn draws from the feed's generator, which the server shares.
func (f *keysFeed) intn(n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.IntN(n)
}

// change makes new versions of some records.
func (f *keysFeed) change() {
	f.mu.Lock()
	defer f.mu.Unlock()
	codes := f.codes()
	for _, i := range f.rng.Perm(len(codes))[:1+f.rng.IntN(len(codes))] {
		f.put(codes[i])
	}
}

func (f *keysFeed) codes() []string {
	codes := make([]string, 0, len(f.recs))
	for c := range f.recs {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return codes
}

// ServeHTTP serves every item on one page, the invalid ones among them.
func (f *keysFeed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if strings.HasSuffix(r.URL.Path, "/count") {
		fmt.Fprintf(w, `{"count":%d}`, len(f.recs)+len(f.bad))
		return
	}
	var items [][]byte
	for _, c := range f.codes() {
		rec := f.recs[c]
		item := map[string]any{"code": rec.Code, "label": rec.Label, "at": rec.At.Format(tsLayout),
			"at6": rec.At6.Format("2006-01-02T15:04:05.000000Z"), "rev": rec.Rev, "changed_at": rec.Changed.Format("2006-01-02T15:04:05.0000000Z")}
		b, _ := json.Marshal(item)
		items = append(items, b)
	}
	items = append(items, f.bad...)
	f.rng.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
	fmt.Fprintf(w, `{"data":[%s],"next_cursor":null}`, joinItems(items))
}

func joinItems(items [][]byte) []byte {
	var b []byte
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return b
}

// config is the feed's config file.
func (f *keysFeed) config(url string) string {
	at6 := ""
	if f.precise {
		at6 = "\n      - {name: at6, type: datetime(6)}"
	}
	return fmt.Sprintf(`erp:
  kind: rest
  url: %s
events:
  sink: nats
  url: nats://127.0.0.1:4222
entities:
  - name: codes
    source: /items
    key: [code]
    updated_at: changed_at
    version: rev
    events: true
    columns:
      - {name: code, type: string(8)}
      - {name: label, type: string(16)}
      - {name: at, type: datetime}%s
`, url, at6)
}

// TestExactKeysGuarantee: keys compare exactly as the ERP sends them. Over
// waves of overlapping `erpsync run` processes, the table holds one row
// per distinct key, byte for byte, at its latest version and fields (a
// datetime(6) with its microseconds), and the outbox an insert for each
// and an update for each later version it wrote, under that key's exact
// JSON; the items the decoder must refuse are quarantined and have no row.
func TestExactKeysGuarantee(t *testing.T) {
	feeds := 4
	if testing.Short() {
		feeds = 2
	}
	for seed := range uint64(feeds) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			exactKeysFeed(t, seed)
		})
	}
}

func exactKeysFeed(t *testing.T, seed uint64) {
	f := newKeysFeed(seed)
	srv := httptest.NewServer(f)
	defer srv.Close()
	env := proctest.New(t, erpsyncBin(t), erpmock.Options{Records: 1, Seed: 1})
	env.ERPURL = srv.URL
	cfg := filepath.Join(t.TempDir(), "codes.yaml")
	if err := os.WriteFile(cfg, []byte(f.config(srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := env.Run(context.Background(), "migrate", "--config", cfg); r.Code != 0 {
		t.Fatalf("migrate exit %d: %s", r.Code, r.Out())
	}
	run := func() {
		var ps []*proctest.Proc
		for range 1 + f.intn(3) {
			ps = append(ps, env.Start("run", "--config", cfg, "--max-invalid", "100%", "--lock-ttl", "2s"))
		}
		for _, p := range ps {
			if res := p.Wait(); res.Code != 0 {
				t.Errorf("run exit %d: %.2000s", res.Code, res.Out())
			}
		}
	}
	waves := 2 + f.intn(2)
	for w := range waves {
		run()
		if w < waves-1 {
			f.change()
		}
	}
	// Every process of a wave may have been skipped but one, which saw
	// the ERP as it was: one more run.
	run()
	checkExactKeys(t, env, f)
}

// checkExactKeys compares the table and the outbox with the model.
func checkExactKeys(t *testing.T, env *proctest.Env, f *keysFeed) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	at6 := "at"
	if f.precise {
		at6 = "at6"
	}
	rows, err := env.DB.Query("SELECT code, label, at, " + at6 + ", erp_version FROM " + env.Table("codes"))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]keyRecord{}
	for rows.Next() {
		var r keyRecord
		var at, at6 sql.NullTime
		if err := rows.Scan(&r.Code, &r.Label, &at, &at6, &r.Rev); err != nil {
			t.Fatal(err)
		}
		r.At, r.At6 = at.Time.UTC(), at6.Time.UTC()
		if _, dup := got[r.Code]; dup {
			t.Errorf("key %q: two rows", r.Code)
		}
		got[r.Code] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for code, want := range f.recs {
		g, ok := got[code]
		if !f.precise {
			want.At6 = want.At
		}
		switch {
		case !ok:
			t.Errorf("key %q: no row (keys %q)", code, slices.Sorted(mapsKeys(got)))
		case g.Label != want.Label || g.Rev != want.Rev || !g.At.Equal(want.At) || !g.At6.Equal(want.At6):
			t.Errorf("key %q: row %+v, want %+v", code, g, want)
		}
		delete(got, code)
	}
	for code, g := range got {
		t.Errorf("key %q: a row the ERP has no valid record of: %+v", code, g)
	}
	// The outbox: per key, its exact JSON, an insert at some version and
	// updates up to the latest, each version once.
	evs, err := env.DB.Query("SELECT entity_key, op, version FROM " + env.Table("erpsync_events") + " ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Close()
	type evKey struct {
		key     string
		version int64
	}
	inserts, last, seen := map[string]int{}, map[string]int64{}, map[evKey]bool{}
	for evs.Next() {
		var key, op string
		var v int64
		if err := evs.Scan(&key, &op, &v); err != nil {
			t.Fatal(err)
		}
		var k struct{ Code string }
		if err := json.Unmarshal([]byte(key), &k); err != nil {
			t.Fatalf("event key %s: %v", key, err)
		}
		want, ok := f.recs[k.Code]
		switch {
		case !ok:
			t.Errorf("an event of key %s, which has no valid record", key)
		case op == "insert":
			inserts[k.Code]++
		case seen[evKey{k.Code, v}]:
			t.Errorf("key %s: two events at version %d", key, v)
		case v > want.Rev:
			t.Errorf("key %s: an event at version %d past the ERP's %d", key, v, want.Rev)
		}
		seen[evKey{k.Code, v}] = true
		last[k.Code] = max(last[k.Code], v)
	}
	if err := evs.Err(); err != nil {
		t.Fatal(err)
	}
	for code, want := range f.recs {
		if inserts[code] != 1 || last[code] != want.Rev {
			t.Errorf("key %q: %d inserts, events up to version %d; want 1 and %d", code, inserts[code], last[code], want.Rev)
		}
	}
	var quarantined int
	if err := env.DB.QueryRow("SELECT COUNT(*) FROM " + env.Table("quarantined_records") + " WHERE job = 'codes'").Scan(&quarantined); err != nil {
		t.Fatal(err)
	}
	if quarantined != len(f.bad) {
		t.Errorf("%d items quarantined, want the %d the decoder must refuse", quarantined, len(f.bad))
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
