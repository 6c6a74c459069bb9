package erp

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/entity"
)

// membershipCorpus returns the items of the membership tests: erpmock
// pages with invalid items, the valid item and its variations, and the
// items of the membership fuzz seeds.
func membershipCorpus(t testing.TB) [][]byte {
	var pages [][]byte
	for seed := range int64(4) {
		opt := erpmock.Options{Records: 200, Seed: seed, Faults: erpmock.Faults{InvalidRate: 0.5, DuplicateRate: 0.2, StaleRate: 0.2}}
		pages = append(pages, mockPage(t, opt, "limit=200"))
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzDecodePage", "*"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			if s, ok := strings.CutPrefix(line, "[]byte("); ok {
				if body, err := strconv.Unquote(strings.TrimSuffix(s, ")")); err == nil {
					pages = append(pages, []byte(body))
				}
			}
		}
	}
	var items [][]byte
	for _, body := range pages {
		var env struct{ Data []json.RawMessage }
		if json.Unmarshal(body, &env) == nil {
			for _, it := range env.Data {
				items = append(items, it)
			}
		}
	}
	for _, r := range [][2]string{
		{``, ``},
		{`"ends_at":"2024-12-31T23:59:59.999+01:00",`, ``},
		{`"2024-12-31T23:59:59.999+01:00"`, `null`},
		{`"2024-12-31T23:59:59.999+01:00"`, `"2023-12-31T23:59:59.999Z"`},
		{`"2024-01-01T00:00:00Z"`, `"0999-12-31T23:00:00-01:00"`},
		{`"2024-01-01T00:00:00Z"`, `"0999-12-31T23:00:00Z"`},
		{`"2024-01-01T00:00:00Z"`, `"2024-01-01"`},
		{`"version":3`, `"version":"3"`},
		{`"version":3`, `"version":"x"`},
		{`"version":3`, `"version":0`},
		{`"version":3`, `"version":9223372036854775808`},
		{`"version":3`, `"version":1e2`},
		{`"M-1.a_B"`, `"M 1"`},
		{`"M-1.a_B"`, `""`},
		{`"M-1.a_B"`, `"a\u0000"`},
		{`"M-1.a_B"`, `7`},
		{`"U1"`, `""`},
		{`"U1"`, `"` + strings.Repeat("é", 65) + `"`},
		{`"U1"`, `"\u001b[31m"`},
		{`"GYM"`, `"G\u0085"`},
		{`"ACTIVE"`, `"active"`},
		{`"status":"ACTIVE",`, ``},
		{`"updated_at":"2025-01-01T00:00:00.001Z"`, `"updated_at":"2025-01-01"`},
		{`{`, `{"extra":{"nested":[1,2.5e3,true,null,"x"]},`},
		{`"version":3`, `"version":1,"version":2`},
		{`{`, `[{`},
	} {
		v := strings.Replace(item, r[0], r[1], 1)
		if r[0] == `{` && r[1] == `[{` {
			v += "]"
		}
		items = append(items, []byte(v))
	}
	return items
}

// TestMembershipsCompiled holds Compile(entity.Memberships()) to the
// hand-written membership decoder on the membership corpus.
func TestMembershipsCompiled(t *testing.T) {
	s := mustCompile(t, entity.Memberships(), entity.Source{Name: "memberships"}).IntegerVersion()
	valid, invalid := 0, 0
	for _, it := range membershipCorpus(t) {
		if compareMembership(t, s, it) {
			valid++
		} else {
			invalid++
		}
	}
	if valid < 100 || invalid < 100 {
		t.Errorf("%d valid and %d invalid items: the corpus should hold many of both", valid, invalid)
	}
}

// FuzzMembershipsCompiled is TestMembershipsCompiled on any item.
func FuzzMembershipsCompiled(f *testing.F) {
	for _, it := range membershipCorpus(f)[:60] {
		f.Add(it)
	}
	f.Add([]byte(item))
	s := mustCompile(f, entity.Memberships(), entity.Source{Name: "memberships"}).IntegerVersion()
	f.Fuzz(func(t *testing.T, raw []byte) {
		if json.Valid(raw) {
			compareMembership(t, s, raw)
		}
	})
}

