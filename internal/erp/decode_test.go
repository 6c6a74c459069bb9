package erp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/erpsync/erpsync/erpmock"
)

// mockPage returns a page body served by erpmock.
func mockPage(t testing.TB, opt erpmock.Options, query string) []byte {
	t.Helper()
	w := httptest.NewRecorder()
	erpmock.New(opt).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/v1/memberships?"+query, nil))
	if w.Code != http.StatusOK {
		t.Fatalf("mock: %d %s", w.Code, w.Body)
	}
	return w.Body.Bytes()
}

func TestDecodeMockPage(t *testing.T) {
	opt := erpmock.Options{Records: 600, Seed: 8}
	p, err := decodePage(mockPage(t, opt, "limit=1000"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	truth := erpmock.New(opt).Truth()
	if len(p.Records) != len(truth) || len(p.Invalid) != 0 || p.NextCursor != "" {
		t.Fatalf("%d records, %d invalid, cursor %q", len(p.Records), len(p.Invalid), p.NextCursor)
	}
	for i, r := range p.Records {
		w := truth[i]
		if r.ErpID != w.ErpID || r.MemberID != w.MemberID || r.ProductCode != w.ProductCode || r.Status != w.Status ||
			r.StartsAt != w.StartsAt || r.Version != w.Version || r.UpdatedAt != w.UpdatedAt ||
			(r.EndsAt == nil) != (w.EndsAt == nil) || r.EndsAt != nil && *r.EndsAt != *w.EndsAt {
			t.Fatalf("record %d: %+v, want %+v", i, r, w)
		}
	}
	p, err = decodePage(mockPage(t, opt, "limit=10"), nil, nil)
	if err != nil || len(p.Records) != 10 || p.NextCursor == "" {
		t.Fatalf("first page: %v, %+v", err, p)
	}
}

// item is a valid item; tests change it with strings.Replace.
const item = `{"erp_id":"M-1.a_B","member_id":"U1","product_code":"GYM","status":"ACTIVE",` +
	`"starts_at":"2024-01-01T00:00:00Z","ends_at":"2024-12-31T23:59:59.999+01:00","version":3,` +
	`"updated_at":"2025-01-01T00:00:00.001Z"}`

func pageOf(items ...string) []byte {
	return []byte(`{"data":[` + strings.Join(items, ",") + `],"next_cursor":null}`)
}

func TestDecodeValidItem(t *testing.T) {
	p, err := decodePage(pageOf(item), nil, nil)
	if err != nil || len(p.Records) != 1 {
		t.Fatalf("%v %+v", err, p)
	}
	ends := time.Date(2024, 12, 31, 22, 59, 59, 999e6, time.UTC)
	want := Record{ErpID: "M-1.a_B", MemberID: "U1", ProductCode: "GYM", Status: "ACTIVE",
		StartsAt: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), EndsAt: &ends, Version: 3,
		UpdatedAt: time.Date(2025, 1, 1, 0, 0, 0, 1e6, time.UTC)}
	got := p.Records[0]
	if got.EndsAt == nil || *got.EndsAt != *want.EndsAt {
		t.Fatalf("ends_at %v, want %v", got.EndsAt, want.EndsAt)
	}
	got.EndsAt = want.EndsAt
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if got.StartsAt.Location() != time.UTC {
		t.Error("times not in UTC")
	}
	// Accepted variations of a valid item.
	for _, v := range []string{
		strings.Replace(item, `"ends_at":"2024-12-31T23:59:59.999+01:00",`, ``, 1),
		strings.Replace(item, `"2024-12-31T23:59:59.999+01:00"`, `null`, 1),
		strings.Replace(item, `"2024-12-31T23:59:59.999+01:00"`, `"2024-01-01T00:00:00Z"`, 1), // ends == starts
		strings.Replace(item, `"version":3`, `"version":9223372036854775807`, 1),
		strings.Replace(item, `{`, `{"extra":{"nested":[1,2.5e3,true,null,"x"]},`, 1),
		strings.Replace(item, `"U1"`, `"`+strings.Repeat("é", 64)+`"`, 1), // 64 characters, 128 bytes
		strings.Replace(item, `"U1"`, `"\u00e9\ud83d\ude00 \"q\""`, 1),
		strings.Replace(item, `"erp_id"`, `"erp\u005fid"`, 1),
		strings.Replace(item, `"M-1.a_B"`, `"`+strings.Repeat("a", 64)+`"`, 1),
		" \n\t" + item + " \r\n",
	} {
		p, err := decodePage(pageOf(v), nil, nil)
		if err != nil || len(p.Records) != 1 {
			t.Errorf("%s: %v, %+v", v, err, p)
		}
	}
}

func TestDecodeInvalidItems(t *testing.T) {
	cases := []struct {
		from, to, reason string
	}{
		{`"erp_id":"M-1.a_B",`, ``, "erp_id: missing"},
		{`"M-1.a_B"`, `""`, "erp_id: empty"},
		{`"M-1.a_B"`, `"M 1"`, `erp_id: character ' ' not allowed`},
		{`"M-1.a_B"`, `"M/1"`, `erp_id: character '/' not allowed`},
		{`"M-1.a_B"`, `"Mé"`, `erp_id: character 'é' not allowed`},
		{`"M-1.a_B"`, `"` + strings.Repeat("a", 65) + `"`, "erp_id: longer than 64 characters"},
		{`"M-1.a_B"`, `7`, "erp_id: a number, want a string"},
		{`"M-1.a_B"`, `null`, "erp_id: null, want a string"},
		{`"member_id":"U1",`, ``, "member_id: missing"},
		{`"U1"`, `"` + strings.Repeat("é", 65) + `"`, "member_id: longer than 64 characters"},
		{`"U1"`, "\"\xff\"", "member_id: not valid UTF-8"},
		{`"U1"`, `["U1"]`, "member_id: a boolean, object or array, want a string"},
		{`"GYM"`, `"` + strings.Repeat("p", 33) + `"`, "product_code: longer than 32 characters"},
		{`"GYM"`, `""`, "product_code: empty"},
		{`"ACTIVE"`, `"active"`, `status: "active" is not one of`},
		{`"ACTIVE"`, `"PENDING"`, `status: "PENDING" is not one of`},
		{`"status":"ACTIVE",`, ``, "status: missing"},
		{`"2024-01-01T00:00:00Z"`, `"2024-02-30T00:00:00Z"`, "starts_at: \"2024-02-30T00:00:00Z\" is not an RFC 3339 date-time"},
		{`"2024-01-01T00:00:00Z"`, `"2024-01-01 00:00:00Z"`, "starts_at: "},
		{`"2024-01-01T00:00:00Z"`, `"2024-01-01T00:00:00"`, "starts_at: "},
		{`"2024-01-01T00:00:00Z"`, `"2024-01-01T00:00:60Z"`, "starts_at: "},
		{`"2024-01-01T00:00:00Z"`, `1704067200`, "starts_at: a number, want an RFC 3339 date-time"},
		{`"2024-12-31T23:59:59.999+01:00"`, `"2023-12-31T23:59:59.999Z"`, "ends_at: before starts_at"},
		{`"2024-12-31T23:59:59.999+01:00"`, `"2024-01-01T00:59:59+01:00"`, "ends_at: before starts_at"},
		{`"2024-12-31T23:59:59.999+01:00"`, `"tomorrow"`, "ends_at: \"tomorrow\" is not"},
		{`"2024-12-31T23:59:59.999+01:00"`, `false`, "ends_at: a boolean, object or array"},
		{`"version":3`, `"version":0`, "version: 0 is below 1"},
		{`"version":3`, `"version":-2`, "version: -2 is below 1"},
		{`"version":3`, `"version":"3"`, "version: a string, want an integer"},
		{`"version":3`, `"version":1.5`, `version: "1.5" is not an integer`},
		{`"version":3`, `"version":1.0`, `version: "1.0" is not an integer`},
		{`"version":3`, `"version":1e2`, `version: "1e2" is not an integer`},
		{`"version":3`, `"version":9223372036854775808`, "version: 9223372036854775808 is out of the int64 range"},
		{`"version":3`, `"version":null`, "version: null, want an integer"},
		{`"version":3,`, ``, "version: missing"},
		{`"updated_at":"2025-01-01T00:00:00.001Z"`, `"updated_at":"2025-01-01T00:00:00.Z"`, "updated_at: "},
		// An erp_id becomes part of a Redis key ("<prefix>{rec:<erp_id>}"):
		// a brace would steer the hash tag, a colon could make two ids one key.
		{`"M-1.a_B"`, `"a{b}"`, `erp_id: character '{' not allowed`},
		{`"M-1.a_B"`, `"}x"`, `erp_id: character '}' not allowed`},
		{`"M-1.a_B"`, `"rec:1"`, `erp_id: character ':' not allowed`},
		{`"M-1.a_B"`, `"a\u0000"`, `erp_id: character '\x00' not allowed`},
		{`"M-1.a_B"`, "\"a\xc3\"", `erp_id: not valid UTF-8`},
		{`"M-1.a_B"`, `"` + strings.Repeat("x", 1<<20) + `"`, "erp_id: longer than 64 characters"},
		// Control characters, escaped (raw ones are not JSON).
		{`"U1"`, `"U\u0000"`, "member_id: control character U+0000 not allowed"},
		{`"U1"`, `"\u001b[31mU"`, "member_id: control character U+001B not allowed"},
		{`"U1"`, `"U\u007f"`, "member_id: control character U+007F not allowed"},
		{`"GYM"`, `"G\u0085"`, "product_code: control character U+0085 not allowed"},
		{`"GYM"`, `"G\r\nX-Injected: 1"`, "product_code: control character U+000D not allowed"},
		// Huge strings and years the table cannot hold.
		{`"U1"`, `"` + strings.Repeat("é", 1<<19) + `"`, "member_id: longer than 64 characters"},
		{`"2024-01-01T00:00:00Z"`, `"10000-01-01T00:00:00Z"`, "starts_at: "},
		{`"2024-01-01T00:00:00Z"`, `"2024-01-01T00:00:00+24:00"`, "starts_at: "},
		{`"2024-01-01T00:00:00Z"`, `"` + strings.Repeat("9", 1<<16) + `"`, "starts_at: "},
		{`"version":3`, `"version":` + strings.Repeat("9", 1<<16), "version: " + strings.Repeat("9", 40) + "... is out of the int64 range"},
		{`"ERP_ID"`, `"ERP_ID"`, ""}, // placeholder, replaced below
	}
	cases[len(cases)-1] = struct{ from, to, reason string }{`"erp_id"`, `"ERP_ID"`, "erp_id: missing"} // keys are case-sensitive
	for _, c := range cases {
		v := strings.Replace(item, c.from, c.to, 1)
		if v == item {
			t.Fatalf("case %q does not change the item", c.from)
		}
		p, err := decodePage(pageOf(item, v, item), nil, nil)
		if err != nil {
			t.Errorf("%s: page failed: %v", v, err)
			continue
		}
		if len(p.Records) != 2 || len(p.Invalid) != 1 {
			t.Errorf("%s: %d valid, %d invalid", v, len(p.Records), len(p.Invalid))
			continue
		}
		inv := p.Invalid[0]
		if !strings.Contains(inv.Reason, c.reason) {
			t.Errorf("%s: reason %q, want %q", v, inv.Reason, c.reason)
		}
		if string(inv.Raw) != v {
			t.Errorf("raw %s, want %s", inv.Raw, v)
		}
		if want := time.Date(2025, 1, 1, 0, 0, 0, 1e6, time.UTC); !strings.Contains(c.reason, "updated_at") && inv.UpdatedAt != want {
			t.Errorf("%s: updated_at %v", v, inv.UpdatedAt)
		}
	}
	// Several problems are all reported; a non-object item is invalid too.
	p, err := decodePage(pageOf(`{"erp_id":"a b","status":"X"}`, `42`, `"M1"`, `[]`, `null`, `{}`), nil, nil)
	if err != nil || len(p.Invalid) != 6 || len(p.Records) != 0 {
		t.Fatalf("%v %+v", err, p)
	}
	if r := p.Invalid[0].Reason; strings.Count(r, "; ") != 6 || p.Invalid[0].ErpID != "a b" {
		t.Errorf("reason %q, erp_id %q", r, p.Invalid[0].ErpID)
	}
	if r := p.Invalid[1].Reason; r != "item is not a JSON object" || string(p.Invalid[1].Raw) != "42" {
		t.Errorf("reason %q", r)
	}
}

func TestDecodeBrokenPages(t *testing.T) {
	for _, body := range []string{
		``, ` `, `null`, `[]`, `"x"`, `{}`,
		`{"data":[]}`, `{"next_cursor":null}`,
		`{"data":null,"next_cursor":null}`, `{"data":{},"next_cursor":null}`,
		`{"data":[],"next_cursor":5}`, `{"data":[],"next_cursor":false}`,
		`{"data":[],"next_cursor":null}x`, `{"data":[],"next_cursor":null}{}`, "{\"data\":[],\"next_cursor\":null}\x00",
		`{"data":[` + item + `,],"next_cursor":null}`,
		`{"data":[` + item + `],"next_cursor":null,}`,
		`{"data":[` + item[:len(item)/2],
		`{"data":[{"erp_id":"a\x01"}],"next_cursor":null}`,
		`{"data":[{"erp_id":"a\q"}],"next_cursor":null}`,
		`{"data":[{"erp_id":"\u12"}],"next_cursor":null}`,
		`{"data":[{"version":01}],"next_cursor":null}`,
		`{"data":[{"version":-}],"next_cursor":null}`,
		`{"data":[{"version":1.}],"next_cursor":null}`,
		`{"data":[{"version":1e}],"next_cursor":null}`,
		`{"data":[{"x":tru}],"next_cursor":null}`,
		`{"data":[{"x" 1}],"next_cursor":null}`,
		`{"data":[{1:1}],"next_cursor":null}`,
		`{'data':[],"next_cursor":null}`,
		`{"data":[` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `],"next_cursor":null}`,
		"<html>502 Bad Gateway</html>",
	} {
		if p, err := decodePage([]byte(body), nil, nil); err == nil {
			t.Errorf("%.80s: decoded %+v, want an error", body, p)
		}
	}
	p, err := decodePage([]byte(`{"next_cursor":"abc","other":[1,{"a":null}],"data":[]}`), nil, nil)
	if err != nil || p.NextCursor != "abc" || len(p.Records)+len(p.Invalid) != 0 {
		t.Errorf("%v %+v", err, p)
	}
}

func TestParseTime(t *testing.T) {
	for _, s := range []string{
		"2025-01-01T00:00:00Z", "2025-01-01T00:00:00.1Z", "2025-01-01T00:00:00.123456789Z",
		"2025-01-01T00:00:00.1234567891234Z", "2024-02-29T23:59:59+23:59", "0000-01-01T00:00:00-00:30",
		"9999-12-31T23:59:59.999Z", "1969-12-31T23:59:59.5Z", "2000-02-29T12:00:00+05:30",
	} {
		got, ok := parseTime([]byte(s))
		want, err := time.Parse(time.RFC3339Nano, s)
		if !ok || err != nil || !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("%s: %v %v, time.Parse %v %v", s, got, ok, want, err)
		}
	}
	for _, s := range []string{
		"", "2025-01-01", "2025-01-01T00:00:00", "2025-01-01T00:00:00z", "2025-01-01t00:00:00Z",
		"2025-01-01 00:00:00Z", "2025-13-01T00:00:00Z", "2025-00-01T00:00:00Z", "2023-02-29T00:00:00Z",
		"1900-02-29T00:00:00Z", "2025-04-31T00:00:00Z", "2025-01-01T24:00:00Z", "2025-01-01T00:60:00Z",
		"2025-01-01T00:00:60Z", "2025-01-01T00:00:00.Z", "2025-01-01T00:00:00,5Z", "2025-01-01T00:00:00+24:00",
		"2025-01-01T00:00:00+01:60", "2025-01-01T00:00:00+0100", "2025-01-01T00:00:00+01", "2025-01-01T00:00:00ZZ",
		"+2025-01-01T00:00:00Z", "2025-1-01T00:00:00Z", "２025-01-01T00:00:00Z", "2025-01-01T00:00:00 Z",
	} {
		if got, ok := parseTime([]byte(s)); ok {
			t.Errorf("%q parsed as %v", s, got)
		}
	}
}

