package verify_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/internal/verify"
)

// TestVerifyReadsTimesAsTheTableStoresThem: an ERP that serves seven
// fraction digits (Dataverse, Business Central, S/4HANA) in its change
// cursor. A row written by erpsync holds erp_updated_at truncated to the
// millisecond on any server; a row MySQL 8 stored from a writer that sent
// them all holds it rounded. verify finds both current, not stale for
// ever. (A column's value with more digits than its datetime keeps is
// invalid, never cut; trailing zeros are no digits.)
func TestVerifyReadsTimesAsTheTableStoresThem(t *testing.T) {
	t.Parallel()
	st, _ := testenv.MigratedStore(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/memberships/count" {
			w.Write([]byte(`{"count":2}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"data":[
{"erp_id":"A","member_id":"U1","product_code":"P","status":"ACTIVE","starts_at":"2025-01-01T10:00:00.9990Z","ends_at":"2025-03-01T10:00:00.123Z","version":3,"updated_at":"2025-02-01T10:00:00.4567891Z"},
{"erp_id":"B","member_id":"U2","product_code":"P","status":"ACTIVE","starts_at":"2025-01-01T10:00:00.999000Z","ends_at":null,"version":1,"updated_at":"2025-02-01T10:00:00.4567891Z"}],"next_cursor":null}`))
	}))
	defer srv.Close()
	src, err := erp.New(erp.Config{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	page, err := src.Page(ctx, erp.Query{})
	if err != nil || len(page.Records) != 2 {
		t.Fatalf("page: %v, %+v", err, page)
	}
	// A through the store (truncated), B as MySQL 8 rounded it.
	a := page.Records[0]
	if err := st.Insert(ctx, []store.Membership{{ErpID: a.ErpID, MemberID: a.MemberID, ProductCode: a.ProductCode, Status: a.Status,
		StartsAt: a.StartsAt, EndsAt: a.EndsAt, Version: a.Version, UpdatedAt: a.UpdatedAt, Fence: 1}}); err != nil {
		t.Fatal(err)
	}
	b := page.Records[1]
	_, starts := store.StoredForms(b.StartsAt)
	_, updated := store.StoredForms(b.UpdatedAt)
	if err := st.DB().Exec(`INSERT INTO memberships (erp_id, member_id, product_code, status, starts_at, ends_at, erp_version, erp_updated_at, fence_token, created_at, updated_at)
 VALUES ('B', 'U2', 'P', 'ACTIVE', ?, NULL, 1, ?, 1, ?, ?)`, starts, updated, time.Now().UTC(), time.Now().UTC()).Error; err != nil {
		t.Fatal(err)
	}
	var stored time.Time
	if err := st.DB().Raw("SELECT starts_at FROM memberships WHERE erp_id = 'A'").Scan(&stored).Error; err != nil || !stored.Equal(time.Date(2025, 1, 1, 10, 0, 0, 999e6, time.UTC)) {
		t.Fatalf("A's starts_at is stored as %s (%v), want it truncated to .999", stored, err)
	}
	res, err := verify.Verify(ctx, src, st, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || res.Matching != 2 {
		t.Fatalf("verify: matching %d, stale %+v; want both rows current", res.Matching, res.Stale)
	}
}

// A scan in parts sees every record the ERP holds, as one pass does, while
// records change under it: a record of a part not yet paged moves to the
// end of the feed, past a last part that is done already; the pass after
// the parts reads it there. The first part waits after its first page
// until the last part is done, and most records change then.
func TestScanPartsSeesRecordsThatMove(t *testing.T) {
	t.Parallel()
	m := erpmock.New(erpmock.Options{Records: 4000, Seed: 81})
	srv := httptest.NewServer(m)
	defer srv.Close()
	src, err := erp.New(erp.Config{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{Client: src, lastDone: make(chan struct{}), change: func() { m.Change(3000) }}
	f, err := verify.ScanParts(context.Background(), g, store.MySQL, 50, 8, false)
	if err != nil {
		t.Fatal(err)
	}
	truth := m.Truth()
	var missed []string
	for _, r := range truth {
		if !f.Has(r.ErpID) {
			missed = append(missed, r.ErpID)
		}
	}
	if len(missed) > 0 || f.Records() != int64(len(truth)) {
		t.Fatalf("the scan in parts saw %d records of %d; missed %d, like %v", f.Records(), len(truth), len(missed), missed[:min(len(missed), 5)])
	}
}

// gate holds the first part of a scan after its first page until the last
// part (the one open at the end) has served its last page, and runs change
// then.
type gate struct {
	*erp.Client
	once     sync.Once
	lastDone chan struct{}
	change   func()
}

func (g *gate) Page(ctx context.Context, q erp.Query) (*erp.Page, error) {
	if q.Since.IsZero() && !q.Until.IsZero() && q.Cursor != "" {
		<-g.lastDone
	}
	p, err := g.Client.Page(ctx, q)
	if err == nil && !q.Since.IsZero() && q.Until.IsZero() && p.NextCursor == "" {
		g.once.Do(func() {
			g.change()
			close(g.lastDone)
		})
	}
	return p, err
}

// TestSupersededInvalidCopyIsNoFinding: a feed that replays an old invalid
// copy of a record whose newest copy is valid (A) has nothing invalid to
// report once the table holds that newest copy; a record whose newest
// copy is invalid (B) is a finding, whatever valid copies came before.
func TestSupersededInvalidCopyIsNoFinding(t *testing.T) {
	t.Parallel()
	st, _ := testenv.MigratedStore(t)
	item := func(id, status string, version int) string {
		return fmt.Sprintf(`{"erp_id":%q,"member_id":"U1","product_code":"P","status":%q,"starts_at":"2025-01-01T10:00:00Z","ends_at":null,"version":%d,"updated_at":"2025-02-0%dT10:00:00Z"}`, id, status, version, version)
	}
	var served atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"data":[` + served.Load().(string) + `],"next_cursor":null}`))
	}))
	defer srv.Close()
	src, err := erp.New(erp.Config{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	served.Store(strings.Join([]string{item("A", "BOGUS", 3), item("A", "ACTIVE", 5), item("A", "BOGUS", 2)}, ","))
	page, err := src.Page(ctx, erp.Query{})
	if err != nil || len(page.Records) != 1 || len(page.Invalid) != 2 {
		t.Fatalf("page: %v, %+v", err, page)
	}
	a := page.Records[0]
	if err := st.Insert(ctx, []store.Membership{{ErpID: a.ErpID, MemberID: a.MemberID, ProductCode: a.ProductCode, Status: a.Status,
		StartsAt: a.StartsAt, Version: a.Version, UpdatedAt: a.UpdatedAt, Fence: 1}}); err != nil {
		t.Fatal(err)
	}
	res, err := verify.Verify(ctx, src, st, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || res.FeedInvalid != 0 {
		t.Fatalf("verify of A's old invalid copies replayed: ok %v, feed_invalid %d; want OK and none", res.OK(), res.FeedInvalid)
	}
	// B's newest copy is invalid: a finding, its row quarantined.
	served.Store(strings.Join([]string{item("A", "BOGUS", 3), item("A", "ACTIVE", 5), item("B", "ACTIVE", 1), item("B", "BOGUS", 2)}, ","))
	page, err = src.Page(ctx, erp.Query{})
	if err != nil || len(page.Records) != 2 {
		t.Fatalf("page: %v, %+v", err, page)
	}
	b := page.Records[1]
	if err := st.Insert(ctx, []store.Membership{{ErpID: b.ErpID, MemberID: b.MemberID, ProductCode: b.ProductCode, Status: b.Status,
		StartsAt: b.StartsAt, Version: b.Version, UpdatedAt: b.UpdatedAt, Fence: 1}}); err != nil {
		t.Fatal(err)
	}
	if res, err = verify.Verify(ctx, src, st, 1000); err != nil {
		t.Fatal(err)
	}
	if res.FeedInvalid != 1 || res.Quarantined.Count != 1 || res.Quarantined.IDs[0] != "B" {
		t.Fatalf("verify of B's invalid newest copy: feed_invalid %d, quarantined %+v; want B", res.FeedInvalid, res.Quarantined)
	}
}
