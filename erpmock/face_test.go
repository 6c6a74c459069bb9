package erpmock_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
)

// v2Item is an item of FaceV2, loosely decoded.
type v2Item struct {
	ID       string          `json:"id"`
	Customer string          `json:"customer"`
	Plan     string          `json:"plan"`
	State    string          `json:"state"`
	From     string          `json:"from"`
	To       *string         `json:"to"`
	Rev      json.RawMessage `json:"rev"`
	Modified string          `json:"modified"`
}

type v2Page struct {
	Result struct {
		Items   []v2Item `json:"items"`
		Next    *string  `json:"next"`
		Total   int64    `json:"total"`
		HasMore bool     `json:"hasMore"`
	} `json:"result"`
}

func fetchV2(t *testing.T, base string, q url.Values) v2Page {
	t.Helper()
	res, body := get(t, base+"/v2/members/changes?"+q.Encode())
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	var p v2Page
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return p
}

// v2All pages the v2 face with page_token (offset false) or offset (true).
func v2All(t *testing.T, base string, q url.Values, limit int, offset bool) []v2Item {
	t.Helper()
	var out []v2Item
	q.Set("limit", strconv.Itoa(limit))
	for n := 0; ; n += limit {
		if offset {
			q.Set("offset", strconv.Itoa(n))
		}
		p := fetchV2(t, base, q)
		out = append(out, p.Result.Items...)
		if p.Result.HasMore != (p.Result.Next != nil) {
			t.Fatalf("hasMore %v with next %v", p.Result.HasMore, p.Result.Next)
		}
		if offset && len(p.Result.Items) < limit || !offset && p.Result.Next == nil {
			return out
		}
		if !offset {
			q.Set("page_token", *p.Result.Next)
		}
	}
}

func TestFaceV2ServesTheFeedUnderItsOwnShape(t *testing.T) {
	m, base := setup(t, erpmock.Options{Records: 1003, Seed: 3, Face: erpmock.FaceV2})
	truth := m.Truth()
	states := map[string]string{"ACTIVE": "active", "SUSPENDED": "paused", "CANCELLED": "cancelled", "EXPIRED": "expired"}
	for _, offset := range []bool{false, true} {
		items := v2All(t, base, url.Values{}, 100, offset)
		if len(items) != len(truth) {
			t.Fatalf("offset %v: %d items, want %d", offset, len(items), len(truth))
		}
		for k, it := range items {
			r := truth[k]
			if it.ID != r.ErpID || it.Customer != r.MemberID || it.Plan != r.ProductCode || it.State != states[r.Status] ||
				string(it.Rev) != strconv.FormatInt(r.Version, 10) || it.Modified != r.UpdatedAt.Format("2006-01-02T15:04:05.000Z") {
				t.Fatalf("offset %v: item %d = %+v, want %+v", offset, k, it, r)
			}
		}
	}
	p := fetchV2(t, base, url.Values{"limit": {"10"}, "changedAfter": {feedStart.Add(time.Millisecond).Format(time.RFC3339Nano)}})
	if p.Result.Total != int64(len(truth)-4) || len(p.Result.Items) != 10 || p.Result.Items[0].ID != truth[4].ErpID {
		t.Fatalf("changedAfter: total %d, first %v", p.Result.Total, p.Result.Items[0])
	}
	res, body := get(t, base+"/v2/members/count?changedBefore="+url.QueryEscape(feedStart.Add(2*time.Millisecond).Format(time.RFC3339Nano)))
	if res.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != `{"result":{"total":8}}` {
		t.Fatalf("count: %d %s", res.StatusCode, body)
	}
	if res, _ := get(t, base+"/api/v1/memberships"); res.StatusCode != http.StatusNotFound {
		t.Fatalf("/api/v1/memberships under v2: status %d, want 404", res.StatusCode)
	}
	for _, q := range []string{"offset=1&page_token=x", "offset=-1", "limit=1001", "page_token=nope", "changedAfter=yesterday"} {
		if res, body := get(t, base+"/v2/members/changes?"+q); res.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d (%s), want 400", q, res.StatusCode, body)
		}
	}
}

func TestFaceV2OffsetPagingSkipsARowWhenAnEarlierOneChanges(t *testing.T) {
	m, base := setup(t, erpmock.Options{Records: 40, Seed: 1, Face: erpmock.FaceV2})
	first := fetchV2(t, base, url.Values{"limit": {"10"}, "offset": {"0"}})
	eleventh := fetchV2(t, base, url.Values{"limit": {"1"}, "offset": {"10"}}).Result.Items[0].ID
	onFirst := map[string]bool{}
	for _, it := range first.Result.Items {
		onFirst[it.ID] = true
	}
	// Records change until one of the first page has: it moves to the end
	// of the feed, and every record after it one place up.
	changed := map[string]bool{}
	for {
		id := m.Change(1)[0]
		changed[id] = true
		if onFirst[id] {
			break
		}
	}
	if changed[eleventh] {
		t.Fatal("the record to be skipped changed itself: pick a seed that shows the skip")
	}
	for _, it := range fetchV2(t, base, url.Values{"limit": {"10"}, "offset": {"10"}}).Result.Items {
		if it.ID == eleventh {
			t.Fatalf("%s at offset 10 after an earlier record changed: no skip", eleventh)
		}
	}
}

func TestFaceV2WithoutRev(t *testing.T) {
	_, base := setup(t, erpmock.Options{Records: 200, Seed: 2, Face: erpmock.FaceV2, NoRev: true,
		Faults: erpmock.Faults{InvalidRate: 0.2}})
	items := v2All(t, base, url.Values{}, 1000, false)
	bad := 0
	for _, it := range items {
		if it.Rev != nil {
			t.Fatalf("item %s has rev %s", it.ID, it.Rev)
		}
		if !slices.Contains([]string{"active", "paused", "cancelled", "expired"}, it.State) {
			bad++
		}
	}
	if bad == 0 {
		t.Fatal("no item with an invalid state among the invalid records")
	}
}

func TestParseFace(t *testing.T) {
	for in, want := range map[string]erpmock.Face{"": erpmock.FaceSpec, "spec": erpmock.FaceSpec, "v2": erpmock.FaceV2} {
		if got, err := erpmock.ParseFace(in); err != nil || got != want {
			t.Errorf("ParseFace(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := erpmock.ParseFace("v3"); err == nil {
		t.Error("ParseFace(v3): no error")
	}
}
