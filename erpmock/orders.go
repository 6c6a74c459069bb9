package erpmock

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// The documents face: the same records served as orders, each a contract
// (ContractOf) with its lines, for tests of documents (an entity with
// children). GET /v1/typed/orders takes the query of the typed face and
// answers in the same order, with the same cursors and faults; each item
// is OrderOf of the membership item the spec's endpoint would serve. The
// lines of an order are a function of its erp_id and version
// (OrderLines): between two versions lines come, go and change, so a
// reader that knows an order's version knows its lines.

// Paths of the documents face.
const (
	OrdersPath      = "/v1/typed/orders"
	OrdersCountPath = OrdersPath + "/count"
)

// MaxOrderLines is the most lines an order has.
const MaxOrderLines = 8

// OrderLine is one line of an order as the documents face serves it.
type OrderLine struct {
	Pos      int32  // the line's key within its order, 1 to MaxOrderLines
	Material string // at most 40 characters
	// Qty is a decimal(13,3) of up to 13 significant digits, some past
	// what a float64 holds exactly at that scale.
	Qty string
}

// OrderLines returns the lines of the order of erpID at version v, by
// position. Whether a position is present, its material and its quantity
// depend on the erp_id and the version, so that most versions add, drop
// or change a line of the one before; some versions have no line at all.
func OrderLines(erpID string, v int64) []OrderLine {
	h := fnv.New64a()
	h.Write([]byte(erpID))
	seed := h.Sum64()
	var out []OrderLine
	for pos := int64(1); pos <= MaxOrderLines; pos++ {
		mix := seed>>(pos*5) + uint64(v)*uint64(pos*7+3)
		if mix%3 == 0 || (v%11 == 0 && pos > 1) {
			continue
		}
		// A line changes its material every few versions and its quantity
		// at every version.
		mat := fmt.Sprintf("MAT-%d-%d", seed%1000, (uint64(v)/uint64(pos+1)+seed>>pos)%97)
		q := (uint64(v)*uint64(pos)*7_919 + seed>>(pos*3)) % 10_000_000_000
		out = append(out, OrderLine{Pos: int32(pos), Material: mat, Qty: fmt.Sprintf("%d.%03d", q, (uint64(v)+uint64(pos))%1000)})
	}
	return out
}

// OrderOf renders a membership item of the spec's feed as an order of the
// documents face: its contract (ContractOf) with a member
//
//	"lines":[{"pos":1,"material":"…","qty":…},…]
//
// holding OrderLines of its erp_id and version, qty a JSON number at odd
// versions and a string at even ones. An item whose erp_id or version is
// unreadable gets the lines of version 1 of the erp_id as served.
func OrderOf(item []byte) ([]byte, error) {
	c, err := ContractOf(item)
	if err != nil {
		return nil, err
	}
	var m struct {
		ErpID   json.RawMessage `json:"erp_id"`
		Version json.RawMessage `json:"version"`
	}
	if err := json.Unmarshal(item, &m); err != nil {
		return nil, ErrNotItem
	}
	var id string
	if json.Unmarshal(m.ErpID, &id) != nil {
		id = string(m.ErpID)
	}
	v := int64(1)
	if n, err := strconv.ParseInt(string(m.Version), 10, 64); err == nil && n > 0 {
		v = n
	}
	b := append(c[:len(c)-1:len(c)-1], `,"lines":[`...)
	for i, l := range OrderLines(id, v) {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(append(b, `{"pos":`...), int64(l.Pos), 10)
		b = appendJSONString(append(b, `,"material":`...), l.Material)
		b = append(b, `,"qty":`...)
		if v%2 == 1 {
			b = append(b, l.Qty...)
		} else {
			b = appendJSONString(b, l.Qty)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}

// OrdersPage renders a page of the spec's memberships endpoint as the
// page of the documents face: each item through OrderOf, the cursor as it
// is.
func OrdersPage(page []byte) ([]byte, error) { return renderPage(page, OrderOf) }

// renderPage renders a page of the spec's memberships endpoint,
// {"data":[items],"next_cursor":...}, with each item through render and
// the cursor as it is.
func renderPage(page []byte, render func([]byte) ([]byte, error)) ([]byte, error) {
	var p struct {
		Data       []json.RawMessage `json:"data"`
		NextCursor json.RawMessage   `json:"next_cursor"`
	}
	if err := json.Unmarshal(page, &p); err != nil {
		return nil, fmt.Errorf("erpmock: a page of the spec: %w", err)
	}
	var b strings.Builder
	b.WriteString(`{"data":[`)
	for i, it := range p.Data {
		c, err := render(it)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(c)
	}
	b.WriteString(`],"next_cursor":`)
	if len(p.NextCursor) == 0 {
		b.WriteString("null")
	} else {
		b.Write(p.NextCursor)
	}
	b.WriteString("}\n")
	return []byte(b.String()), nil
}
