package erp

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// capMap and capStatus are the names of the SAP CAP test service.
const (
	capMap    = "erp_id=MembershipID,member_id=BusinessPartner,product_code=Product,status=LifecycleStatus,starts_at=ValidFrom,ends_at=ValidTo,updated_at=LastChangeDateTime,version="
	capStatus = "active=ACTIVE,suspended=SUSPENDED,cancelled=CANCELLED,expired=EXPIRED"
)

// capItem is a valid item of the CAP service.
const capItem = `{"MembershipID":"MBR00000012","BusinessPartner":"1024071335","Product":"GYM-PREMIUM",` +
	`"LifecycleStatus":"cancelled","ValidFrom":"2023-06-03","ValidTo":"2023-09-05",` +
	`"LastChangeDateTime":"2025-01-01T00:00:04.052Z"}`

func mustMapping(t testing.TB, fields, status string) *Mapping {
	t.Helper()
	m, err := ParseMapping(fields, status)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestParseMapping(t *testing.T) {
	if m, err := ParseMapping(" ", ""); m != nil || err != nil {
		t.Fatalf("empty specs: %v, %v; want nil, nil", m, err)
	}
	m := mustMapping(t, capMap, capStatus)
	if got := strings.Join(m.Properties(), ","); got != "MembershipID,BusinessPartner,Product,LifecycleStatus,ValidFrom,ValidTo,LastChangeDateTime" {
		t.Errorf("properties %s", got)
	}
	if _, ok := m.Property("version"); ok {
		t.Error("version= still has a property")
	}
	// Unlisted fields keep their names; spaces around names are trimmed.
	m = mustMapping(t, " erp_id = No , version=Rev", "")
	if got := strings.Join(m.Properties(), ","); got != "No,member_id,product_code,status,starts_at,ends_at,Rev,updated_at" {
		t.Errorf("properties %s", got)
	}
	var nilMap *Mapping
	if p, ok := nilMap.Property("erp_id"); p != "erp_id" || !ok {
		t.Errorf("nil mapping: %q %v", p, ok)
	}

	for _, c := range []struct{ fields, status, want string }{
		{"erp_id=No,erpid=X", "", `unknown field "erpid"`},
		{"erp_id=No,erp_id=Key", "", "field erp_id mapped twice"},
		{"member_id=", "", "field member_id mapped to an empty property"},
		{"member_id", "", `"member_id" is not name=value`},
		{"erp_id=status", "", `property "status" read as both erp_id and status`},
		{"starts_at=D,ends_at=D", "", `property "D" read as both starts_at and ends_at`},
		{"", "active=ACTIVE,paused=PAUSED", `status map: "paused" maps to "PAUSED", not one of ACTIVE, SUSPENDED, CANCELLED, EXPIRED`},
		{"", "active=ACTIVE,active=EXPIRED", `status map: "active" mapped twice`},
		{"", "=ACTIVE", "status map: empty source value"},
	} {
		_, err := ParseMapping(c.fields, c.status)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q %q: %v, want %q", c.fields, c.status, err, c.want)
		}
	}
}

