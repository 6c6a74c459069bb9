package erpmock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// The typed face: the same records served as contracts, a typed entity
// with a composite key, exact numbers past float64 and a coded status,
// for tests of entities declared in a config file
// (testdata of internal/guarantee declares it). GET /v1/typed/contracts
// takes the query of GET /api/v1/memberships (updated_since,
// updated_until, limit, cursor) and answers {"data":[...],"next_cursor":...}
// in the same order, with the same cursors and faults; GET
// /v1/typed/contracts/count answers {"count":N}. Each item is
// ContractOf of the membership item the spec's endpoint would serve, so an
// invalid membership is an invalid contract, a deleted one is gone from
// both and a changed one has changed in both.

// Paths of the typed face.
const (
	ContractsPath      = "/v1/typed/contracts"
	ContractsCountPath = ContractsPath + "/count"
)

// contractCodes are the status codes of the typed face; a status not
// listed is served as it is, which no code map of a consumer knows.
var contractCodes = map[string]string{"ACTIVE": "A", "SUSPENDED": "S", "CANCELLED": "C", "EXPIRED": "E"}

// ContractStatusCodes returns the status code the typed face serves for
// each status of the spec.
func ContractStatusCodes() map[string]string {
	out := make(map[string]string, len(contractCodes))
	for k, v := range contractCodes {
		out[k] = v
	}
	return out
}

// SplitContractID splits an erp_id into the contract's key: region, the
// erp_id without its trailing digits but for the leading zeros of that
// run, and no, the number those digits write (its last digit at least).
// So "M0000123" is ("M0000", 123) and "m000" is ("m00", 0): region +
// strconv.Itoa(no) is the erp_id again. ok is false for an erp_id that
// does not end in a digit, or whose number does not fit an int64.
func SplitContractID(erpID string) (region string, no int64, ok bool) {
	i := len(erpID)
	for i > 0 && erpID[i-1] >= '0' && erpID[i-1] <= '9' {
		i--
	}
	if i == len(erpID) {
		return erpID, 0, false
	}
	j := i
	for j < len(erpID)-1 && erpID[j] == '0' {
		j++
	}
	n, err := strconv.ParseInt(erpID[j:], 10, 64)
	if err != nil {
		return erpID, 0, false
	}
	return erpID[:j], n, true
}

// ContractID is the erp_id of the contract key (region, no): the inverse
// of SplitContractID.
func ContractID(region string, no int64) string { return region + strconv.FormatInt(no, 10) }

// ContractSerial is the serial of a contract at version v: past 2^53, so
// that a float64 cannot hold it.
func ContractSerial(v int64) int64 { return 1<<53 + 1 + v*1_000_003 }

// ContractAmount is the amount, a decimal(12,2), of a contract at version
// v.
func ContractAmount(v int64) string {
	return fmt.Sprintf("%d.%02d", (v*7_919_777)%10_000_000_000, v%97)
}

// ContractBalance is the balance, a decimal(20,2) of 17 significant
// digits and more, of a contract at version v: a float64 rounds it.
func ContractBalance(v int64) string {
	return fmt.Sprintf("%d.%02d", 90_071_992_547_409_930+v*10_000_019, 1+v%98)
}

// ErrNotItem is returned by ContractOf for bytes that are not a JSON
// object.
var ErrNotItem = errors.New("erpmock: not a JSON object")

