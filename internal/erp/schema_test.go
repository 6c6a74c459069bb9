package erp

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
)

// customers is the example entity of the config file: a composite key, a
// nested path, a values map, decimals, dates and a version property.
func customers(t testing.TB) *entity.Entity {
	t.Helper()
	typ := func(s string) entity.Type { return parseType(t, s) }
	return &entity.Entity{
		Name:      "customers",
		Sources:   []entity.Source{{Name: "Customers"}},
		Key:       []string{"company", "customer"},
		UpdatedAt: []string{"LastChangeDateTime"},
		Version:   []string{"ChangeCounter"},
		Columns: []entity.Column{
			{Name: "company", From: []string{"CompanyCode"}, Type: typ("string(4)")},
			{Name: "customer", From: []string{"Customer"}, Type: typ("string(10)")},
			{Name: "name", From: []string{"CustomerName"}, Type: typ("string(80)")},
			{Name: "credit_limit", From: []string{"CreditLimit"}, Type: typ("decimal(15,2)"), Nullable: true},
			{Name: "blocked", From: []string{"IsBlocked"}, Type: typ("bool")},
			{Name: "founded_on", From: []string{"FoundedOn"}, Type: typ("date"), Nullable: true},
			{Name: "rating", From: []string{"Rating"}, Type: typ("int64")},
			{Name: "status", From: []string{"Status"}, Type: typ("string(16)"), Values: map[string]string{"A": "ACTIVE", "B": "BLOCKED"}},
			{Name: "city", From: []string{"Address", "City"}, Type: typ("string(40)"), Nullable: true},
			{Name: "seats", From: []string{"Seats"}, Type: typ("int32"), Nullable: true},
			{Name: "signed_at", From: []string{"SignedAt"}, Type: typ("datetime(6)"), Nullable: true},
			{Name: "notes", From: []string{"Notes"}, Type: typ("text"), Nullable: true},
			{Name: "extra", From: []string{"Extra"}, Type: typ("json"), Nullable: true},
		},
	}
}

const customerItem = `{"CompanyCode":"1000","Customer":"C1","CustomerName":"Müller & Söhne","CreditLimit":1234.5,` +
	`"IsBlocked":false,"FoundedOn":"1999-12-31","Rating":9007199254740993,"Status":"A","Address":{"City":"Köln","Zip":"50667"},` +
	`"Seats":-7,"SignedAt":"2024-05-01T12:00:00.123456+02:00","Notes":"line 1\nline 2","Extra":{ "a" : [1, 2.50] },` +
	`"ChangeCounter":"42","LastChangeDateTime":"2025-01-01T00:00:04.052Z","Unknown":[{"x":1}]}`

// parseType parses a type as the config file writes it.
func parseType(t testing.TB, s string) entity.Type {
	t.Helper()
	ty, err := entity.ParseType(s)
	if err != nil {
		t.Fatal(err)
	}
	return ty
}

