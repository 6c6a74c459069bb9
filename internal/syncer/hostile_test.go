package syncer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/lock"
)

// hostileItem is a valid item; the cases change it.
const hostileItem = `{"erp_id":"ab","member_id":"U1","product_code":"GYM","status":"ACTIVE",` +
	`"starts_at":"2024-01-01T00:00:00Z","version":3,"updated_at":"2025-01-01T00:00:00.001Z"}`

// TestHostileItemsAreQuarantinedNeverWritten serves one page of hostile
// items over real HTTP and runs the syncer against the real MariaDB and
// Redis: each bad item lands in the quarantine with its reason, the run
// goes on, and ids that differ only in case are two rows behind two locks.
func TestHostileItemsAreQuarantinedNeverWritten(t *testing.T) {
	t.Parallel()
	with := func(from, to string) string { return strings.Replace(hostileItem, from, to, 1) }
	bad := []struct{ item, reason string }{
		{with(`"ab"`, `"a{b}"`), `erp_id: character '{' not allowed`},
		{with(`"ab"`, `"x}"`), `erp_id: character '}' not allowed`},
		{with(`"ab"`, `"rec:ab"`), `erp_id: character ':' not allowed`},
		{with(`"U1"`, `"U\u0000"`), `member_id: control character U+0000 not allowed`},
		{with(`"U1"`, `"\u001b]0;pwned\u0007"`), `member_id: control character U+001B not allowed`},
		{with(`"U1"`, "\"U\xff\xfe\""), `member_id: not valid UTF-8`},
		{with(`"U1"`, `"`+strings.Repeat("x", 1<<20)+`"`), `member_id: longer than 64 characters`},
		{with(`"version":3`, `"version":`+strings.Repeat("9", 5000)), `version: 9999999999999999999999999999999999999999... is out of the int64 range`},
		{with(`"2024-01-01T00:00:00Z"`, `"9999-12-31T23:59:59-23:59"`), `a date-time outside the years 1000-9999`},
		{with(`"2024-01-01T00:00:00Z"`, `"0999-12-31T23:59:59Z"`), `a date-time outside the years 1000-9999`},
		{`{"erp_id":"` + strings.Repeat("{", 300) + `"}`, `erp_id: longer than 64 characters`},
	}
	items := []string{hostileItem, with(`"ab"`, `"AB"`)}
	for _, b := range bad {
		items = append(items, b.item)
	}
	page := []byte(`{"data":[` + strings.Join(items, ",") + `],"next_cursor":null}`)
	e, err := erp.New(erp.Config{BaseURL: servePage(t, page, 13), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := testenv.MigratedStore(t)
	locks := lock.New(testenv.Redis(t), &lock.Options{Prefix: testenv.RandomName("erpsync-test:") + ":"})
	s, err := New(Config{Job: testenv.RandomName("job-"), ChunkSize: 4}, e, st, locks, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Run(context.Background())
	if err != nil || rep.Status != store.StatusSucceeded {
		t.Fatalf("run: %v, %+v, error %v", err, rep, rep.Error)
	}
	if rep.Inserted != 2 || rep.Invalid != int64(len(bad)) || rep.Failed != 0 {
		t.Fatalf("counters: %+v, want 2 inserted and %d invalid", rep.Counters, len(bad))
	}
	var ids []string
	if err := st.DB().Raw("SELECT erp_id FROM memberships ORDER BY erp_id").Scan(&ids).Error; err != nil {
		t.Fatal(err)
	}
	if strings.Join(ids, ",") != "AB,ab" {
		t.Fatalf("memberships: %q, want AB and ab", ids)
	}
	var reasons []string
	if err := st.DB().Raw("SELECT reason FROM quarantined_records").Scan(&reasons).Error; err != nil {
		t.Fatal(err)
	}
	all := strings.Join(reasons, "\n")
	if len(reasons) != len(bad) {
		t.Fatalf("%d quarantined, want %d:\n%s", len(reasons), len(bad), all)
	}
	for _, b := range bad {
		if !strings.Contains(all, b.reason) {
			t.Errorf("no quarantine reason has %q:\n%s", b.reason, all)
		}
	}
	if strings.ContainsFunc(all, func(r rune) bool { return r < 0x20 && r != '\n' }) {
		t.Errorf("a reason carries a control character:\n%q", all)
	}
}
