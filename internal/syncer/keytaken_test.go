package syncer

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/lock"
)

// TestKeysTheIndexCannotTellApartAreQuarantined: on a key column whose
// collation holds two keys equal (here a case-insensitive one made by
// hand: utf8mb4_general_ci on MySQL, a nondeterministic ICU collation on
// PostgreSQL; a MySQL server without a NO PAD binary collation does it for
// a trailing space), the second record is quarantined with a reason, never
// written over the first one's row.
func TestKeysTheIndexCannotTellApartAreQuarantined(t *testing.T) {
	t.Parallel()
	ab := strings.Replace(hostileItem, `"U1"`, `"first"`, 1)
	abUpper := strings.NewReplacer(`"ab"`, `"AB"`, `"U1"`, `"second"`, `"version":3`, `"version":4`).Replace(hostileItem)
	page := []byte(`{"data":[` + ab + "," + abUpper + `],"next_cursor":null}`)
	e, err := erp.New(erp.Config{BaseURL: servePage(t, page, 2), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	st, dsn := testenv.MigratedStore(t)
	caseless := []string{"ALTER TABLE memberships MODIFY erp_id VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL"}
	exact := "erp_id = 'AB' COLLATE utf8mb4_bin"
	if testenv.IsPostgres(dsn) {
		caseless = []string{
			"CREATE COLLATION caseless (provider = icu, locale = 'und-u-ks-level2', deterministic = false)",
			"ALTER TABLE memberships ALTER COLUMN erp_id TYPE VARCHAR(64) COLLATE caseless",
		}
		exact = "erp_id = 'AB'" // quarantined_records' erp_id is byte for byte
	}
	for _, q := range caseless {
		if err := st.DB().Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	locks := lock.New(testenv.Redis(t), &lock.Options{Prefix: testenv.RandomName("erpsync-test:") + ":"})
	s, err := New(Config{Job: testenv.RandomName("job-")}, e, st, locks, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	for run := range 2 { // the second run finds the same, and merges nothing either
		rep, err := s.Run(context.Background())
		if err != nil || rep.Status != store.StatusSucceeded || rep.Invalid != 1 || rep.Failed != 0 || rep.Inserted != int64(1-run) {
			t.Fatalf("run %d: %v, %+v", run, err, rep)
		}
	}
	var rows []struct {
		ErpID, MemberID string
		ErpVersion      int64
	}
	if err := st.DB().Raw("SELECT erp_id, member_id, erp_version FROM memberships").Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].ErpID != "ab" || rows[0].MemberID != "first" || rows[0].ErpVersion != 3 {
		t.Fatalf("memberships %+v, want ab's row as ab wrote it", rows)
	}
	var reason string
	if err := st.DB().Raw("SELECT reason FROM quarantined_records WHERE " + exact).Scan(&reason).Error; err != nil {
		t.Fatal(err)
	}
	if want := `key "AB": the table's key index holds it equal to the key "ab" of another row (its collation does not compare byte for byte); not merged into that row: run erpsync migrate`; !strings.HasPrefix(reason, want) {
		t.Errorf("reason %q, want %q", reason, want)
	}
}

// servePage serves page as every page of a feed of count items, and
// returns its URL.
func servePage(t *testing.T, page []byte, count int) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/count") {
			fmt.Fprintf(w, `{"count":%d}`, count)
			return
		}
		w.Write(page)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// lockRecorder is a Locker that records the keys it is asked to lock.
type lockRecorder struct {
	Locker
	mu   sync.Mutex
	keys map[string]bool
}

func (l *lockRecorder) Obtain(ctx context.Context, key string, ttl time.Duration, opt *lock.ObtainOptions) (*lock.Lock, error) {
	l.mu.Lock()
	l.keys[key] = true
	l.mu.Unlock()
	return l.Locker.Obtain(ctx, key, ttl, opt)
}

// TestKeysThatDifferAreThreeRecords: "A", "a" and "A " (a trailing space)
// of a typed entity are three rows, taken under three record locks, with
// three change events.
func TestKeysThatDifferAreThreeRecords(t *testing.T) {
	t.Parallel()
	e := &entity.Entity{Name: "codes", Sources: []entity.Source{{Name: "codes"}}, Key: []string{"code"}, UpdatedAt: []string{"u"}, Events: true,
		Columns: []entity.Column{{Name: "code", Type: entity.Type{Kind: entity.String, Length: 8}}}}
	schema, err := erp.Compile(e, e.Sources[0])
	if err != nil {
		t.Fatal(err)
	}
	page := []byte(`{"data":[{"code":"A","u":"2025-01-01T00:00:00Z"},{"code":"a","u":"2025-01-01T00:00:00Z"},{"code":"A ","u":"2025-01-01T00:00:00Z"}],"next_cursor":null}`)
	src, err := erp.New(erp.Config{BaseURL: servePage(t, page, 3), Timeout: 5 * time.Second, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := testenv.MigratedStore(t)
	p, err := st.PlanEntities(context.Background(), []*entity.Entity{e})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplyEntities(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	tab, err := store.Compile(e)
	if err != nil {
		t.Fatal(err)
	}
	locks := &lockRecorder{Locker: lock.New(testenv.Redis(t), &lock.Options{Prefix: testenv.RandomName("erpsync-test:") + ":"}), keys: map[string]bool{}}
	s, err := New(Config{Job: "codes", Entity: "codes"}, src, st.For(tab), locks, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Run(context.Background())
	if err != nil || rep.Status != store.StatusSucceeded || rep.Inserted != 3 {
		t.Fatalf("run: %v, %+v", err, rep)
	}
	for _, k := range []string{"A", "a", "A "} {
		if !locks.keys[EntityLockKey("codes", k)] {
			t.Errorf("no lock taken on %q (locks %q)", EntityLockKey("codes", k), slices.Sorted(maps.Keys(locks.keys)))
		}
	}
	var n, events int
	if err := st.DB().Raw("SELECT (SELECT COUNT(*) FROM codes), (SELECT COUNT(DISTINCT entity_key) FROM erpsync_events WHERE entity = 'codes')").Row().Scan(&n, &events); err != nil || n != 3 || events != 3 {
		t.Errorf("%d rows, %d event keys (%v), want 3 and 3", n, events, err)
	}
}
