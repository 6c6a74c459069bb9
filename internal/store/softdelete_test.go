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
		if guards(v[id]) != w {
			t.Fatalf("%s: %+v, want %+v (a soft delete keeps version and fence)", id, v[id], w)
		}
	}

	// Update: a lower version at an earlier or equal updated_at (a stale
	// copy) or an older fence does not restore; the same version does.
	stale := m("A", 1, 20)
	stale.UpdatedAt = m("A", 2, 0).UpdatedAt
	for _, c := range []struct {
		w    store.Membership
		want bool
	}{{m("A", 1, 20), false}, {stale, false}, {m("A", 2, 9), false}, {m("A", 2, 20), true}, {m("A", 2, 21), false}} {
		ok, err := s.Update(ctx, c.w)
		if err != nil || ok != c.want {
			t.Fatalf("Update(version %d at %s, fence %d) on a deleted row = %v, %v; want %v", c.w.Version, c.w.UpdatedAt, c.w.Fence, ok, err, c.want)
		}
	}
	// Upsert restores E at a newer version and leaves B (live, same
	// version) and D (deleted, same version: Restore's) alone; Restore
	// restores D at its version.
	if err := s.Upsert(ctx, []store.Membership{m("D", 1, 30), m("E", 4, 30), m("B", 2, 30)}); err != nil {
		t.Fatal(err)
	}
	if done, err := s.Restore(ctx, []store.Membership{m("D", 1, 30)}); err != nil || !done[0] {
		t.Fatalf("Restore(D at its version) = %v, %v", done, err)
	}
	v, _ = s.Versions(ctx, []string{"A", "B", "D", "E"})
	want = map[string]store.Current{
		"A": {Version: 2, Fence: 20}, "B": {Version: 2, Fence: 10},
		"D": {Version: 1, Fence: 30}, "E": {Version: 4, Fence: 30},
	}
	for id, w := range want {
		if guards(v[id]) != w {
			t.Fatalf("after the restores, %s: %+v, want %+v", id, v[id], w)
		}
	}
	var member string
	if err := s.DB().Raw("SELECT member_id FROM memberships WHERE erp_id = 'E'").Scan(&member).Error; err != nil || member != "UE" {
		t.Fatalf("restored E's member_id = %q, %v", member, err)
	}
}