func TestDecodeCount(t *testing.T) {
	for body, want := range map[string]int64{`{"count":0}`: 0, ` {"x":[1], "count": 12345}` + "\n": 12345} {
		if n, err := decodeCount([]byte(body)); err != nil || n != want {
			t.Errorf("%s: %d %v", body, n, err)
		}
	}
	for _, body := range []string{`{}`, `{"count":-1}`, `{"count":1.5}`, `{"count":"3"}`, `{"count":1}}`, `[1]`, `{"count":99999999999999999999}`} {
		if n, err := decodeCount([]byte(body)); err == nil {
			t.Errorf("%s: %d, want an error", body, n)
		}
	}
}

// checkPage holds for every decoded page: each item of data is in Records
// or in Invalid with a reason, and every record keeps the schema's rules.
func checkPage(t *testing.T, body []byte, p *Page) {
	var env struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("decoded a page encoding/json rejects (%v): %q", err, body)
	}
	if len(p.Records)+len(p.Invalid) != len(env.Data) {
		t.Fatalf("%d items, %d records + %d invalid", len(env.Data), len(p.Records), len(p.Invalid))
	}
	for _, inv := range p.Invalid {
		if inv.Reason == "" || !json.Valid(inv.Raw) {
			t.Fatalf("invalid item without a reason or with broken raw JSON: %+v", inv)
		}
	}
	for _, r := range p.Records {
		if err := checkRecord(r); err != nil {
			t.Fatalf("record %+v: %v", r, err)
		}
	}
}

