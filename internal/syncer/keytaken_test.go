package syncer

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/lock"
)

// TestKeysTheIndexCannotTellApartAreQuarantined: on a key column whose
// collation holds two keys equal (here a case-insensitive one made by
// hand; a server without a NO PAD binary collation does it for a trailing
// space), the second record is quarantined with a reason, never written
// over the first one's row.
func TestKeysTheIndexCannotTellApartAreQuarantined(t *testing.T) {
	t.Parallel()
	ab := strings.Replace(hostileItem, `"U1"`, `"first"`, 1)
	abUpper := strings.NewReplacer(`"ab"`, `"AB"`, `"U1"`, `"second"`, `"version":3`, `"version":4`).Replace(hostileItem)
	page := []byte(`{"data":[` + ab + "," + abUpper + `],"next_cursor":null}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/count") {
			w.Write([]byte(`{"count":2}`))
			return
		}
		w.Write(page)
	}))
	t.Cleanup(srv.Close)
	e, err := erp.New(erp.Config{BaseURL: srv.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := testenv.MigratedStore(t)
	if err := st.DB().Exec("ALTER TABLE memberships MODIFY erp_id VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL").Error; err != nil {
		t.Fatal(err)
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
	if err := st.DB().Raw("SELECT reason FROM quarantined_records WHERE erp_id = 'AB' COLLATE utf8mb4_bin").Scan(&reason).Error; err != nil {
		t.Fatal(err)
	}
	if want := `key "AB": the table's key index holds it equal to the key "ab" of another row (its collation does not compare byte for byte); not merged into that row: run erpsync migrate`; !strings.HasPrefix(reason, want) {
		t.Errorf("reason %q, want %q", reason, want)
	}
}