// TestRecreatedAtALowerVersion: a record deleted at version 5 and created
// again with its change counter back at 1 restores its row when its
// updated_at is later, and the version guard starts again from 1; a stale
// copy restores nothing.
func TestRecreatedAtALowerVersion(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	if err := s.Insert(ctx, []store.Membership{m("A", 5, 10)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SoftDelete(ctx, []store.Tombstone{{ErpID: "A", Version: 5, Fence: 10}}); err != nil {
		t.Fatal(err)
	}
	stale := m("A", 3, 11) // updated_at 3 ms: before the row's 5 ms
	if ok, err := s.Update(ctx, stale); err != nil || ok {
		t.Fatalf("a stale copy: Update = %v, %v; want false", ok, err)
	}
	reborn := m("A", 1, 12)
	reborn.MemberID = "reborn"
	reborn.UpdatedAt = m("A", 9, 0).UpdatedAt
	if done, err := s.Restore(ctx, []store.Membership{reborn}); err != nil || !done[0] {
		t.Fatalf("the re-created record: Restore = %v, %v; want [true]", done, err)
	}
	v, _ := s.Versions(ctx, []string{"A"})
	if guards(v["A"]) != (store.Current{Version: 1, Fence: 12}) {
		t.Fatalf("after the re-creation: %+v, want live at version 1", v["A"])
	}
	// A live row: only a higher version replaces it, as ever.
	if ok, err := s.Update(ctx, m("A", 1, 13)); err != nil || ok {
		t.Fatalf("the same version on the live row: Update = %v, %v; want false", ok, err)
	}
	if ok, err := s.Update(ctx, m("A", 2, 13)); err != nil || !ok {
		t.Fatalf("version 2 on the live row: Update = %v, %v; want true", ok, err)
	}
}

// TestQuarantineMark: an invalid copy newer than the row marks it and
// keeps its data; a replayed older valid copy keeps the mark; a valid copy
// at the marking version or a newer one clears it, through Upsert or
// Update alike.
func TestQuarantineMark(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	if err := s.Insert(ctx, []store.Membership{m("A", 1, 10), m("B", 1, 10), m("C", 4, 10)}); err != nil {
		t.Fatal(err)
	}
	done, err := s.MarkQuarantined(ctx, []store.Mark{
		{ErpID: "A", Version: 3, Fence: 11}, // marks: newer than v1
		{ErpID: "B", Version: 3, Fence: 11}, // marks
		{ErpID: "C", Version: 4, Fence: 11}, // not newer than the row
		{ErpID: "Z", Version: 9, Fence: 11}, // no row
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, true, false, false}; !slices.Equal(done, want) {
		t.Fatalf("MarkQuarantined = %v, want %v", done, want)
	}
	if again, _ := s.MarkQuarantined(ctx, []store.Mark{{ErpID: "A", Version: 2, Fence: 11}}); again[0] {
		t.Fatal("an older invalid copy moved the mark")
	}
	marked := func(id string) (version int64, set bool) {
		var q struct {
			V *int64
			S bool
		}
		if err := s.DB().Raw("SELECT quarantined_version AS v, quarantined_at IS NOT NULL AS s FROM memberships WHERE erp_id = ?", id).Scan(&q).Error; err != nil {
			t.Fatal(err)
		}
		if q.V != nil {
			version = *q.V
		}
		return version, q.S
	}
	if v, set := marked("A"); !set || v != 3 {
		t.Fatalf("A: mark %d, set %v; want version 3", v, set)
	}
	// A replayed older valid copy (v2): written, the mark kept. A valid v3
	// (Update) and v5 (Upsert) clear it.
	if ok, err := s.Update(ctx, m("A", 2, 12)); err != nil || !ok {
		t.Fatalf("A v2: Update = %v, %v", ok, err)
	}
	if v, set := marked("A"); !set || v != 3 {
		t.Fatalf("A after the older valid copy: mark %d, set %v; want kept at 3", v, set)
	}
	if ok, err := s.Update(ctx, m("A", 3, 12)); err != nil || !ok {
		t.Fatalf("A v3: Update = %v, %v", ok, err)
	}
	if err := s.Upsert(ctx, []store.Membership{m("B", 2, 12), m("C", 5, 12)}); err != nil {
		t.Fatal(err)
	}
	if _, set := marked("A"); set {
		t.Fatal("A: a valid copy at the marking version kept the mark")
	}
	if v, set := marked("B"); !set || v != 3 {
		t.Fatalf("B after the older valid copy (Upsert): mark %d, set %v; want kept at 3", v, set)
	}
	if err := s.Upsert(ctx, []store.Membership{m("B", 5, 13), m("C", 6, 13)}); err != nil {
		t.Fatal(err)
	}
	if _, set := marked("B"); set {
		t.Fatal("B: a newer valid copy (Upsert) kept the mark")
	}
	// Without a version: a copy later than the row marks an unmarked row
	// at the row's own version; an earlier one does not.
	early := store.Mark{ErpID: "C", UpdatedAt: m("C", 1, 0).UpdatedAt, Fence: 14}
	late := store.Mark{ErpID: "C", UpdatedAt: m("C", 99, 0).UpdatedAt, Fence: 14}
	if done, err := s.MarkQuarantined(ctx, []store.Mark{early}); err != nil || done[0] {
		t.Fatalf("an undated-version copy older than the row: %v, %v", done, err)
	}
	if done, err := s.MarkQuarantined(ctx, []store.Mark{late}); err != nil || !done[0] {
		t.Fatalf("an undated-version copy newer than the row: %v, %v", done, err)
	}
	if v, set := marked("C"); !set || v != 6 {
		t.Fatalf("C: mark %d, set %v; want the row's version 6", v, set)
	}
}
