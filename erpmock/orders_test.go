package erpmock_test

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strconv"
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
