package erp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
)

func FuzzDecodeShapedPage(f *testing.F) {
	opt := erpmock.Options{Records: 30, Seed: 3, Face: erpmock.FaceV2, Faults: erpmock.Faults{InvalidRate: 0.3, DuplicateRate: 1, StaleRate: 1}}
	for _, q := range []string{"limit=3", "limit=2&offset=28"} {
		w := httptest.NewRecorder()
		erpmock.New(opt).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v2/members/changes?"+q, nil))
		f.Add(w.Body.Bytes())
	}
	f.Add([]byte(`{"result":{"next":12,"items":[]}}`))
	f.Add([]byte(`{"result":{"items":[{"id":"A"}],"next":null},"result":{"items":[]}}`))
	f.Add([]byte(`{"result":[{"items":[]}]}`))
	m, err := ParseMapping("erp_id=id,member_id=customer,product_code=plan,status=state,starts_at=from,ends_at=to,version=rev,updated_at=modified", "active=ACTIVE,paused=SUSPENDED")
	if err != nil {
		f.Fatal(err)
	}
	s := DefaultShape()
	s.Records, s.Cursor = JSONPath{"result", "items"}, JSONPath{"result", "next"}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := s.decodePage(body, m, nil)
		if err != nil {
			if p != nil {
				t.Fatal("a page with an error")
			}
			return
		}
		// Accepted: valid JSON, with the records array where the shape
		// says and every item of it either a record or an invalid one.
		// Maps, not structs: encoding/json matches struct fields without
		// regard to case.
		var top, result map[string]json.RawMessage
		var items []json.RawMessage
		if err := json.Unmarshal(body, &top); err != nil {
			t.Fatalf("accepted a body encoding/json rejects (%v): %q", err, body)
		}
		if err := json.Unmarshal(top["result"], &result); err != nil {
			t.Fatalf("accepted a body without a result object (%v): %q", err, body)
		}
		if err := json.Unmarshal(result["items"], &items); err != nil || items == nil {
			t.Fatalf("accepted a body without result.items (%v): %q", err, body)
		}
		if n := len(p.Records) + len(p.Invalid); n != len(items) {
			t.Fatalf("%d items decoded, encoding/json reads %d: %q", n, len(items), body)
		}
	})
}

// BenchmarkDecodeShapedPage decodes a 500-record page of erpmock's FaceV2
// through its shape and field map: compare with BenchmarkDecodePage.
func BenchmarkDecodeShapedPage(b *testing.B) {
	w := httptest.NewRecorder()
	erpmock.New(erpmock.Options{Records: 1000, Seed: 1, Face: erpmock.FaceV2}).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v2/members/changes?limit=500", nil))
	body := w.Body.Bytes()
	m, err := ParseMapping("erp_id=id,member_id=customer,product_code=plan,status=state,starts_at=from,ends_at=to,version=rev,updated_at=modified",
		"active=ACTIVE,paused=SUSPENDED,cancelled=CANCELLED,expired=EXPIRED")
	if err != nil {
		b.Fatal(err)
	}
	s := DefaultShape()
	s.Records, s.Cursor = JSONPath{"result", "items"}, JSONPath{"result", "next"}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		p, err := s.decodePage(body, m, nil)
		if err != nil || len(p.Records) != 500 {
			b.Fatal(err)
		}
	}
}