func checkRecord(r Record) error {
	switch {
	case r.ErpID == "" || len(r.ErpID) > 64 || strings.Trim(r.ErpID, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "":
		return fmt.Errorf("erp_id %q", r.ErpID)
	case r.MemberID == "" || len([]rune(r.MemberID)) > 64, r.ProductCode == "" || len([]rune(r.ProductCode)) > 32:
		return fmt.Errorf("member_id or product_code")
	case strings.ContainsFunc(r.MemberID+r.ProductCode, unicode.IsControl) || !utf8.ValidString(r.MemberID+r.ProductCode):
		return fmt.Errorf("a control character or broken UTF-8 in member_id %q or product_code %q", r.MemberID, r.ProductCode)
	case !strings.Contains(" ACTIVE SUSPENDED CANCELLED EXPIRED ", " "+r.Status+" ") || r.Status == "":
		return fmt.Errorf("status %q", r.Status)
	case r.Version < 1:
		return fmt.Errorf("version %d", r.Version)
	case r.StartsAt.Location() != time.UTC || r.UpdatedAt.Location() != time.UTC:
		return fmt.Errorf("times not UTC")
	case r.EndsAt != nil && (r.EndsAt.Before(r.StartsAt) || r.EndsAt.Location() != time.UTC):
		return fmt.Errorf("ends_at %v", r.EndsAt)
	}
	return nil
}

func FuzzDecodePage(f *testing.F) {
	mock := erpmock.Options{Records: 40, Seed: 2, Faults: erpmock.Faults{InvalidRate: 0.3, DuplicateRate: 1, StaleRate: 1}}
	// Small seeds: the fuzzer minimizes every input that finds new
	// coverage, which is slow for large ones.
	f.Add(mockPage(f, mock, "limit=3"))
	f.Add(mockPage(f, mock, "limit=2&updated_since=2025-01-01T00:00:00.004Z"))
	f.Add(pageOf(strings.Replace(item, `"M-1.a_B"`, `"M 1"`, 1), strings.Replace(item, `"version":3`, `"version":0`, 1),
		strings.Replace(item, `"2024-12-31T23:59:59.999+01:00"`, `"2023-01-01T00:00:00Z"`, 1)))
	f.Add(pageOf(item, strings.Replace(item, `3`, `"3"`, 1), `7`))
	f.Add(pageOf(strings.Replace(item, `"U1"`, `"\ud800\u00e9\""`, 1)))
	f.Add([]byte(`{"data":[],"next_cursor":"eyJ1IjoxfQ"}`))
	f.Add([]byte(`{"data":[` + item[:len(item)/2]))
	f.Add([]byte(`{"data":[{"version":1e5,"ends_at":null,"x":[{}]}],"next_cursor":null}`))
	f.Add([]byte(`{"data":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := decodePage(body, nil, nil)
		if err != nil {
			if p != nil {
				t.Fatal("a page with an error")
			}
			// Only what is not valid JSON, or not the page's shape, fails.
			var top map[string]json.RawMessage
			if json.Unmarshal(body, &top) == nil {
				data, next := top["data"], string(top["next_cursor"])
				if len(data) > 0 && data[0] == '[' && (next == "null" || strings.HasPrefix(next, `"`)) {
					t.Fatalf("rejected a page encoding/json reads (%v): %q", err, body)
				}
			}
			return
		}
		checkPage(t, body, p)
		// The decoder accepts valid JSON only, with an object at the top.
		var top map[string]json.RawMessage
		if json.Unmarshal(body, &top) != nil {
			t.Fatalf("accepted a body encoding/json rejects: %q", body)
		}
		for _, r := range p.Records {
			// A record is a valid item: times reparse with time.Parse. An
			// offset can move 0000-01-01 or 9999-12-31 one year out in
			// UTC (the syncer quarantines what the table cannot hold).
			for _, ts := range []time.Time{r.StartsAt, r.UpdatedAt} {
				if y := ts.Year(); y < -1 || y > 10000 {
					t.Fatalf("year %d from a four-digit date-time", y)
				} else if y < 0 || y > 9999 {
					continue
				}
				if _, err := time.Parse(time.RFC3339Nano, ts.Format(time.RFC3339Nano)); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"2025-01-01T00:00:00Z", "2024-02-29T23:59:59.123456789+05:30", "2025-01-01T00:00:00,5Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseTime([]byte(s))
		if !ok {
			return
		}
		want, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || !got.Equal(want) {
			t.Fatalf("%q: %v, time.Parse %v %v", s, got, want, err)
		}
	})
}

func BenchmarkDecodePage(b *testing.B) {
	body := mockPage(b, erpmock.Options{Records: 1000, Seed: 1}, "limit=500")
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		p, err := decodePage(body, nil, nil)
		if err != nil || len(p.Records) != 500 {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*500), "ns/record")
}

// BenchmarkDecodePageEncodingJSON is the yardstick: encoding/json into
// pointer fields, before any validation.
func BenchmarkDecodePageEncodingJSON(b *testing.B) {
	body := mockPage(b, erpmock.Options{Records: 1000, Seed: 1}, "limit=500")
	type wire struct {
		ErpID, MemberID, ProductCode, Status *string
		StartsAt, EndsAt, UpdatedAt          *string
		Version                              *json.Number
	}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var p struct {
			Data       []wire  `json:"data"`
			NextCursor *string `json:"next_cursor"`
		}
		if err := json.Unmarshal(body, &p); err != nil || len(p.Data) != 500 {
			b.Fatal(err)
		}
	}
}
