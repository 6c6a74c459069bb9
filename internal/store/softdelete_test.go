package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/erpsync/erpsync/internal/store"
)

// TestSoftDeleteAndRestore drives the soft delete's guards and the write
// path's restores: a delete applies only to a live row still at its
// version with a fence no newer than the lock's, and a write at the same
// version (Update, or a multi-row Upsert) or a newer one brings the row back.
func TestSoftDeleteAndRestore(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	if err := s.Insert(ctx, []store.Membership{m("A", 2, 10), m("B", 2, 10), m("C", 3, 10), m("D", 1, 10), m("E", 1, 10)}); err != nil {
		t.Fatal(err)
	}
	done, err := s.SoftDelete(ctx, []store.Tombstone{
		{ErpID: "A", Version: 2, Fence: 10}, // applies: same version, same fence
		{ErpID: "B", Version: 1, Fence: 50}, // refused: the row moved on to version 2
		{ErpID: "C", Version: 3, Fence: 9},  // refused: the row was written under a newer lock
		{ErpID: "D", Version: 1, Fence: 11}, // applies
		{ErpID: "E", Version: 1, Fence: 11}, // applies
		{ErpID: "Z", Version: 1, Fence: 11}, // no row
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, false, false, true, true, false}; !slices.Equal(done, want) {
		t.Fatalf("SoftDelete = %v, want %v", done, want)
	}
	if again, _ := s.SoftDelete(ctx, []store.Tombstone{{ErpID: "A", Version: 2, Fence: 10}}); again[0] {
		t.Fatal("a second soft delete of a deleted row reported a change")
	}
	v, _ := s.Versions(ctx, []string{"A", "B", "C", "D", "E"})
	want := map[string]store.Current{
		"A": {Version: 2, Fence: 10, Deleted: true}, "B": {Version: 2, Fence: 10}, "C": {Version: 3, Fence: 10},
		"D": {Version: 1, Fence: 10, Deleted: true}, "E": {Version: 1, Fence: 10, Deleted: true},
	}
	for id, w := range want {
		if v[id] != w {
			t.Fatalf("%s: %+v, want %+v (a soft delete keeps version and fence)", id, v[id], w)
		}
	}

	// Update: a lower version or an older fence does not restore; the same
	// version does.
	for _, c := range []struct {
		w    store.Membership
		want bool
	}{{m("A", 1, 20), false}, {m("A", 2, 9), false}, {m("A", 2, 20), true}, {m("A", 2, 21), false}} {
		ok, err := s.Update(ctx, c.w)
		if err != nil || ok != c.want {
			t.Fatalf("Update(version %d, fence %d) on a deleted row = %v, %v; want %v", c.w.Version, c.w.Fence, ok, err, c.want)
		}
	}
	// Upsert: D at the same version and E at a newer one are restored,
	// B (live, same version) is left alone.
	if err := s.Upsert(ctx, []store.Membership{m("D", 1, 30), m("E", 4, 30), m("B", 2, 30)}); err != nil {
		t.Fatal(err)
	}
	v, _ = s.Versions(ctx, []string{"A", "B", "D", "E"})
	want = map[string]store.Current{
		"A": {Version: 2, Fence: 20}, "B": {Version: 2, Fence: 10},
		"D": {Version: 1, Fence: 30}, "E": {Version: 4, Fence: 30},
	}
	for id, w := range want {
		if v[id] != w {
			t.Fatalf("after the restores, %s: %+v, want %+v", id, v[id], w)
		}
	}
	var member string
	if err := s.DB().Raw("SELECT member_id FROM memberships WHERE erp_id = 'E'").Scan(&member).Error; err != nil || member != "UE" {
		t.Fatalf("restored E's member_id = %q, %v", member, err)
	}
}
