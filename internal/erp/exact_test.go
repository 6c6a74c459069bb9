package erp

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/entity"
)

// repeatedPaths returns, in the order an item gives them, the dotted paths
// of the members that an object of raw gives more than once, among the
// members read: those whose path is one of read's or leads to one. It
// walks the objects on the way to a read path only, as the decoder does.
func repeatedPaths(raw []byte, read [][]string) []string {
	leaf, parent := map[string]bool{}, map[string]bool{}
	for _, p := range read {
		for i := 1; i <= len(p); i++ {
			path := strings.Join(p[:i], ".")
			if i == len(p) {
				leaf[path] = true
			} else {
				parent[path] = true
			}
		}
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var out []string
	skip := func() {
		depth := 0
		for {
			tok, err := d.Token()
			if err != nil {
				return
			}
			switch tok {
			case json.Delim('{'), json.Delim('['):
				depth++
			case json.Delim('}'), json.Delim(']'):
				depth--
			}
			if depth == 0 {
				return
			}
		}
	}
	var object func(prefix string)
	object = func(prefix string) {
		seen := map[string]bool{}
		for d.More() {
			tok, err := d.Token()
			if err != nil {
				return
			}
			path := prefix + tok.(string)
			read := leaf[path] || parent[path]
			if read && seen[path] {
				out = append(out, path)
			}
			seen[path] = true
			if !parent[path] {
				skip()
				continue
			}
			tok, err = d.Token()
			if err != nil {
				return
			}
			switch tok {
			case json.Delim('{'):
				object(path + ".")
				_, _ = d.Token() // '}'
			case json.Delim('['):
				for d.More() {
					skip()
				}
				_, _ = d.Token() // ']'
			}
		}
	}
	if tok, err := d.Token(); err == nil && tok == json.Delim('{') {
		object("")
	}
	return out
}

// columnPaths are the paths the columns cols read.
func columnPaths(cols []entity.Column) [][]string {
	out := make([][]string, len(cols))
	for i, c := range cols {
		out[i] = pathOf(c)
	}
	return out
}

// loneSurrogate reports whether the JSON text raw (a value) holds a \u
// escape of a lone UTF-16 surrogate in one of its strings.
func loneSurrogate(raw []byte) bool {
	high := false // the escape before was a high surrogate
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			if high {
				return true
			}
			continue
		}
		i++
		if i >= len(raw) || raw[i] != 'u' || i+4 >= len(raw) {
			if high {
				return true
			}
			continue
		}
		r, err := strconv.ParseUint(string(raw[i+1:i+5]), 16, 16)
		i += 4
		switch {
		case err != nil:
		case high && r >= 0xDC00 && r < 0xE000:
			high = false
			continue
		case high:
			return true
		case r >= 0xDC00 && r < 0xE000:
			return true
		}
		high = err == nil && r >= 0xD800 && r < 0xDC00
	}
	return high
}

func TestLoneSurrogate(t *testing.T) {
	for raw, want := range map[string]bool{
		`"a"`: false, `"\ud83d\ude00"`: false, `"\ud800"`: true, `"\udc00"`: true, `"a\ud800b"`: true,
		`"\ud800\u0041"`: true, `"\\ud800"`: false, `"\ud800\\"`: true, `"\u00e9\ud83d\ude00"`: false,
	} {
		if got := loneSurrogate([]byte(raw)); got != want {
			t.Errorf("%s: %v, want %v", raw, got, want)
		}
	}
}

// TestKeysExact: keys that differ in case, by a trailing space or by a
// lone surrogate are distinct records, or the record is invalid; never
// one record. encoding/json reads "\ud800" and "\udfff" as one U+FFFD.
func TestKeysExact(t *testing.T) {
	s := mustCompile(t, &entity.Entity{Name: "e", Key: []string{"k"}, UpdatedAt: []string{"u"},
		Columns: []entity.Column{{Name: "k", Type: entity.Type{Kind: entity.String, Length: 10}}}}, entity.Source{Name: "E"})
	rec := func(k string) []byte { return []byte(`{"k":` + k + `,"u":"2025-01-01T00:00:00Z"}`) }
	keys := map[string]bool{}
	for _, k := range []string{`"A"`, `"a"`, `"A "`, `" A"`, `"\u0041\u0020"`} {
		r, inv, ok, err := s.DecodeItem(rec(k))
		if err != nil || !ok {
			t.Fatalf("%s: %v %s", k, err, inv.Reason)
		}
		keys[r.ErpID] = true
	}
	if len(keys) != 4 { // "A " twice, once escaped
		t.Errorf("keys %v, want 4", keys)
	}
	for _, k := range []string{`"\ud800"`, `"\udfff"`, `"a\ud800b"`, `"\ud800\u0041"`, `"\ude00\ud83d"`} {
		_, inv, ok, err := s.DecodeItem(rec(k))
		if err != nil || ok || !strings.HasPrefix(inv.Reason, "k: a lone UTF-16 surrogate (\\u") {
			t.Errorf("%s: %v %v %q", k, err, ok, inv.Reason)
		}
	}
	if r, inv, ok, _ := s.DecodeItem(rec(`"\ud83d\ude00"`)); !ok || r.ErpID != "😀" {
		t.Errorf("a surrogate pair: %v %q %q", ok, r.ErpID, inv.Reason)
	}
	// The membership decoder too.
	p, err := decodePage(pageOf(strings.Replace(item, `"U1"`, `"U\udc00"`, 1)), nil, nil)
	if err != nil || len(p.Invalid) != 1 || p.Invalid[0].Reason != `member_id: a lone UTF-16 surrogate (\udc00), which is no character` {
		t.Errorf("membership: %v %+v", err, p)
	}
}