// compareMembership decodes the item raw with the membership decoder and
// with s, the compiled memberships entity, and fails t where they differ
// beyond the differences the declaration implies. The declaration of
// memberships carries every rule of the membership decoder (erp_id's
// pattern, member_id and product_code not empty, ends_at not before
// starts_at), and s reads the version as a JSON integer only
// (IntegerVersion), as a REST source does. The typed decoder differs in
// two ways by its contract: a date-time outside the years 1000-9999
// (in UTC) is invalid when decoded, where the membership decoder leaves
// it to SplitUnstorable; and a datetime value is stored truncated to the
// millisecond, where a membership keeps the nanoseconds. It reports
// whether the item is valid.
func compareMembership(t testing.TB, s *Schema, raw []byte) bool {
	t.Helper()
	p, err := decodePage(pageOf(string(raw)), nil, nil)
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	rec, inv, ok, err := s.DecodeItem(raw)
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(raw, &obj)

	var want []string // what the typed decoder should name
	if len(p.Invalid) == 1 {
		for _, part := range strings.Split(p.Invalid[0].Reason, "; ") {
			name, _, _ := strings.Cut(part, ": ")
			want = append(want, name)
		}
	}
	for _, name := range []string{"starts_at", "ends_at"} {
		var v string
		if json.Unmarshal(obj[name], &v) == nil {
			if tm, ok := parseTime([]byte(v)); ok && !storable(tm.Truncate(time.Millisecond)) {
				want = append(want, name)
			}
		}
	}
	var got []string
	if !ok {
		for _, name := range reasonLabels(inv.Reason) {
			got = append(got, name)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	want, got = slices.Compact(want), slices.Compact(got)
	if !slices.Equal(got, want) && !(inv.Reason == "item is not a JSON object" && slices.Equal(want, []string{"item is not a JSON object"})) {
		t.Fatalf("%s\nmembership: %+v\ntyped: %q names %v, want %v", raw, p.Invalid, inv.Reason, got, want)
	}
	switch {
	case ok && len(p.Records) == 1:
		m := p.Records[0]
		ends := entity.Value{Null: true}
		if m.EndsAt != nil {
			ends = entity.Value{T: m.EndsAt.Truncate(time.Millisecond)}
		}
		wantVals := []entity.Value{{S: m.ErpID}, {S: m.MemberID}, {S: m.ProductCode}, {S: m.Status}, {T: m.StartsAt.Truncate(time.Millisecond)}, ends}
		for i, w := range wantVals {
			if !sameValue(rec.Vals[i], w) {
				t.Fatalf("%s: %s = %+v, membership %+v", raw, s.e.Columns[i].Name, rec.Vals[i], w)
			}
		}
		if rec.ErpID != m.ErpID || rec.Version != m.Version || !rec.UpdatedAt.Equal(m.UpdatedAt) {
			t.Fatalf("%s: %q %d %v, membership %q %d %v", raw, rec.ErpID, rec.Version, rec.UpdatedAt, m.ErpID, m.Version, m.UpdatedAt)
		}
	case !ok && len(p.Invalid) == 1:
		m := p.Invalid[0]
		if inv.ErpID != "" && inv.ErpID != m.ErpID || !inv.UpdatedAt.Equal(m.UpdatedAt) || inv.Version != m.Version || !bytes.Equal(inv.Raw, m.Raw) {
			t.Fatalf("%s: invalid %q %v %d, membership %q %v %d", raw, inv.ErpID, inv.UpdatedAt, inv.Version, m.ErpID, m.UpdatedAt, m.Version)
		}
	case !ok:
		// Valid as a membership, invalid as typed: only for a date-time
		// the table cannot store, named above.
	}
	return ok
}
