package outbox

import (
	"encoding/json"
	"testing"
)

// TestAppendBodyIsEncodingJSONs: a body written from an event's encoded
// key and data is the bytes encoding/json writes of its Body.
func TestAppendBodyIsEncodingJSONs(t *testing.T) {
	for _, ev := range []Event{
		{Entity: "customers", Op: OpInsert, Version: 1712345678901234, RunID: "r-1",
			Key: map[string]any{"company": "1000", "customer": "C<1>"}, Data: map[string]any{"name": "A & B\u2028", "n": int64(3), "lines": []map[string]any{{"pos": 1}}}},
		{Entity: "x\"y", Op: OpDelete, Version: -1, RunID: "\xff\n", Key: map[string]any{"k": nil}, Data: map[string]any{}},
	} {
		key, err := KeyText(ev.Key)
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(ev.Data)
		if err != nil {
			t.Fatal(err)
		}
		id := ID(ev.Entity, key, ev.Version, ev.Op)
		want, err := json.Marshal(Body{ID: id, Entity: ev.Entity, Op: ev.Op, Key: ev.Key, Version: ev.Version, RunID: ev.RunID, Data: ev.Data})
		if err != nil {
			t.Fatal(err)
		}
		ev.DataJSON = data
		if got := appendBody(nil, id, &ev, key); string(got) != string(want) {
			t.Fatalf("body\n%s\nwant\n%s", got, want)
		}
	}
}