func TestDecodeMapped(t *testing.T) {
	m := mustMapping(t, capMap, capStatus)
	r, inv, ok, err := m.DecodeItem([]byte(capItem))
	if err != nil || !ok {
		t.Fatalf("%v %+v", err, inv)
	}
	upd := time.Date(2025, 1, 1, 0, 0, 4, 52e6, time.UTC)
	ends := time.Date(2023, 9, 5, 0, 0, 0, 0, time.UTC)
	if r.ErpID != "MBR00000012" || r.MemberID != "1024071335" || r.ProductCode != "GYM-PREMIUM" || r.Status != "CANCELLED" ||
		!r.StartsAt.Equal(time.Date(2023, 6, 3, 0, 0, 0, 0, time.UTC)) || r.EndsAt == nil || !r.EndsAt.Equal(ends) ||
		r.UpdatedAt != upd || r.Version != upd.UnixMicro() {
		t.Fatalf("%+v", r)
	}
	// Accepted variations: 7 fraction digits, an offset, no end, a
	// DateTimeOffset for a date, a status already in the contract.
	for _, c := range []struct {
		from, to string
		check    func(Record) bool
	}{
		{`"2025-01-01T00:00:04.052Z"`, `"2025-01-01T00:00:04.0521234Z"`, func(r Record) bool {
			return r.UpdatedAt.Nanosecond() == 52123400 && r.Version == upd.UnixMicro()+123
		}},
		{`"2025-01-01T00:00:04.052Z"`, `"2025-01-01T01:00:04+01:00"`, func(r Record) bool { return r.Version == upd.Truncate(time.Second).UnixMicro() }},
		{`"2023-09-05"`, `null`, func(r Record) bool { return r.EndsAt == nil }},
		{`,"ValidTo":"2023-09-05"`, ``, func(r Record) bool { return r.EndsAt == nil }},
		{`"2023-06-03"`, `"2023-06-03T12:00:00Z"`, func(r Record) bool { return r.StartsAt.Hour() == 12 }},
		{`"cancelled"`, `"EXPIRED"`, func(r Record) bool { return r.Status == "EXPIRED" }},
	} {
		raw := strings.Replace(capItem, c.from, c.to, 1)
		r, inv, ok, err := m.DecodeItem([]byte(raw))
		if err != nil || !ok || !c.check(r) {
			t.Errorf("%s: %v %v %+v %+v", raw, err, ok, inv, r)
		}
	}
	// Rejected items name the field and the property.
	for _, c := range []struct{ from, to, reason string }{
		{`"MBR00000012"`, `"MBR 12"`, `erp_id (MembershipID): character ' ' not allowed`},
		{`"cancelled"`, `"paused"`, `status (LifecycleStatus): "paused" is not one of`},
		{`"2023-09-05"`, `"2023-06-02"`, `ends_at (ValidTo): before starts_at`},
		{`"2023-06-03"`, `"2023-02-29"`, `starts_at (ValidFrom): "2023-02-29" is not a date`},
		{`"2025-01-01T00:00:04.052Z"`, `"2025-01-01"`, `updated_at (LastChangeDateTime): "2025-01-01" is not an RFC 3339 date-time`},
		{`"2025-01-01T00:00:04.052Z"`, `"1970-01-01T00:00:00Z"`, `version (from updated_at): updated_at is not after 1970`},
		{`"GYM-PREMIUM"`, `"` + strings.Repeat("x", 33) + `"`, `product_code (Product): longer than 32 characters`},
	} {
		raw := strings.Replace(capItem, c.from, c.to, 1)
		_, inv, ok, err := m.DecodeItem([]byte(raw))
		if err != nil || ok || !strings.Contains(inv.Reason, c.reason) || inv.ErpID == "" && !strings.Contains(c.from, "MBR") {
			t.Errorf("%s: %v %v %q, want %q", raw, err, ok, inv.Reason, c.reason)
		}
		if string(inv.Raw) != raw {
			t.Errorf("raw %s, want %s", inv.Raw, raw)
		}
	}
	if _, _, _, err := m.DecodeItem([]byte(capItem + "x")); err == nil {
		t.Error("trailing data accepted")
	}
	if _, inv, ok, err := m.DecodeItem([]byte(`[1]`)); err != nil || ok || inv.Reason != "item is not a JSON object" {
		t.Errorf("array: %v %v %+v", err, ok, inv)
	}
	// A REST date-time field is no date without a mapping.
	p, err := decodePage(pageOf(strings.Replace(item, `"2024-01-01T00:00:00Z"`, `"2024-01-01"`, 1)), nil, nil)
	if err != nil || len(p.Invalid) != 1 {
		t.Errorf("a date accepted by the REST decoder: %v %+v", err, p)
	}
}

// renamed maps the mapped properties of fuzzMap back to the REST names.
var renamed = map[string]string{"No": "erp_id", "Customer": "member_id", "Item": "product_code", "State": "status",
	"From": "starts_at", "To": "ends_at", "Rev": "version", "Modified": "updated_at"}

const fuzzMap = "erp_id=No,member_id=Customer,product_code=Item,status=State,starts_at=From,ends_at=To,version=Rev,updated_at=Modified"