func mustCompile(t testing.TB, e *entity.Entity, src entity.Source) *Schema {
	t.Helper()
	s, err := Compile(e, src)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTypedRecord(t *testing.T) {
	s := mustCompile(t, customers(t), entity.Source{Name: "Customers"})
	rec, inv, ok, err := s.DecodeItem([]byte(customerItem))
	if err != nil || !ok {
		t.Fatalf("%v %+v", err, inv)
	}
	upd := time.Date(2025, 1, 1, 0, 0, 4, 52e6, time.UTC)
	if rec.ErpID != "1000\x1fC1" || rec.Version != 42 || rec.UpdatedAt != upd || rec.MemberID != "" {
		t.Errorf("record %q %d %v", rec.ErpID, rec.Version, rec.UpdatedAt)
	}
	want := []entity.Value{
		{S: "1000"}, {S: "C1"}, {S: "Müller & Söhne"}, {S: "1234.50"}, {I: 0}, {S: "1999-12-31"},
		{I: 9007199254740993}, {S: "ACTIVE"}, {S: "Köln"}, {I: -7}, {T: time.Date(2024, 5, 1, 10, 0, 0, 123456e3, time.UTC)},
		{S: "line 1\nline 2"}, {S: `{"a":[1,2.50]}`},
	}
	if len(rec.Vals) != len(want) {
		t.Fatalf("%d values, want %d", len(rec.Vals), len(want))
	}
	for i, w := range want {
		if g := rec.Vals[i]; g.Null != w.Null || g.S != w.S || g.I != w.I || !g.T.Equal(w.T) {
			t.Errorf("%s: %+v, want %+v", s.e.Columns[i].Name, g, w)
		}
	}
	if got := strings.Join(s.Properties(), ","); got != "CompanyCode,Customer,CustomerName,CreditLimit,IsBlocked,FoundedOn,Rating,Status,Address,Seats,SignedAt,Notes,Extra,LastChangeDateTime,ChangeCounter" {
		t.Errorf("properties %s", got)
	}
	if !s.Exact() {
		t.Error("not exact with decimal and int64 columns")
	}

	// Nullable columns: missing or null is NULL; an absent parent object
	// too, a parent that is no object is invalid.
	for _, c := range []struct{ from, to string }{
		{`"CreditLimit":1234.5,`, ``}, {`1234.5`, `null`}, {`{"City":"Köln","Zip":"50667"}`, `null`},
		{`"Address":{"City":"Köln","Zip":"50667"},`, ``}, {`{"City":"Köln","Zip":"50667"}`, `{"Zip":"1"}`},
	} {
		raw := strings.Replace(customerItem, c.from, c.to, 1)
		rec, inv, ok, err := s.DecodeItem([]byte(raw))
		if err != nil || !ok {
			t.Errorf("%s: %v %+v", raw, err, inv)
			continue
		}
		if !rec.Vals[3].Null && !rec.Vals[8].Null {
			t.Errorf("%s -> %s: no NULL value", c.from, c.to)
		}
	}
	// A member the decoder reads, given twice, makes the item invalid,
	// nested ones included; one it does not read is no matter.
	for _, c := range []struct{ from, to, reason string }{
		{`"Unknown"`, `"Address":{"Zip":"1"},"Unknown"`, "Address: given more than once in the item"},
		{`"City":"Köln"`, `"City":"Köln","City":"Bonn"`, "Address.City: given more than once in the item"},
	} {
		raw := strings.Replace(customerItem, c.from, c.to, 1)
		if _, inv, ok, err := s.DecodeItem([]byte(raw)); err != nil || ok || inv.Reason != c.reason {
			t.Errorf("%s: %v %v %q, want %q", raw, err, ok, inv.Reason, c.reason)
		}
	}
	if _, inv, ok, _ := s.DecodeItem([]byte(strings.Replace(customerItem, `"Unknown"`, `"Unread":1,"Unread":2,"Unknown"`, 1))); !ok {
		t.Errorf("an unread member given twice: %s", inv.Reason)
	}

	// Invalid items name every column that failed, and carry what could
	// be read.
	for _, c := range []struct{ from, to, reason string }{
		{`1234.5`, `1234.567`, "credit_limit: 1234.567 has more fraction digits than decimal(15,2)"},
		{`"CustomerName":"Müller & Söhne",`, ``, "name: missing"},
		{`9007199254740993`, `9223372036854775808`, "rating: 9223372036854775808 is past the range of int64"},
		{`"Status":"A"`, `"Status":"C"`, `status: "C" is not one of A, B`},
		{`{"City":"Köln","Zip":"50667"}`, `"Köln"`, "city: Address is not an object"},
		{`"Customer":"C1"`, `"Customer":""`, "customer: empty, in a key column"},
		{`"Seats":-7`, `"Seats":2147483648`, "seats: 2147483648 is past the range of int32"},
		{`"1999-12-31"`, `"0999-12-31"`, `founded_on: "0999-12-31" is outside the years 1000-9999`},
		{`"ChangeCounter":"42"`, `"ChangeCounter":0`, "version (ChangeCounter): 0 is below 1"},
		{`"IsBlocked":false`, `"IsBlocked":"false"`, "blocked: a string, want true or false"},
	} {
		raw := strings.Replace(customerItem, c.from, c.to, 1)
		if raw == customerItem {
			t.Fatalf("%q changes nothing", c.from)
		}
		_, inv, ok, err := s.DecodeItem([]byte(raw))
		if err != nil || ok || !strings.Contains(inv.Reason, c.reason) {
			t.Errorf("%s -> %s: %v %v %q, want %q", c.from, c.to, err, ok, inv.Reason, c.reason)
			continue
		}
		if wantID := "1000\x1fC1"; inv.ErpID != wantID && !strings.HasPrefix(c.reason, "customer") {
			t.Errorf("%s: erp_id %q, want %q", c.reason, inv.ErpID, wantID)
		}
		if inv.UpdatedAt != upd || string(inv.Raw) != raw || (inv.Version != 42) != strings.HasPrefix(c.reason, "version") {
			t.Errorf("%s: %+v", c.reason, inv)
		}
	}
	two := strings.NewReplacer(`1234.5`, `"12.345e2x"`, `"Status":"A"`, `"Status":7`).Replace(customerItem)
	if _, inv, _, _ := s.DecodeItem([]byte(two)); inv.Reason != `credit_limit: "12.345e2x" is not a number; status: "7" is not one of A, B` {
		t.Errorf("reason %q", inv.Reason)
	}
	if _, inv, ok, err := s.DecodeItem([]byte(` [1] `)); err != nil || ok || inv.Reason != "item is not a JSON object" || string(inv.Raw) != "[1]" {
		t.Errorf("array: %v %v %+v", err, ok, inv)
	}
	if _, _, _, err := s.DecodeItem([]byte(customerItem + `x`)); err == nil {
		t.Error("trailing data accepted")
	}

	// A source that sets the company: a constant, not read.
	set := mustCompile(t, customers(t), entity.Source{Name: "Customers2000", Set: map[string]string{"company": "2000"}})
	if rec, inv, ok, _ := set.DecodeItem([]byte(strings.Replace(customerItem, `"CompanyCode":"1000",`, ``, 1))); !ok || rec.ErpID != "2000\x1fC1" || rec.Vals[0].S != "2000" {
		t.Errorf("set company: %v %q %+v", ok, rec.ErpID, inv)
	}
	if strings.Contains(strings.Join(set.Properties(), ","), "CompanyCode") {
		t.Error("a set column is selected")
	}
}

// TestTypedValues checks each type's rules on one value.
func TestTypedValues(t *testing.T) {
	cases := []struct {
		typ  string
		in   string // the JSON value; "" for a missing member
		want string // the stored text (Value.Text), or "!" and a part of the reason
	}{
		{"string(3)", `"abc"`, "abc"},
		{"string(3)", `"äöü"`, "äöü"},
		{"string(3)", `"abcd"`, "!longer than 3 characters"},
		{"string(3)", `"a\u0000"`, "!control character U+0000"},
		{"string(3)", `"a\u0085"`, "!control character U+0085"},
		{"string(3)", "\"\xff\"", "!not valid UTF-8"},
		{"string(3)", `""`, ""},
		{"string(3)", `3`, "!a number, want a string"},
		{"string(3)", ``, "!missing"},
		{"string(3)", `null`, "!null"},
		{"text", `"a\tb\u0000"`, "a\tb\x00"},
		{"text", `"` + strings.Repeat("é", 32768) + `"`, "!longer than 65,535 bytes"},
		{"int32", `2147483647`, "2147483647"},
		{"int32", `-2147483648`, "-2147483648"},
		{"int32", `"-2147483649"`, "!past the range of int32"},
		{"int32", `1.0`, "!1.0 is not an integer"},
		{"int32", `"1e3"`, "!is not an integer"},
		{"int32", `"01"`, "!is not an integer"},
		{"int32", `" 1"`, "!is not an integer"},
		{"int32", `true`, "!a boolean, want an integer"},
		{"int64", `9007199254740993`, "9007199254740993"},
		{"int64", `"9007199254740993"`, "9007199254740993"},
		{"int64", `-9223372036854775808`, "-9223372036854775808"},
		{"int64", `9223372036854775807`, "9223372036854775807"},
		{"int64", `-9223372036854775809`, "!-9223372036854775809 is past the range of int64"},
		{"int64", `"-0"`, "0"},
		{"decimal(15,2)", `1234.5`, "1234.50"},
		{"decimal(15,2)", `"1234.50"`, "1234.50"},
		{"decimal(15,2)", `-0.1`, "-0.10"},
		{"decimal(15,2)", `-0.00`, "0.00"},
		{"decimal(15,2)", `"-0e5"`, "0.00"},
		{"decimal(15,2)", `1.5E+2`, "150.00"},
		{"decimal(15,2)", `"12345e-4"`, "!more fraction digits"},
		{"decimal(15,2)", `12345e-2`, "123.45"},
		{"decimal(15,2)", `1.230000000000000000000000`, "1.23"},
		{"decimal(15,2)", `0.0000000000000000000000012e24`, "1.20"},
		{"decimal(15,2)", `9999999999999.99`, "9999999999999.99"},
		{"decimal(15,2)", `10000000000000`, "!10000000000000 has more integer digits than decimal(15,2)"},
		{"decimal(15,2)", `1e13`, "!has more integer digits"},
		{"decimal(15,2)", `1e-3`, "!1e-3 has more fraction digits than decimal(15,2)"},
		{"decimal(15,2)", `1e999999999999999999999`, "!has more integer digits"},
		{"decimal(15,2)", `1e-999999999999999999999`, "!has more fraction digits"},
		{"decimal(15,2)", `0e999999999999999999999`, "0.00"},
		{"decimal(15,2)", `"1,5"`, "!is not a number"},
		{"decimal(15,2)", `".5"`, "!is not a number"},
		{"decimal(15,2)", `"+1"`, "!is not a number"},
		{"decimal(15,2)", `"NaN"`, "!is not a number"},
		{"decimal(15,2)", `false`, "!a boolean, want a number"},
		{"decimal(3,0)", `999`, "999"},
		{"decimal(3,0)", `0.5`, "!more fraction digits"},
		{"decimal(3,3)", `0.123`, "0.123"},
		{"decimal(3,3)", `1`, "!more integer digits"},
		{"decimal(38,10)", `"12345678901234567890123456.1234567890"`, "12345678901234567890123456.1234567890"},
		{"bool", `true`, "true"},
		{"bool", `false`, "false"},
		{"bool", `1`, "!a number, want true or false"},
		{"date", `"2024-02-29"`, "2024-02-29"},
		{"date", `"2023-02-29"`, "!is not a date"},
		{"date", `"2024-2-29"`, "!is not a date"},
		{"date", `"2024-02-29T00:00:00Z"`, "!is not a date"},
		{"date", `"0999-01-01"`, "!outside the years 1000-9999"},
		{"datetime", `"2024-02-29T23:59:59.9990+01:00"`, "2024-02-29T22:59:59.999Z"},
		{"datetime", `"2024-02-29T23:59:59.9999+01:00"`, "!has more fraction digits of a second than datetime keeps"},
		{"datetime", `"2025-01-01T00:00:00.1239999Z"`, "!has more fraction digits of a second than datetime keeps"},
		{"datetime(6)", `"2025-01-01T00:00:00.123456Z"`, "2025-01-01T00:00:00.123456Z"},
		{"datetime(6)", `"2025-01-01T00:00:00.1234560000Z"`, "2025-01-01T00:00:00.123456Z"},
		{"datetime(6)", `"2025-01-01T00:00:00.1239999Z"`, "!has more fraction digits of a second than datetime(6) keeps"},
		{"datetime(6)", `"2025-01-01T00:00:00.1234560001Z"`, "!has more fraction digits of a second than datetime(6) keeps"},
		{"datetime(0)", `"2025-01-01T00:00:01.000Z"`, "2025-01-01T00:00:01.000Z"},
		{"datetime(0)", `"2025-01-01T00:00:01.5Z"`, "!has more fraction digits of a second than datetime(0) keeps"},
		{"datetime", `"2024-02-29T23:59:59"`, "!is not an RFC 3339 date-time"},
		{"datetime", `"2024-02-29"`, "!is not an RFC 3339 date-time"},
		{"datetime", `"1000-01-01T00:30:00+01:00"`, "!outside the years 1000-9999"},
		{"datetime", `"9999-12-31T23:59:59.999Z"`, "9999-12-31T23:59:59.999Z"},
		{"datetime", `1704067200`, "!a number, want an RFC 3339 date-time"},
		{"json", ` { "a" : [ 1 , "x y" , {"b":null} ] , "c":1.50e3 } `, `{"a":[1,"x y",{"b":null}],"c":1.50e3}`},
		{"json", `"a\"b"`, `"a\"b"`},
		{"json", `false`, `false`},
		{"json", `null`, "!null"},
	}
	for _, c := range cases {
		ty, err := entity.ParseType(c.typ)
		if err != nil {
			t.Fatal(err)
		}
		e := &entity.Entity{Name: "e", Key: []string{"id"}, UpdatedAt: []string{"u"}, Columns: []entity.Column{
			{Name: "id", Type: entity.Type{Kind: entity.String, Length: 8}},
			{Name: "v", Type: ty},
		}}
		s := mustCompile(t, e, entity.Source{Name: "e"})
		member := ``
		if c.in != "" {
			member = `,"v":` + c.in
		}
		raw := `{"id":"k","u":"2025-01-01T00:00:00Z"` + member + `}`
		rec, inv, ok, err := s.DecodeItem([]byte(raw))
		if err != nil {
			t.Errorf("%s %s: %v", c.typ, c.in, err)
			continue
		}
		want, bad := strings.CutPrefix(c.want, "!")
		switch {
		case bad && ok:
			t.Errorf("%s %.40s: accepted as %q, want %q", c.typ, c.in, rec.Vals[1].Text(ty.Kind), want)
		case bad && (!strings.HasPrefix(inv.Reason, "v: ") || !strings.Contains(inv.Reason, want)):
			t.Errorf("%s %.40s: reason %q, want %q", c.typ, c.in, inv.Reason, want)
		case !bad && !ok:
			t.Errorf("%s %.40s: %s", c.typ, c.in, inv.Reason)
		case !bad && rec.Vals[1].Text(ty.Kind) != want:
			t.Errorf("%s %.40s: %q, want %q", c.typ, c.in, rec.Vals[1].Text(ty.Kind), want)
		case bad && inv.ErpID != "k":
			t.Errorf("%s: erp_id %q", c.typ, inv.ErpID)
		}
		// The value in a nullable column: missing and null are NULL.
		e.Columns[1].Nullable = true
		if c.in == "" || c.in == "null" {
			s := mustCompile(t, e, entity.Source{Name: "e"})
			if rec, _, ok, _ := s.DecodeItem([]byte(raw)); !ok || !rec.Vals[1].Null {
				t.Errorf("%s %q nullable: %v %+v", c.typ, c.in, ok, rec.Vals)
			}
		}
	}
}

// TestTypedValuesMap: a value is looked up as it is served (a string, or
// a number or boolean as written).
func TestTypedValuesMap(t *testing.T) {
	e := &entity.Entity{Name: "e", Key: []string{"id"}, UpdatedAt: []string{"u"}, Version: []string{"v"}, Columns: []entity.Column{
		{Name: "id", Type: entity.Type{Kind: entity.Int64}},
		{Name: "state", Type: entity.Type{Kind: entity.Int32}, Values: map[string]string{"1": "10", "true": "20", "on": "30", "1.0": "40"}},
	}}
	s := mustCompile(t, e, entity.Source{Name: "e"})
	for in, want := range map[string]string{`1`: "10", `true`: "20", `"on"`: "30", `1.0`: "40", `"1"`: "10", `2`: "!", `false`: "!", `null`: "!", `[1]`: "!"} {
		raw := `{"id":"-5","u":"2025-01-01T00:00:00Z","v":"7","state":` + in + `}`
		rec, inv, ok, err := s.DecodeItem([]byte(raw))
		switch {
		case err != nil:
			t.Fatal(err)
		case want == "!" && (ok || !strings.HasPrefix(inv.Reason, "state: ") || inv.ErpID != "-5" || inv.Version != 7):
			t.Errorf("%s: %v %+v", in, ok, inv)
		case want != "!" && (!ok || rec.Vals[1].I != mustAtoi(t, want) || rec.ErpID != "-5" || rec.Version != 7):
			t.Errorf("%s: %v %+v %+v", in, ok, rec, inv)
		}
	}
	e.Columns[1].Values["x"] = "2147483648"
	if _, err := Compile(e, entity.Source{Name: "e"}); err == nil || !strings.Contains(err.Error(), "past the range of int32") {
		t.Errorf("a stored value out of range: %v", err)
	}
}

func mustAtoi(t *testing.T, s string) int64 {
	v := slot{field: field{kind: kString, val: []byte(s)}}
	n, msg := integer(&v, -1<<63, 1<<63-1)
	if msg != "" {
		t.Fatal(msg)
	}
	return n
}

func TestCompileRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		mod  func(*entity.Entity)
		src  entity.Source
		want string
	}{
		"nullable key":    {func(e *entity.Entity) { e.Columns[0].Nullable = true }, entity.Source{}, "key column company"},
		"text key":        {func(e *entity.Entity) { e.Columns[1].Type = entity.Type{Kind: entity.Text} }, entity.Source{}, "key column customer"},
		"no updated_at":   {func(e *entity.Entity) { e.UpdatedAt = nil }, entity.Source{}, "no updated_at"},
		"unknown key":     {func(e *entity.Entity) { e.Key = []string{"nope"} }, entity.Source{}, "not declared"},
		"set no column":   {func(*entity.Entity) {}, entity.Source{Name: "S", Set: map[string]string{"nope": "1"}}, "sets nope"},
		"set too long":    {func(*entity.Entity) {}, entity.Source{Name: "S", Set: map[string]string{"company": "12345"}}, "longer than 4"},
		"empty path name": {func(e *entity.Entity) { e.Columns[2].From = []string{"A", ""} }, entity.Source{}, "empty name"},
		"bad values":      {func(e *entity.Entity) { e.Columns[7].Values["C"] = strings.Repeat("x", 17) }, entity.Source{}, "values maps"},
	} {
		e := customers(t)
		c.mod(e)
		if _, err := Compile(e, c.src); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// TestTypedPages decodes typed records through the REST page decoders.
func TestTypedPages(t *testing.T) {
	s := mustCompile(t, customers(t), entity.Source{Name: "Customers"})
	bad := strings.Replace(customerItem, `1234.5`, `1234.567`, 1)
	p, err := decodePage(pageOf(customerItem, bad, customerItem), nil, s)
	if err != nil || len(p.Records) != 2 || len(p.Invalid) != 1 || p.Records[1].Vals[3].S != "1234.50" || string(p.Invalid[0].Raw) != bad {
		t.Fatalf("%v %+v", err, p)
	}
	// The records do not share their values.
	p.Records[0].Vals[2].S = "changed"
	if p.Records[1].Vals[2].S != "Müller & Söhne" {
		t.Error("records share their values")
	}
	sh := DefaultShape()
	sh.Records, sh.Cursor = JSONPath{"result", "items"}, JSONPath{"result", "next"}
	p, err = sh.decodePage([]byte(`{"result":{"next":"c2","items":[`+customerItem+`]}}`), nil, s)
	if err != nil || len(p.Records) != 1 || p.NextCursor != "c2" || p.Records[0].ErpID != "1000\x1fC1" {
		t.Fatalf("shaped: %v %+v", err, p)
	}
	// A record whose updated_at the table cannot store is quarantined,
	// not one without a starts_at.
	late := strings.Replace(customerItem, `2025-01-01T00:00:04.052Z`, `0999-01-01T00:00:00Z`, 1)
	p, _ = decodePage(pageOf(customerItem, late), nil, s)
	recs, inv := SplitUnstorable(p.Records, p.Invalid)
	if len(recs) != 1 || len(inv) != 1 || inv[0].ErpID != "1000\x1fC1" {
		t.Errorf("SplitUnstorable: %d records, %+v", len(recs), inv)
	}
	if _, err := New(Config{BaseURL: "http://127.0.0.1:1", Schema: s, Mapping: IdentityMapping()}); err == nil {
		t.Error("a Mapping and a Schema accepted")
	}
}

// typedPage returns a page of n valid items of the customers entity
// without its notes column: 12 columns, a composite key, decimals, dates.
func typedPage(t testing.TB, n int) (*Schema, []byte) {
	e := customers(t)
	e.Columns = slices.DeleteFunc(e.Columns, func(c entity.Column) bool { return c.Name == "notes" })
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"CompanyCode":"%d","Customer":"C%07d","CustomerName":"Customer number %d","CreditLimit":"%d.%02d",`+
			`"IsBlocked":%v,"FoundedOn":"19%02d-%02d-%02d","Rating":%d,"Status":"%s","Address":{"City":"City %d","Zip":"%05d"},`+
			`"Seats":%d,"SignedAt":"2024-05-01T12:%02d:00.123Z","Extra":null,"ChangeCounter":%d,"LastChangeDateTime":"2025-01-01T00:00:%02d.%03dZ"}`,
			1000+i%4, i, i, i*37, i%100, i%7 == 0, i%100, i%12+1, i%28+1, int64(i)*1e12+int64(i), []string{"A", "B"}[i%2], i%50, i,
			i%300, i%60, i+1, i/1000%60, i%1000)
	}
	return mustCompile(t, e, entity.Source{Name: "Customers"}), []byte(`{"data":[` + strings.Join(items, ",") + `],"next_cursor":"x"}`)
}

// BenchmarkDecodeTypedPage decodes a 500-item page of a 12-column entity:
// compare its ns/record with BenchmarkDecodePage's.
func BenchmarkDecodeTypedPage(b *testing.B) {
	s, body := typedPage(b, 500)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		p, err := decodePage(body, nil, s)
		if err != nil || len(p.Records) != 500 {
			b.Fatal(err, p.Invalid)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*500), "ns/record")
}

// TestTypedLeafAndParent: one property read whole (json) and into (a
// nested column).
func TestTypedLeafAndParent(t *testing.T) {
	e := &entity.Entity{Name: "e", Key: []string{"id"}, UpdatedAt: []string{"meta", "u"}, Columns: []entity.Column{
		{Name: "id", Type: entity.Type{Kind: entity.Int64}},
		{Name: "address", From: []string{"Address"}, Type: entity.Type{Kind: entity.JSON}, Nullable: true},
		{Name: "city", From: []string{"Address", "City"}, Type: entity.Type{Kind: entity.String, Length: 10}, Nullable: true},
		{Name: "zip", From: []string{"Address", "Zip", "Code"}, Type: entity.Type{Kind: entity.String, Length: 10}},
	}}
	s := mustCompile(t, e, entity.Source{Name: "e"})
	rec, inv, ok, err := s.DecodeItem([]byte(`{"id":1,"Address":{"City":"Köln", "Zip":{"Code":"50667"}},"meta":{"x":[],"u":"2025-01-01T00:00:00Z"}}`))
	if err != nil || !ok || rec.Vals[1].S != `{"City":"Köln","Zip":{"Code":"50667"}}` || rec.Vals[2].S != "Köln" || rec.Vals[3].S != "50667" {
		t.Fatalf("%v %+v %+v", err, rec.Vals, inv)
	}
	_, inv, ok, _ = s.DecodeItem([]byte(`{"id":1,"Address":[1],"meta":{"u":"2025-01-01T00:00:00Z"}}`))
	if ok || inv.Reason != "city: Address is not an object; zip: Address is not an object" {
		t.Errorf("%v %q", ok, inv.Reason)
	}
	_, inv, ok, _ = s.DecodeItem([]byte(`{"id":1,"Address":null,"meta":{"u":"2025-01-01T00:00:00Z"}}`))
	if ok || inv.Reason != "zip: missing" {
		t.Errorf("%v %q", ok, inv.Reason)
	}
	_, inv, ok, _ = s.DecodeItem([]byte(`{"id":1,"meta":5}`))
	if ok || !strings.Contains(inv.Reason, "updated_at (meta.u): ") || inv.ErpID != "1" {
		t.Errorf("%v %+v", ok, inv)
	}
}