// ContractOf renders a membership item of the spec's feed as a contract
// of the typed face:
//
//	{"region":"M0000","no":123,"customer":{"id":member_id},"plan":product_code,
//	 "status":"A","period":{"from":starts_at,"to":ends_at},"signed_on":"YYYY-MM-DD",
//	 "amount":12.34,"balance":"…","serial":…,"rev":version,"changed_at":updated_at,
//	 "tenant":tenant}
//
// region and no split erp_id (SplitContractID; an erp_id that does not
// split is served as region with a null no); status is its code
// (ContractStatusCodes; one not listed as it is); signed_on is the date of
// starts_at as written; amount, balance and serial derive from the version
// (ContractAmount, ContractBalance, ContractSerial), tenant is the item's
// (Options.Tenants; none without), serial as a JSON
// number at odd versions and as a string at even ones, balance as a
// string at versions divisible by 3. A member missing from the item is
// missing from the contract, a null one null, and a version that is not a
// positive integer is served as it is, with the numbers of version 1. So
// every flaw of an item stays a flaw of its contract.
func ContractOf(item []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(item))
	d.UseNumber()
	if err := d.Decode(&m); err != nil || m == nil {
		return nil, ErrNotItem
	}
	b := make([]byte, 0, len(item)+160)
	b = append(b, '{')
	var id string
	idOK := json.Unmarshal(m["erp_id"], &id) == nil && m["erp_id"] != nil
	region, no, split := SplitContractID(id)
	if idOK {
		b = appendJSONString(append(b, `"region":`...), region)
		b = append(b, `,"no":`...)
		if split {
			b = strconv.AppendInt(b, no, 10)
		} else {
			b = append(b, "null"...)
		}
	} else if raw, ok := m["erp_id"]; ok {
		b = append(append(b, `"region":`...), raw...)
		b = append(b, `,"no":null`...)
	}
	b = append(b, `,"customer":{`...)
	if raw, ok := m["member_id"]; ok {
		b = append(append(b, `"id":`...), raw...)
	}
	b = append(b, '}')
	b = appendMember(b, "plan", m, "product_code")
	if raw, ok := m["status"]; ok {
		var st string
		if json.Unmarshal(raw, &st) == nil && contractCodes[st] != "" {
			raw = json.RawMessage(`"` + contractCodes[st] + `"`)
		}
		b = append(append(b, `,"status":`...), raw...)
	}
	b = append(b, `,"period":{`...)
	sep := ""
	for _, p := range [...][2]string{{"from", "starts_at"}, {"to", "ends_at"}} {
		if raw, ok := m[p[1]]; ok {
			b = append(append(append(b, sep+`"`...), p[0]+`":`...), raw...)
			sep = ","
		}
	}
	b = append(b, '}')
	var starts string
	if json.Unmarshal(m["starts_at"], &starts) == nil && m["starts_at"] != nil {
		b = appendJSONString(append(b, `,"signed_on":`...), starts[:min(len(starts), 10)])
	}
	v := int64(1)
	if n, err := strconv.ParseInt(string(m["version"]), 10, 64); err == nil && n > 0 {
		v = n
	}
	b = append(b, `,"amount":`...)
	b = append(b, ContractAmount(v)...)
	b = append(b, `,"balance":`...)
	if v%3 == 0 {
		b = appendJSONString(b, ContractBalance(v))
	} else {
		b = append(b, ContractBalance(v)...)
	}
	b = append(b, `,"serial":`...)
	if v%2 == 1 {
		b = strconv.AppendInt(b, ContractSerial(v), 10)
	} else {
		b = appendJSONString(b, strconv.FormatInt(ContractSerial(v), 10))
	}
	b = appendMember(b, "rev", m, "version")
	b = appendMember(b, "changed_at", m, "updated_at")
	b = appendMember(b, "tenant", m, "tenant")
	return append(b, '}'), nil
}

// appendMember appends ,"name": and the raw value of m[from], unless m
// has no such member.
func appendMember(b []byte, name string, m map[string]json.RawMessage, from string) []byte {
	raw, ok := m[from]
	if !ok {
		return b
	}
	return append(append(b, `,"`+name+`":`...), raw...)
}

// servePageAs serves the spec's page of r rendered by render (a face's
// page), its faults and errors as the spec's endpoint answers them.
func (m *Mock) servePageAs(render func(page []byte) ([]byte, error)) endpoint {
	return func(r *http.Request, f Faults) (int, []byte) {
		code, body := m.servePage(r, f)
		if code != http.StatusOK {
			return code, body
		}
		b, err := render(body)
		if err != nil {
			return http.StatusInternalServerError, errorBody(err.Error())
		}
		return http.StatusOK, b
	}
}

// ContractsPage renders a page of the spec's memberships endpoint,
// {"data":[items],"next_cursor":...}, as the page of the typed face: each
// item through ContractOf, the cursor as it is.
func ContractsPage(page []byte) ([]byte, error) { return renderPage(page, ContractOf) }
