package erpmock_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
)

// TestDeleteAndRecreate deletes records (by id, at random, and through
// the admin endpoint): pages, the count and Truth lose them; a recreated
// record comes back at a higher version at the end of the feed.
func TestDeleteAndRecreate(t *testing.T) {
	m, base := setup(t, erpmock.Options{Records: 200, Seed: 3})
	before := map[string]erpmock.Record{}
	for _, r := range m.Truth() {
		before[r.ErpID] = r
	}
	if err := m.DeleteIDs([]string{"M0000001", "M0000050"}); err != nil {
		t.Fatal(err)
	}
	random := m.Delete(8)
	res, err := http.Post(base+"/admin/delete?id=M0000100&id=M0000101", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST /admin/delete: %d", res.StatusCode)
	}
	gone := append([]string{"M0000001", "M0000050", "M0000100", "M0000101"}, random...)
	slices.Sort(gone)
	if len(slices.Compact(slices.Clone(gone))) != 12 {
		t.Fatalf("Delete(8) picked a deleted record: %v", random)
	}
	items, _ := fetchAll(t, base, url.Values{}, 30)
	served := ids(items)
	for _, id := range gone {
		if slices.Contains(served, id) {
			t.Errorf("%s served after its delete", id)
		}
	}
	truth := m.Truth()
	if len(items) != 188 || len(truth) != 188 || m.Stats().Deleted != 12 || m.Stats().Valid != 188 {
		t.Fatalf("served %d, truth %d, stats %+v; want 188 and 12 deleted", len(items), len(truth), m.Stats())
	}
	_, body := get(t, base+"/api/v1/memberships/count")
	var count struct{ Count int64 }
	if json.Unmarshal(body, &count) != nil || count.Count != 188 {
		t.Fatalf("count %s, want 188", body)
	}
	for _, bad := range [][]string{{"M0000001"}, {"M0000002", "M0000002"}, {"nope"}, {"M9999999"}} {
		if err := m.DeleteIDs(bad); !errors.Is(err, erpmock.ErrUnknownID) {
			t.Errorf("DeleteIDs(%v) = %v, want ErrUnknownID", bad, err)
		}
	}
	if err := m.Recreate([]string{"M0000002"}); !errors.Is(err, erpmock.ErrUnknownID) {
		t.Errorf("Recreate of a live record = %v", err)
	}
	res, err = http.Post(base+"/admin/recreate?id=M0000050", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST /admin/recreate: %d", res.StatusCode)
	}
	items, _ = fetchAll(t, base, url.Values{}, 30)
	last := items[len(items)-1]
	var v int64
	if last.ErpID != "M0000050" || json.Unmarshal(last.Version, &v) != nil || v != before["M0000050"].Version+1 || len(items) != 189 {
		t.Fatalf("after recreate: %d items, last %s version %s; want M0000050 at %d", len(items), last.ErpID, last.Version, before["M0000050"].Version+1)
	}
	if s := m.Stats(); s.Deleted != 11 || len(m.Truth()) != 189 {
		t.Fatalf("after recreate: stats %+v, truth %d", s, len(m.Truth()))
	}
}

// TestDeleteRate deletes records on every page request; Truth is what a
// client paging now would see.
func TestDeleteRate(t *testing.T) {
	m, base := setup(t, erpmock.Options{Records: 300, Seed: 4, Faults: erpmock.Faults{DeleteRate: 2}})
	_, pages := fetchAll(t, base, url.Values{}, 50)
	if s := m.Stats(); s.Deleted != 2*pages || len(m.Truth()) != 300-2*pages {
		t.Fatalf("%d pages: stats %+v, truth %d", pages, s, len(m.Truth()))
	}
	m.SetFaults(erpmock.Faults{})
	items, _ := fetchAll(t, base, url.Values{}, 50)
	served := ids(items)
	slices.Sort(served)
	if fmt.Sprint(served) != fmt.Sprint(truthIDs(m.Truth())) {
		t.Fatal("the feed differs from Truth after deletes")
	}
}

func truthIDs(rs []erpmock.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ErpID
	}
	slices.Sort(out)
	return out
}
