package erpmock_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
)

// rawPage is a page of either endpoint, its items left raw.
type rawPage struct {
	Data       []json.RawMessage `json:"data"`
	NextCursor *string           `json:"next_cursor"`
}

func fetchRaw(t *testing.T, u string) rawPage {
	t.Helper()
	res, body := get(t, u)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", u, res.StatusCode, body)
	}
	var p rawPage
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return p
}

func TestTypedFaceServesEveryMembershipAsAContract(t *testing.T) {
	m, base := setup(t, erpmock.Options{Records: 403, Seed: 11, Faults: erpmock.Faults{InvalidRate: 0.1}})
	q := url.Values{"limit": {"37"}}
	var contracts, members int
	for {
		mp := fetchRaw(t, base+"/api/v1/memberships?"+q.Encode())
		cp := fetchRaw(t, base+erpmock.ContractsPath+"?"+q.Encode())
		if len(mp.Data) != len(cp.Data) || (mp.NextCursor == nil) != (cp.NextCursor == nil) ||
			mp.NextCursor != nil && *mp.NextCursor != *cp.NextCursor {
			t.Fatalf("page after %q: %d memberships (next %v), %d contracts (next %v)", q.Get("cursor"), len(mp.Data), mp.NextCursor, len(cp.Data), cp.NextCursor)
		}
		for i := range mp.Data {
			want, err := erpmock.ContractOf(mp.Data[i])
			if err != nil {
				t.Fatalf("ContractOf(%s): %v", mp.Data[i], err)
			}
			if string(want) != string(cp.Data[i]) {
				t.Fatalf("contract %s, want %s", cp.Data[i], want)
			}
		}
		members += len(mp.Data)
		contracts += len(cp.Data)
		if mp.NextCursor == nil {
			break
		}
		q.Set("cursor", *mp.NextCursor)
	}
	if members != 403 {
		t.Fatalf("%d items, want 403", members)
	}
	_, mc := get(t, base+"/api/v1/memberships/count")
	_, cc := get(t, base+erpmock.ContractsCountPath)
	if string(mc) != string(cc) {
		t.Fatalf("count %s, memberships %s", cc, mc)
	}
	// A valid record's contract: its key, code, numbers and dates.
	truth := m.Truth()
	r := truth[len(truth)/2]
	item, _ := json.Marshal(map[string]any{"erp_id": r.ErpID, "member_id": r.MemberID, "product_code": r.ProductCode,
		"status": r.Status, "starts_at": r.StartsAt, "ends_at": r.EndsAt, "version": r.Version, "updated_at": r.UpdatedAt})
	b, err := erpmock.ContractOf(item)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Region   string
		No       int64
		Customer struct{ ID string }
		Status   string
		SignedOn string      `json:"signed_on"`
		Amount   json.Number `json:"amount"`
		Balance  any         `json:"balance"`
		Serial   any         `json:"serial"`
		Rev      int64
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&c); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	serial := strconv.FormatInt(erpmock.ContractSerial(r.Version), 10)
	if erpmock.ContractID(c.Region, c.No) != r.ErpID || c.Customer.ID != r.MemberID || c.Status != erpmock.ContractStatusCodes()[r.Status] ||
		c.SignedOn != r.StartsAt.Format("2006-01-02") || c.Amount.String() != erpmock.ContractAmount(r.Version) ||
		stringOf(c.Serial) != serial || stringOf(c.Balance) != erpmock.ContractBalance(r.Version) || c.Rev != r.Version {
		t.Fatalf("contract %s of %+v", b, r)
	}
	if erpmock.ContractSerial(r.Version) <= 1<<53 {
		t.Fatalf("serial %d is not past 2^53", erpmock.ContractSerial(r.Version))
	}
}

// stringOf is a JSON number or string as written.
func stringOf(v any) string {
	switch x := v.(type) {
	case json.Number:
		return x.String()
	case string:
		return x
	}
	return "?"
}

func TestSplitContractIDIsInvertible(t *testing.T) {
	for _, id := range []string{"M0000123", "m003", "M002", "m000", "n3-45", "inv-0", "x9", "M1000000"} {
		region, no, ok := erpmock.SplitContractID(id)
		if !ok || erpmock.ContractID(region, no) != id {
			t.Errorf("%q: (%q, %d, %v)", id, region, no, ok)
		}
	}
	for _, id := range []string{"", "x{3}", "M0000123 bad/id", "MXXX", "a99999999999999999999"} {
		if _, _, ok := erpmock.SplitContractID(id); ok {
			t.Errorf("%q splits", id)
		}
	}
}
