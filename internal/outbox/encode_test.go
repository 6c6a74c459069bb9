package outbox

import (
	"crypto/sha1"
	"encoding/json"
	"fmt"
	"strconv"
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
		id := ID(ev.Entity, key, ev.Version, ev.Op, 0)
		want, err := json.Marshal(Body{ID: id, Entity: ev.Entity, Op: ev.Op, Key: ev.Key, Version: ev.Version, Seq: 42, RunID: ev.RunID, Data: ev.Data})
		if err != nil {
			t.Fatal(err)
		}
		if got := appendBody(nil, id, ev.Entity, ev.Op, key, ev.Version, 42, ev.RunID, data); string(got) != string(want) {
			t.Fatalf("body\n%s\nwant\n%s", got, want)
		}
	}
}

// TestIDOfLifeZeroIsTheIDOfTheChange: the id of a change of a key never
// restored is the UUID v5 of (entity, key, version, op) alone, the id such
// events had before the life was part of the identity; a later life hashes
// the life too.
func TestIDOfLifeZeroIsTheIDOfTheChange(t *testing.T) {
	old := func(entity, key string, version int64, op string) string {
		h := sha1.Sum([]byte(string(namespace[:]) + entity + "\x00" + key + "\x00" + strconv.FormatInt(version, 10) + "\x00" + op))
		h[6] = h[6]&0x0f | 0x50
		h[8] = h[8]&0x3f | 0x80
		return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
	}
	for _, c := range []struct {
		entity, key string
		version     int64
		op          string
	}{{"customers", `{"customer":"C1"}`, 7, OpInsert}, {"x", `{}`, -3, OpDelete}, {"orders", `{"no":"1\u0000"}`, 1 << 60, OpRestore}} {
		if got, want := ID(c.entity, c.key, c.version, c.op, 0), old(c.entity, c.key, c.version, c.op); got != want {
			t.Fatalf("id of %+v at life 0: %s, want %s", c, got, want)
		}
		if ID(c.entity, c.key, c.version, c.op, 1) == ID(c.entity, c.key, c.version, c.op, 0) || ID(c.entity, c.key, c.version, c.op, 1) == ID(c.entity, c.key, c.version, c.op, 2) {
			t.Fatalf("lives 0, 1 and 2 of %+v share an id", c)
		}
	}
}

// TestOldBodiesReadInTheOneFormat: the body of an event recorded whole,
// before the outbox stored payload (encoding/json's Body without seq), is
// read with its seq after its version: byte for byte the body the outbox
// writes today from the same columns and data.
func TestOldBodiesReadInTheOneFormat(t *testing.T) {
	ev := Event{Entity: "customers", Op: OpUpdate, Version: 1712345678901234, RunID: "r-1",
		Key:  map[string]any{"company": "1000", "customer": `C"1","version":2`},
		Data: map[string]any{"name": "A & B\u2028", "version": "x", "lines": []map[string]any{{"version": 1}}}}
	key, err := KeyText(ev.Key)
	if err != nil {
		t.Fatal(err)
	}
	data, err := appendAny(nil, ev.Data)
	if err != nil {
		t.Fatal(err)
	}
	id := ID(ev.Entity, key, ev.Version, ev.Op, 0)
	type oldBody struct {
		ID      string         `json:"id"`
		Entity  string         `json:"entity"`
		Op      string         `json:"op"`
		Key     map[string]any `json:"key"`
		Version int64          `json:"version"`
		RunID   string         `json:"run_id"`
		Data    map[string]any `json:"data"`
	}
	old, err := json.Marshal(oldBody{ID: id, Entity: ev.Entity, Op: ev.Op, Key: ev.Key, Version: ev.Version, RunID: ev.RunID, Data: ev.Data})
	if err != nil {
		t.Fatal(err)
	}
	s := Stored{Seq: 77, ID: id, Entity: ev.Entity, Op: ev.Op, Key: key, Version: ev.Version, RunID: ev.RunID, body: old}
	want := appendBody(nil, id, ev.Entity, ev.Op, key, ev.Version, 77, ev.RunID, data)
	if got := s.Body(); string(got) != string(want) {
		t.Fatalf("old body read as\n%s\nwant\n%s", got, want)
	}
}
