package odata

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
)

// FuzzV2Value: a V2 value of any text converts without a panic; a
// /Date(ms)/ of any millisecond and offset becomes the RFC 3339 instant
// ms in UTC (a date when the column is one and ms a midnight), and every
// other string of a date-time column is left as it came unless it is a
// date-time without a zone.
func FuzzV2Value(f *testing.F) {
	for _, s := range []string{`/Date(1546992000000)/`, `/Date(-315619200000)/`, `/Date(1735689600123+0060)/`, `/Date(253402300799999)/`, `PT12H30M15S`, `PT1H`, `2025-01-02T03:04:05.123`, `2025-01-01`, `x`} {
		f.Add(s, int64(0), false)
	}
	f.Add("", int64(-62135596800000), true)
	f.Add("", int64(1546992000000), true)
	f.Fuzz(func(t *testing.T, s string, ms int64, useMS bool) {
		raw, _ := json.Marshal(s)
		for _, kind := range []entity.Kind{entity.Date, entity.DateTime, entity.String, entity.Int64} {
			convertV2(raw, kind, propertyV2{Type: "Edm.Time"})
			normalizeV2(raw, map[string]entity.Kind{"a": kind}, nil)
		}
		if !useMS || ms < -62135596800000 || ms > 253402300799999 {
			return
		}
		lit, _ := json.Marshal("/Date(" + strconv.FormatInt(ms, 10) + "+0000)/")
		var got string
		if err := json.Unmarshal(convertV2(lit, entity.DateTime, propertyV2{}), &got); err != nil {
			t.Fatal(err)
		}
		if at, err := time.Parse(time.RFC3339Nano, got); err != nil || !at.Equal(time.UnixMilli(ms)) {
			t.Fatalf("/Date(%d)/ became %q (%v), want %s", ms, got, err, time.UnixMilli(ms).UTC().Format(time.RFC3339Nano))
		}
		if err := json.Unmarshal(convertV2(lit, entity.Date, propertyV2{}), &got); err != nil {
			t.Fatal(err)
		}
		if midnight := ms%86400000 == 0; midnight != (len(got) == len(time.DateOnly)) {
			t.Fatalf("/Date(%d)/ in a date column became %q", ms, got)
		}
	})
}

// FuzzV2Page: any body is a V2 page or an error, never a panic, and every
// item of a page normalizes.
func FuzzV2Page(f *testing.F) {
	f.Add([]byte(`{"d":{"results":[{"__metadata":{"uri":"x"},"A":"/Date(0)/","Items":{"results":[{"B":"1"}],"__next":"n"},"N":{"__deferred":{"uri":"y"}}}],"__next":"z"}}`))
	f.Add([]byte(`{"d":[{"A":null}]}`))
	f.Add([]byte(`{"d":{"results":null}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var env envelopeV2
		if env.decode(body) != nil {
			return
		}
		for _, it := range env.results {
			normalizeV2(it, map[string]entity.Kind{"A": entity.DateTime, "S/T": entity.Date}, map[string]propertyV2{"A": {Type: "Edm.DateTime"}})
		}
	})
}