// FuzzDecodeMapped holds the mapped decoder to the REST decoder's rules:
// an item under mapped names, with its status and dates translated, is
// valid exactly when the same item under the REST names is, and decodes
// to the same record; with version= the version is updated_at in
// microseconds.
func FuzzDecodeMapped(f *testing.F) {
	mapped := strings.NewReplacer(`"erp_id"`, `"No"`, `"member_id"`, `"Customer"`, `"product_code"`, `"Item"`, `"status"`, `"State"`,
		`"starts_at"`, `"From"`, `"ends_at"`, `"To"`, `"version"`, `"Rev"`, `"updated_at"`, `"Modified"`, `"ACTIVE"`, `"on"`)
	f.Add([]byte(mapped.Replace(item)))
	f.Add([]byte(mapped.Replace(strings.Replace(item, `"2024-01-01T00:00:00Z"`, `"2024-01-01"`, 1))))
	f.Add([]byte(mapped.Replace(strings.Replace(item, `"version":3`, `"version":"3"`, 1))))
	f.Add([]byte(`{"No":"a","No":"b c","State":"off","To":null,"Rev":1.5}`))
	f.Add([]byte(`7`))
	f.Add([]byte(mapped.Replace(strings.Replace(item, `"U1"`, `"U\udbff"`, 1))))
	f.Add([]byte(mapped.Replace(strings.Replace(item, `"version":3`, `"version":3,"Other":1,"Other":2`, 1))))
	m := mustMapping(f, fuzzMap, "on=ACTIVE,off=CANCELLED")
	derived := mustMapping(f, strings.Replace(fuzzMap, "version=Rev", "version=", 1), "on=ACTIVE,off=CANCELLED")
	f.Fuzz(func(t *testing.T, raw []byte) {
		rec, inv, ok, err := m.DecodeItem(raw)
		if (err == nil) != json.Valid(raw) {
			t.Fatalf("decoder %v, json.Valid %v: %q", err, json.Valid(raw), raw)
		}
		if err != nil {
			return
		}
		if !ok && (inv.Reason == "" || !json.Valid(inv.Raw)) {
			t.Fatalf("invalid without a reason or raw JSON: %+v", inv)
		}
		// The same item under the REST names.
		want, wantOK := restEquivalent(t, raw)
		if ok != wantOK || ok && !sameRecord(rec, want) {
			t.Fatalf("%q: mapped %v %+v (%s), REST %v %+v", raw, ok, rec, inv.Reason, wantOK, want)
		}
		if ok {
			if err := checkRecord(rec); err != nil {
				t.Fatal(err)
			}
		}
		// version= derives the version from updated_at, whatever Rev holds.
		rec2, _, ok2, err := derived.DecodeItem(raw)
		if err != nil {
			t.Fatal(err)
		}
		if ok2 && (rec2.Version != rec2.UpdatedAt.UnixMicro() || rec2.Version < 1) {
			t.Fatalf("derived version %d for updated_at %v", rec2.Version, rec2.UpdatedAt)
		}
		if ok && !ok2 && rec.UpdatedAt.UnixMicro() >= 1 {
			t.Fatalf("valid with Rev, invalid without: %q", raw)
		}
	})
}

// restEquivalent decodes raw as the REST decoder would decode it under the
// REST names: properties renamed, the status translated, a date
// YYYY-MM-DD written as its midnight UTC.
func restEquivalent(t *testing.T, raw []byte) (Record, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		p, err := decodePage(pageOf(string(raw)), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return Record{}, len(p.Records) == 1
	}
	var read [][]string
	for k := range renamed {
		read = append(read, []string{k})
	}
	if len(repeatedPaths(raw, read)) > 0 {
		return Record{}, false // a member read given twice
	}
	rest := map[string]json.RawMessage{}
	for k, v := range obj {
		if name, ok := renamed[k]; ok {
			rest[name] = v
		} else if !renamedBack[k] {
			rest[k] = v
		}
	}
	var s string
	if json.Unmarshal(rest["status"], &s) == nil {
		switch s {
		case "on":
			rest["status"] = json.RawMessage(`"ACTIVE"`)
		case "off":
			rest["status"] = json.RawMessage(`"CANCELLED"`)
		}
	}
	for _, k := range []string{"starts_at", "ends_at"} {
		var s string
		if json.Unmarshal(rest[k], &s) == nil && len(s) == 10 {
			rest[k] = json.RawMessage(`"not a date"`)
			if d, ok := parseDate([]byte(s)); ok {
				rest[k] = json.RawMessage(`"` + d.Format(time.RFC3339) + `"`)
			}
		}
	}
	b, err := json.Marshal(rest)
	if err != nil {
		t.Fatal(err)
	}
	p, err := decodePage(pageOf(string(b)), nil, nil)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if len(p.Records) == 1 {
		return p.Records[0], true
	}
	return Record{}, false
}

// renamedBack are the REST names, which a mapped source does not read.
var renamedBack = map[string]bool{"erp_id": true, "member_id": true, "product_code": true, "status": true,
	"starts_at": true, "ends_at": true, "version": true, "updated_at": true}

func sameRecord(a, b Record) bool {
	if (a.EndsAt == nil) != (b.EndsAt == nil) || a.EndsAt != nil && !a.EndsAt.Equal(*b.EndsAt) {
		return false
	}
	a.EndsAt, b.EndsAt = nil, nil
	return a.ErpID == b.ErpID && a.MemberID == b.MemberID && a.ProductCode == b.ProductCode && a.Status == b.Status &&
		a.StartsAt.Equal(b.StartsAt) && a.Version == b.Version && a.UpdatedAt.Equal(b.UpdatedAt)
}
