package store

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/outbox"
)

// eventEntity has a column of every kind, names out of sorted order, a
// composite key and two children, one of them with a json column.
func eventEntity() *entity.Entity {
	col := func(name string, k entity.Kind, nullable bool) entity.Column {
		return entity.Column{Name: name, From: []string{name}, Type: entity.Type{Kind: k, Length: 40, Precision: 15, Scale: 2}, Nullable: nullable}
	}
	return &entity.Entity{
		Name: "docs", Key: []string{"z_key", "a_no"}, UpdatedAt: []string{"u"}, Events: true,
		Columns: []entity.Column{
			col("z_key", entity.String, false), col("a_no", entity.Int64, false), col("name", entity.Text, true),
			col("amount", entity.Decimal, true), col("qty", entity.Int32, true), col("paid", entity.Bool, true),
			col("on", entity.Date, true), col("at", entity.DateTime, true), col("extra", entity.JSON, true),
			col("Upper", entity.String, true), col("_under", entity.String, true),
		},
		Children: []*entity.Child{
			{Name: "lines", Table: "doc_lines", Key: []string{"pos"}, Columns: []entity.Column{col("pos", entity.Int32, false), col("note", entity.String, true), col("blob", entity.JSON, true)}},
			{Name: "b_texts", Table: "doc_texts", Key: []string{"lang"}, Columns: []entity.Column{col("lang", entity.String, false), col("body", entity.Text, true)}},
		},
	}
}

// randText is a string with what JSON escapes: quotes, backslashes,
// control characters, <, > and &, U+2028 and U+2029, other non-ASCII, and
// bytes that are not UTF-8.
func randText(rng *rand.Rand) string {
	pieces := []string{"a", "Z", "9", " ", `"`, `\`, "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f", "<", ">", "&", "\u2028", "\u2029", "é", "日本", "😀", "\xff", "\xc3", "\xed\xa0\x80", "'", "/"}
	var b strings.Builder
	for range rng.IntN(12) {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

func randValue(rng *rand.Rand, k entity.Kind, nullable bool) entity.Value {
	if nullable && rng.IntN(5) == 0 {
		return entity.Value{Null: true}
	}
	switch k {
	case entity.Int32:
		return entity.Value{I: rng.Int64N(1<<32) - 1<<31}
	case entity.Int64:
		return entity.Value{I: int64(rng.Uint64())}
	case entity.Bool:
		return entity.Value{I: rng.Int64N(2)}
	case entity.DateTime:
		// Years from about -200 to 10,700: the digits and the years no
		// DATETIME holds.
		return entity.Value{T: time.Unix(rng.Int64N(1<<38)-1<<36, rng.Int64N(1e9)).In(time.FixedZone("x", 3600))}
	case entity.JSON:
		docs := []string{`{"b":1,"a":[true,null]}`, ` [ 1 , "x<y&z" ] `, `"\u2028"`, `12.50`, `{"k":"é\n"}`}
		return entity.Value{S: docs[rng.IntN(len(docs))]}
	case entity.Decimal:
		return entity.Value{S: "-12.50"}
	case entity.Date:
		return entity.Value{S: "2025-02-28"}
	}
	return entity.Value{S: randText(rng)}
}

// TestEventJSONIsWhatEncodingJSONWrites: for random rows of every kind
// (strings with everything JSON escapes), the compiled encoder writes the
// key, the data and the recorded body byte for byte as encoding/json
// writes the maps: event ids and bodies do not depend on which path wrote
// them.
func TestEventJSONIsWhatEncodingJSONWrites(t *testing.T) {
	tab, err := Compile(eventEntity())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		r := Row{Key: "k", Version: rng.Int64N(1 << 60), RunID: randText(rng)}
		for j, c := range tab.ent.Columns {
			r.Vals = append(r.Vals, randValue(rng, tab.kinds[j], c.Nullable))
		}
		for _, lt := range tab.lines {
			var lines entity.Lines
			for range rng.IntN(4) {
				var line []entity.Value
				for j, c := range lt.child.Columns {
					line = append(line, randValue(rng, lt.kinds[j], c.Nullable))
				}
				lines = append(lines, line)
			}
			r.Children = append(r.Children, lines)
		}
		fast, err := tab.event(r, outbox.OpUpdate)
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		keyMap, dataMap := tab.eventMaps(r)
		key, err := json.Marshal(keyMap)
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(dataMap)
		if err != nil {
			t.Fatal(err)
		}
		if string(fast.KeyJSON) != string(key) || !bytes.Equal(fast.DataJSON, data) {
			t.Fatalf("row %d:\nkey  %s\nwant %s\ndata %s\nwant %s", i, fast.KeyJSON, key, fast.DataJSON, data)
		}
		// An event given as maps is recorded with the same key text, so
		// with the same id.
		if kt, err := outbox.KeyText(keyMap); err != nil || kt != string(key) {
			t.Fatalf("row %d: the outbox's key text of the maps %s (%v), want %s", i, kt, err, key)
		}
		if !utf8.Valid(fast.DataJSON) || !json.Valid(fast.DataJSON) {
			t.Fatalf("row %d: data is not valid JSON: %q", i, fast.DataJSON)
		}
	}
	// A json column whose text is not JSON is an error, naming it.
	r := Row{Key: "k", Vals: make([]entity.Value, len(tab.kinds))}
	for j := range r.Vals {
		r.Vals[j] = entity.Value{Null: true}
	}
	r.Vals[8] = entity.Value{S: "{not json"}
	r.Children = []entity.Lines{nil, nil}
	if _, err := tab.event(r, outbox.OpInsert); err == nil || !strings.Contains(err.Error(), "extra") {
		t.Fatalf("an event of a json column that is not JSON: %v, want an error naming extra", err)
	}
}

// jsonValue is a value of kind k as an event carries it, for
// encoding/json: the reference the compiled encoder is held to.
func jsonValue(k entity.Kind, v entity.Value) any {
	if v.Null {
		return nil
	}
	switch k {
	case entity.Int32:
		return v.I
	case entity.Int64:
		return strconv.FormatInt(v.I, 10)
	case entity.Bool:
		return v.I != 0
	case entity.DateTime:
		return v.T.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	case entity.JSON:
		return json.RawMessage(v.S)
	}
	return v.S
}

// eventMaps is the key and data of r's event as maps of jsonValue.
func (t *Table) eventMaps(r Row) (key, data map[string]any) {
	key = make(map[string]any, len(t.keys))
	data = make(map[string]any, len(t.kinds)+len(t.lines))
	for i, c := range t.ent.Columns {
		v := jsonValue(t.kinds[i], r.Vals[i])
		data[c.Name] = v
		if t.isKey[i] {
			key[c.Name] = v
		}
	}
	for c, lt := range t.lines {
		objs := []map[string]any{}
		for _, line := range r.Children[c] {
			obj := make(map[string]any, len(line))
			for j, col := range lt.child.Columns {
				obj[col.Name] = jsonValue(lt.kinds[j], line[j])
			}
			objs = append(objs, obj)
		}
		data[lt.child.Name] = objs
	}
	return key, data
}

// TestAppendStringIsEncodingJSONs checks AppendString against
// encoding/json on every byte and on random strings.
func TestAppendStringIsEncodingJSONs(t *testing.T) {
	check := func(s string) {
		want, _ := json.Marshal(s)
		if got := outbox.AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
	for c := range 256 {
		check(string([]byte{byte(c)}))
		check("a" + string([]byte{byte(c)}) + "b")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		check(randText(rng))
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("a<b>&\u2028\xff\"\\\n")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := outbox.AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	})
}
