package verify_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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
 VALUES ('B', 'U2', 'P', 'ACTIVE', ?, NULL, 1, ?, 1, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))`, starts, updated).Error; err != nil {
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
