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
// reader that knows an order's version knows its lines, until the ERP
// changes them at that version (Mock.ChangeLines, OrderLinesAt): neither
// the version nor updated_at moves, as SAP's header time-stamps often
// stay when only items change.

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
func OrderLines(erpID string, v int64) []OrderLine { return OrderLinesAt(erpID, v, 0) }

// OrderLinesAt returns the lines of the order of erpID at version v after
// its lines changed rev times at that version (rev 0: OrderLines). Every
// line of a revision above 0 carries it in its material ("…/r2"), and such
// a revision has at least one line, so the lines of two revisions of one
// version always differ.
func OrderLinesAt(erpID string, v int64, rev int) []OrderLine {
	h := fnv.New64a()
	h.Write([]byte(erpID))
	seed := h.Sum64()
	if rev > 0 {
		seed ^= uint64(rev) * 0x9e3779b97f4a7c15
	}
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
		if rev > 0 {
			mat += "/r" + strconv.Itoa(rev)
		}
		out = append(out, OrderLine{Pos: int32(pos), Material: mat, Qty: fmt.Sprintf("%d.%03d", q, (uint64(v)+uint64(pos))%1000)})
	}
	if rev > 0 && len(out) == 0 {
		pos := 1 + rev%MaxOrderLines
		out = append(out, OrderLine{Pos: int32(pos), Material: fmt.Sprintf("MAT-%d-0/r%d", seed%1000, rev), Qty: fmt.Sprintf("%d.000", rev)})
	}
	return out
}

// LinesRev is the revision of an order's lines at its version
// (OrderLinesAt) that a material of a line of it carries: 0 for one
// without "/rN".
func LinesRev(material string) int {
	_, r, ok := strings.Cut(material, "/r")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(r)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// OrderOf renders a membership item of the spec's feed as an order of the
// documents face: its contract (ContractOf) with a member
//
//	"lines":[{"pos":1,"material":"…","qty":…},…]
//
// holding OrderLines of its erp_id and version, qty a JSON number at odd
// versions and a string at even ones. An item whose erp_id or version is
// unreadable gets the lines of version 1 of the erp_id as served.
func OrderOf(item []byte) ([]byte, error) { return OrderOfAt(item, nil) }

// OrderOfAt is OrderOf with the lines of the revision rev gives for the
// item's erp_id and version (OrderLinesAt; rev nil: revision 0, OrderOf).
func OrderOfAt(item []byte, rev func(erpID string, v int64) int) ([]byte, error) {
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
	r := 0
	if rev != nil {
		r = rev(id, v)
	}
	b := append(c[:len(c)-1:len(c)-1], `,"lines":[`...)
	for i, l := range OrderLinesAt(id, v, r) {
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

// ordersPage is OrdersPage with the lines ChangeLines changed.
func (m *Mock) ordersPage(page []byte) ([]byte, error) {
	m.mu.RLock()
	revs := len(m.linesRev)
	m.mu.RUnlock()
	if revs == 0 {
		return OrdersPage(page)
	}
	return renderPage(page, func(item []byte) ([]byte, error) { return OrderOfAt(item, m.linesRevOf) })
}

// linesRev is the revision of a record's lines at a version of it.
type linesRev struct {
	version int64
	rev     int
}

// ChangeLines changes the lines of the orders of ids at their version, as
// an ERP changes a document's items without moving its header's version
// or updated_at: the documents face serves each with the lines of the next
// revision (OrderLinesAt), until the record moves to another version.
// Every id must be a valid record in the feed, else nothing changes.
func (m *Mock) ChangeLines(ids []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	idxs, err := m.lookup(ids, false)
	if err != nil {
		return err
	}
	if m.linesRev == nil {
		m.linesRev = map[int32]linesRev{}
	}
	for _, idx := range idxs {
		v := m.recs[idx].version
		l := m.linesRev[idx]
		if l.version != v {
			l = linesRev{version: v}
		}
		l.rev++
		m.linesRev[idx] = l
	}
	return nil
}

// linesRevOf is the revision of the lines of erpID at version v.
func (m *Mock) linesRevOf(erpID string, v int64) int {
	n, err := strconv.ParseUint(strings.TrimPrefix(erpID, "M"), 10, 31)
	if err != nil || n == 0 {
		return 0
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if l, ok := m.linesRev[int32(n-1)]; ok && l.version == v {
		return l.rev
	}
	return 0
}

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
