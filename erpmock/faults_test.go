package erpmock_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
)

func TestLatency(t *testing.T) {
	_, base := setup(t, erpmock.Options{Records: 5, Faults: erpmock.Faults{Latency: 40 * time.Millisecond}})
	start := time.Now()
	fetchPage(t, base, url.Values{})
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Errorf("answered in %v with 40ms latency", d)
	}
}

func TestErrorRate(t *testing.T) {
	m, base := setup(t, erpmock.Options{Records: 5, Faults: erpmock.Faults{ErrorRate: 1, RetryAfter: 3}})
	codes := map[int]bool{}
	for range 40 {
		res, body := get(t, base+"/api/v1/memberships")
		codes[res.StatusCode] = true
		if res.StatusCode == 503 && res.Header.Get("Retry-After") != "3" {
			t.Errorf("503 with Retry-After %q", res.Header.Get("Retry-After"))
		}
		if res.StatusCode < 500 {
			t.Fatalf("status %d: %s", res.StatusCode, body)
		}
	}
	for _, c := range []int{500, 502, 503, 504} {
		if !codes[c] {
			t.Errorf("no %d in 40 answers: %v", c, codes)
		}
	}
	m.SetFaults(erpmock.Faults{ErrorRate: 0.5})
	n := 0
	for range 100 {
		if res, _ := get(t, base+"/api/v1/memberships/count"); res.StatusCode == 200 {
			n++
		}
	}
	if n < 25 || n > 75 {
		t.Errorf("%d of 100 succeeded with error rate 0.5", n)
	}
}

func TestRateLimitRate(t *testing.T) {
	_, base := setup(t, erpmock.Options{Records: 5, Faults: erpmock.Faults{RateLimitRate: 1, RetryAfter: 7}})
	res, _ := get(t, base+"/api/v1/memberships")
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "7" {
		t.Errorf("%d Retry-After %q, want 429 with 7", res.StatusCode, res.Header.Get("Retry-After"))
	}
	_, base = setup(t, erpmock.Options{Records: 5, Faults: erpmock.Faults{RateLimitRate: 1}})
	if res, _ := get(t, base+"/api/v1/memberships"); res.Header.Get("Retry-After") != "1" {
		t.Errorf("default Retry-After %q, want 1", res.Header.Get("Retry-After"))
	}
}

func TestMaxRate(t *testing.T) {
	m, base := setup(t, erpmock.Options{Records: 5, Faults: erpmock.Faults{MaxRate: 2}})
	limited := 0
	start := time.Now()
	for range 30 {
		res, _ := get(t, base+"/api/v1/memberships/count")
		if res.StatusCode == http.StatusTooManyRequests {
			limited++
			if s, _ := strconv.Atoi(res.Header.Get("Retry-After")); s < 1 {
				t.Errorf("429 with Retry-After %q", res.Header.Get("Retry-After"))
			}
		}
	}
	// A burst of one second (2 requests) passes, plus 2 a second while the
	// 30 requests run.
	if passed, most := 30-limited, 2+int(2*time.Since(start).Seconds())+1; passed < 2 || passed > most {
		t.Errorf("%d of 30 passed at 2/s, want 2 to %d", passed, most)
	}
	m.SetFaults(erpmock.Faults{})
	if res, _ := get(t, base+"/api/v1/memberships/count"); res.StatusCode != 200 {
		t.Errorf("after MaxRate off: %d", res.StatusCode)
	}
}

func TestTruncate(t *testing.T) {
	m, base := setup(t, erpmock.Options{Records: 50, Faults: erpmock.Faults{TruncateRate: 1}})
	for _, path := range []string{"/api/v1/memberships", "/api/v1/memberships/count"} {
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !errors.Is(err, io.ErrUnexpectedEOF) || int64(len(body)) != res.ContentLength/2 {
			t.Errorf("%s: %d, %d of %d bytes, err %v; want half the body and an unexpected EOF",
				path, res.StatusCode, len(body), res.ContentLength, err)
		}
	}
	if s := m.Stats(); s.Truncated != 2 {
		t.Errorf("truncated %d", s.Truncated)
	}
}

func TestHang(t *testing.T) {
	m, base := setup(t, erpmock.Options{Records: 5, Faults: erpmock.Faults{HangRate: 1}})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/memberships", nil)
	start := time.Now()
	_, err := http.DefaultClient.Do(req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hung request: %v, want the client's deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("gave up after %v", d)
	}
	// With a short Hang the answer comes, late.
	m.SetFaults(erpmock.Faults{HangRate: 1, Hang: 60 * time.Millisecond})
	start = time.Now()
	fetchPage(t, base, url.Values{})
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Errorf("answered after %v with a 60ms hang", d)
	}
	if s := m.Stats(); s.Hung != 2 {
		t.Errorf("hung %d", s.Hung)
	}
}

func TestDuplicate(t *testing.T) {
	m, base := setup(t, erpmock.Options{Records: 50, Faults: erpmock.Faults{DuplicateRate: 1}})
	p := fetchPage(t, base, url.Values{"limit": {"10"}})
	if len(p.items) != 11 {
		t.Fatalf("%d items, want 10 and a duplicate", len(p.items))
	}
	dup := p.items[10]
	if i := slices.IndexFunc(p.items[:10], func(it item) bool { return it.ErpID == dup.ErpID }); i < 0 || string(p.items[i].raw) != string(dup.raw) {
		t.Errorf("appended %s is not an exact copy of a record of the page", dup.raw)
	}
	// The duplicate does not move the cursor: paging still covers all.
	got, _ := fetchAll(t, base, url.Values{}, 10)
	seen := map[string]bool{}
	for _, it := range got {
		seen[it.ErpID] = true
	}
	if len(seen) != 50 || len(got) != 55 {
		t.Errorf("%d items, %d distinct; want 55 and 50", len(got), len(seen))
	}
	if s := m.Stats(); s.Duplicates != 6 {
		t.Errorf("duplicates %d", s.Duplicates)
	}
}

