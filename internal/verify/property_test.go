package verify_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
	"github.com/erpsync/erpsync/internal/verify"
)

// TestVerifyFindsWhatWasDoneToTheTable is verify against a reference: an
// ERP feed of a random size, and a table written from it with a random
// flaw for each record (none; no row; an older version; other data at
// the same version; a newer version; the row soft-deleted) and rows the
// feed does not have. verify, in one pass and in parts, at random page
// sizes, says of every row what the flaw it was given makes it, no more
// and no less.
func TestVerifyFindsWhatWasDoneToTheTable(t *testing.T) {
	t.Parallel()
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			checkVerifyAgainstReference(t, seed)
		})
	}
}

// The flaws a row is given, and what verify must call it.
const (
	flawNone    = iota // matching
	flawNoRow          // missing
	flawOlder          // stale
	flawOther          // stale: other data at the feed's version
	flawNewer          // ahead
	flawDeleted        // missing: the row is soft-deleted
	flaws
)

func checkVerifyAgainstReference(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x7e51f7))
	m := erpmock.New(erpmock.Options{Records: 100 + r.IntN(500), Seed: int64(seed) + 1})
	srv := httptest.NewServer(m)
	defer srv.Close()
	src, err := erp.New(erp.Config{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := testenv.MigratedStore(t)
	ctx := context.Background()
	want := verify.Result{}
	// every holds each sample's ids, all of them: a sample keeps only
	// the first few it finds.
	every := map[*verify.Sample][]string{}
	add := func(s *verify.Sample, id string) {
		s.Count++
		every[s] = append(every[s], id)
	}
	var rows []store.Membership
	var deleted []string
	for _, rec := range m.Truth() {
		row := store.Membership{ErpID: rec.ErpID, MemberID: rec.MemberID, ProductCode: rec.ProductCode, Status: rec.Status,
			StartsAt: rec.StartsAt, EndsAt: rec.EndsAt, Version: rec.Version, UpdatedAt: rec.UpdatedAt, Fence: 1}
		want.FeedRecords++
		switch r.IntN(flaws) {
		case flawNone:
			want.Matching++
		case flawNoRow:
			add(&want.Missing, rec.ErpID)
			continue
		case flawOlder:
			row.Version--
			add(&want.Stale, rec.ErpID)
		case flawOther:
			row.Status += "-X"
			add(&want.Stale, rec.ErpID)
		case flawNewer:
			row.Version++
			add(&want.Ahead, rec.ErpID)
		case flawDeleted:
			deleted = append(deleted, rec.ErpID)
			add(&want.Missing, rec.ErpID)
			want.SoftDeleted++
			rows = append(rows, row)
			continue
		}
		want.Rows++
		rows = append(rows, row)
	}
	for i := range r.IntN(30) {
		id := fmt.Sprintf("X%04d", i)
		rows = append(rows, store.Membership{ErpID: id, MemberID: "U", ProductCode: "P", Status: "ACTIVE",
			StartsAt: rows[0].StartsAt, Version: 1, UpdatedAt: rows[0].UpdatedAt, Fence: 1})
		add(&want.Unknown, id)
		want.Rows++
	}
	if err := st.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if len(deleted) > 0 {
		if err := st.DB().Exec("UPDATE memberships SET deleted_at = updated_at WHERE erp_id IN ?", deleted).Error; err != nil {
			t.Fatal(err)
		}
	}
	for _, fetchers := range []int{1, 4} {
		page := 50 + r.IntN(250)
		got, err := verify.VerifyParts(ctx, src, st, page, fetchers)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name      string
			got, want int64
		}{
			{"feed records", got.FeedRecords, want.FeedRecords},
			{"rows", got.Rows, want.Rows},
			{"soft-deleted", got.SoftDeleted, want.SoftDeleted},
			{"matching", got.Matching, want.Matching},
		} {
			if c.got != c.want {
				t.Errorf("--fetchers %d --page-size %d: %s %d, want %d", fetchers, page, c.name, c.got, c.want)
			}
		}
		for _, c := range []struct {
			name      string
			got, want *verify.Sample
		}{
			{"missing", &got.Missing, &want.Missing},
			{"stale", &got.Stale, &want.Stale},
			{"unknown", &got.Unknown, &want.Unknown},
			{"ahead", &got.Ahead, &want.Ahead},
		} {
			if c.got.Count != c.want.Count {
				t.Errorf("--fetchers %d --page-size %d: %s %d (%v), want %d", fetchers, page, c.name, c.got.Count, c.got.IDs, c.want.Count)
			}
			for _, id := range c.got.IDs {
				if !slices.Contains(every[c.want], id) {
					t.Errorf("--fetchers %d --page-size %d: %s names %s, which is not", fetchers, page, c.name, id)
				}
			}
		}
		if ok := want.Matching == want.FeedRecords && want.Unknown.Count == 0 && want.Ahead.Count == 0; got.OK() != ok {
			t.Errorf("--fetchers %d: OK() is %v, want %v", fetchers, got.OK(), ok)
		}
	}
}
