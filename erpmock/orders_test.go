package erpmock_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
)

func TestOrdersFaceServesEveryContractWithItsLines(t *testing.T) {
	_, base := setup(t, erpmock.Options{Records: 211, Seed: 5, Faults: erpmock.Faults{InvalidRate: 0.1}})
	q := url.Values{"limit": {"50"}}
	orders := 0
	for {
		cp := fetchRaw(t, base+erpmock.ContractsPath+"?"+q.Encode())
		op := fetchRaw(t, base+erpmock.OrdersPath+"?"+q.Encode())
		if len(cp.Data) != len(op.Data) {
			t.Fatalf("page after %q: %d contracts, %d orders", q.Get("cursor"), len(cp.Data), len(op.Data))
		}
		for i := range op.Data {
			var o map[string]json.RawMessage
			if err := json.Unmarshal(op.Data[i], &o); err != nil {
				t.Fatalf("order %s: %v", op.Data[i], err)
			}
			var c map[string]json.RawMessage
			if err := json.Unmarshal(cp.Data[i], &c); err != nil {
				t.Fatalf("contract %s: %v", cp.Data[i], err)
			}
			for k, v := range c {
				if string(o[k]) != string(v) {
					t.Fatalf("order %s: %s is %s, the contract's %s", op.Data[i], k, o[k], v)
				}
			}
			if _, ok := o["lines"]; !ok || len(o) != len(c)+1 {
				t.Fatalf("order %s: want the contract's members and lines", op.Data[i])
			}
		}
		orders += len(op.Data)
		if cp.NextCursor == nil {
			break
		}
		q.Set("cursor", *cp.NextCursor)
	}
	if orders != 211 {
		t.Fatalf("%d orders, want 211", orders)
	}
}

// TestOrderLinesChangeBetweenVersions checks what the documents face
// promises its tests: positions unique and ascending, quantities that fit
// decimal(13,3), materials that fit string(40), and versions that add,
// drop and change lines (and some that have none).
func TestOrderLinesChangeBetweenVersions(t *testing.T) {
	qty := regexp.MustCompile(`^[0-9]{1,10}\.[0-9]{3}$`)
	var added, dropped, changed, empty int
	for id := 0; id < 200; id++ {
		erpID := "M" + strconv.Itoa(100000+id)
		var prev map[int32]erpmock.OrderLine
		for v := int64(1); v <= 30; v++ {
			ls := erpmock.OrderLines(erpID, v)
			if len(ls) == 0 {
				empty++
			}
			cur := map[int32]erpmock.OrderLine{}
			for i, l := range ls {
				if l.Pos < 1 || l.Pos > erpmock.MaxOrderLines || i > 0 && l.Pos <= ls[i-1].Pos {
					t.Fatalf("%s v%d: positions %v", erpID, v, ls)
				}
				if !qty.MatchString(l.Qty) || len(l.Material) == 0 || len(l.Material) > 40 {
					t.Fatalf("%s v%d: line %+v does not fit its columns", erpID, v, l)
				}
				cur[l.Pos] = l
				if p, ok := prev[l.Pos]; prev != nil && !ok {
					added++
				} else if ok && p != l {
					changed++
				}
			}
			for pos := range prev {
				if _, ok := cur[pos]; !ok {
					dropped++
				}
			}
			prev = cur
		}
	}
	if added < 100 || dropped < 100 || changed < 100 || empty < 10 {
		t.Fatalf("lines added %d, dropped %d, changed %d times, %d empty orders: want each often", added, dropped, changed, empty)
	}
	t.Logf("lines added %d, dropped %d, changed %d times; %d empty orders", added, dropped, changed, empty)
}

// TestOrderLinesAtRevisions checks the lines of an order changed at its
// version: every revision differs from the one before and from revision 0
// (which is OrderLines), carries itself in its materials, and fits the
// columns.
func TestOrderLinesAtRevisions(t *testing.T) {
	qty := regexp.MustCompile(`^[0-9]{1,10}\.[0-9]{3}$`)
	for id := 0; id < 100; id++ {
		erpID := "M" + strconv.Itoa(100000+id)
		for v := int64(1); v <= 23; v++ {
			if !slices.Equal(erpmock.OrderLinesAt(erpID, v, 0), erpmock.OrderLines(erpID, v)) {
				t.Fatalf("%s v%d: revision 0 is not OrderLines", erpID, v)
			}
			seen := map[string]int{}
			for rev := 0; rev <= 4; rev++ {
				ls := erpmock.OrderLinesAt(erpID, v, rev)
				b, _ := json.Marshal(ls)
				if r, ok := seen[string(b)]; ok {
					t.Fatalf("%s v%d: revisions %d and %d have the same lines %s", erpID, v, r, rev, b)
				}
				seen[string(b)] = rev
				if rev > 0 && len(ls) == 0 {
					t.Fatalf("%s v%d revision %d: no line", erpID, v, rev)
				}
				for i, l := range ls {
					if l.Pos < 1 || l.Pos > erpmock.MaxOrderLines || i > 0 && l.Pos <= ls[i-1].Pos || !qty.MatchString(l.Qty) || len(l.Material) > 40 {
						t.Fatalf("%s v%d revision %d: line %+v does not fit its columns", erpID, v, rev, l)
					}
					if erpmock.LinesRev(l.Material) != rev {
						t.Fatalf("%s v%d revision %d: material %q says revision %d", erpID, v, rev, l.Material, erpmock.LinesRev(l.Material))
					}
				}
			}
		}
	}
}

// TestChangeLinesKeepsTheVersion changes the lines of two orders through
// POST /admin/change-lines: the documents face serves them with the lines
// of the next revision, at the same version and updated_at, and every
// other order as before.
func TestChangeLinesKeepsTheVersion(t *testing.T) {
	_, base := setup(t, erpmock.Options{Records: 60, Seed: 9})
	q := base + erpmock.OrdersPath + "?limit=100"
	orders := func() map[string]map[string]json.RawMessage {
		out := map[string]map[string]json.RawMessage{}
		for _, raw := range fetchRaw(t, q).Data {
			var o map[string]json.RawMessage
			if err := json.Unmarshal(raw, &o); err != nil {
				t.Fatalf("order %s: %v", raw, err)
			}
			var c struct{ Region, No json.RawMessage }
			_ = json.Unmarshal(raw, &c)
			out[string(c.Region)+string(c.No)] = o
		}
		return out
	}
	before := orders()
	for _, call := range []string{"id=M0000007&id=M0000031", "id=M0000007"} {
		res, err := http.Post(base+"/admin/change-lines?"+call, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("change-lines %s: %s", call, res.Status)
		}
	}
	after := orders()
	changed := 0
	for k, o := range before {
		a := after[k]
		for m, v := range o {
			if m != "lines" && string(a[m]) != string(v) {
				t.Fatalf("order %s: %s was %s, is %s", k, m, v, a[m])
			}
		}
		if string(a["lines"]) != string(o["lines"]) {
			changed++
			if !strings.Contains(string(a["lines"]), "/r") {
				t.Fatalf("order %s: lines %s carry no revision", k, a["lines"])
			}
		}
	}
	if changed != 2 {
		t.Fatalf("%d orders changed their lines, want 2", changed)
	}
	res, err := http.Post(base+"/admin/change-lines?id=nope", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("change-lines of an unknown id: %s, want 400", res.Status)
	}
}