func TestStale(t *testing.T) {
	m, base := setup(t, erpmock.Options{Records: 200, Seed: 4, Faults: erpmock.Faults{StaleRate: 1}})
	got, pages := fetchAll(t, base, url.Values{}, 20)
	truth := map[string]erpmock.Record{}
	for _, r := range m.Truth() {
		truth[r.ErpID] = r
	}
	var stale int
	for i, it := range got {
		var r erpmock.Record
		if err := json.Unmarshal(it.raw, &r); err != nil {
			t.Fatal(err)
		}
		want := truth[r.ErpID]
		if r.Version == want.Version {
			continue
		}
		stale++
		if r.Version > want.Version || r.Version < 1 || !r.UpdatedAt.Before(want.UpdatedAt) || r.Status == want.Status {
			t.Errorf("stale copy %+v of %+v", r, want)
		}
		// The newest version is in the same page, before it.
		page := got[i/(21)*21 : i]
		if !slices.ContainsFunc(page, func(x item) bool { return x.ErpID == r.ErpID }) {
			t.Errorf("stale %s without its newest version earlier in the page", r.ErpID)
		}
	}
	if stale != pages || m.Stats().Stale != int64(pages) {
		t.Errorf("%d stale copies in %d pages, stats %d", stale, pages, m.Stats().Stale)
	}
}

var erpIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// flaw names what makes a served item invalid, or "" when it is valid.
func flaw(it item) string {
	var v int64
	switch {
	case !erpIDPattern.MatchString(it.ErpID):
		return "erp_id"
	case it.MemberID == nil:
		return "member_id"
	case !slices.Contains([]string{"ACTIVE", "SUSPENDED", "CANCELLED", "EXPIRED"}, it.Status):
		return "status"
	case json.Unmarshal(it.Version, &v) != nil:
		return "version type"
	case v < 1:
		return "version < 1"
	}
	starts, err := time.Parse(time.RFC3339, it.StartsAt)
	if err != nil {
		return "starts_at"
	}
	if it.EndsAt != nil {
		ends, err := time.Parse(time.RFC3339, *it.EndsAt)
		if err != nil || ends.Before(starts) {
			return "ends_at"
		}
	}
	return ""
}

func TestInvalid(t *testing.T) {
	m, base := setup(t, erpmock.Options{Records: 400, Seed: 11, Faults: erpmock.Faults{InvalidRate: 0.2}})
	invalid := m.InvalidIDs()
	if len(invalid) < 50 || len(invalid) > 110 {
		t.Errorf("%d of 400 invalid at rate 0.2", len(invalid))
	}
	got, _ := fetchAll(t, base, url.Values{}, 100)
	flaws := map[string]int{}
	for _, it := range got {
		f := flaw(it)
		if f != "" {
			flaws[f]++
		}
		if (f != "") != slices.Contains(invalid, it.ErpID) {
			t.Errorf("%s: flaw %q, in InvalidIDs %v", it.raw, f, slices.Contains(invalid, it.ErpID))
		}
	}
	for _, f := range []string{"erp_id", "member_id", "status", "version type", "version < 1", "starts_at", "ends_at"} {
		if flaws[f] == 0 {
			t.Errorf("no invalid record with a bad %s: %v", f, flaws)
		}
	}
	if len(m.Truth())+len(invalid) != 400 {
		t.Errorf("truth %d + invalid %d != 400", len(m.Truth()), len(invalid))
	}
	// Invalid records never change and InvalidRate cannot change later.
	m.Change(400)
	m.SetFaults(erpmock.Faults{InvalidRate: 0.9})
	if m.Faults().InvalidRate != 0.2 || !slices.Equal(invalid, m.InvalidIDs()) {
		t.Error("the invalid records changed after New")
	}
	p := fetchPage(t, base, url.Values{"limit": {"1000"}})
	n := 0
	for _, it := range p.items {
		if flaw(it) != "" {
			n++
		}
	}
	if n != len(invalid) {
		t.Errorf("%d invalid items after changes, want %d", n, len(invalid))
	}
}

// TestConcurrentClients pages with several clients while records change
// under them: each client still sees every record.
func TestConcurrentClients(t *testing.T) {
	m, base := setup(t, erpmock.Options{Records: 2000, Seed: 6, Faults: erpmock.Faults{ChangeRate: 2, DuplicateRate: 0.3, StaleRate: 0.3}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 50 {
			m.Change(5)
			m.Truth()
		}
	}()
	t.Run("clients", func(t *testing.T) {
		for i := range 6 {
			t.Run(strconv.Itoa(i), func(t *testing.T) {
				t.Parallel()
				got, _ := fetchAll(t, base, url.Values{}, 97)
				seen := map[string]bool{}
				for _, it := range got {
					seen[it.ErpID] = true
				}
				if len(seen) != 2000 {
					t.Errorf("saw %d of 2000 records", len(seen))
				}
			})
		}
	})
	<-done
}
