package outbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// This file is erpsync's one encoder of change events: every byte of an
// event's key, data and body is written by these functions, as
// encoding/json would write them (object members sorted by name, strings
// HTML-safe), so that an event's id, which hashes its key's text, and its
// body are the same whichever writer recorded it. The store's compiled
// tables write a row's key and data with AppendString, AppendTime and
// AppendJSONText member by member; an Event given as maps (Key, Data) is
// written by appendAny with the same functions.

// AppendString appends s as a JSON string, escaped exactly as
// encoding/json escapes a string (HTML-safe: <, > and & as \u003c, \u003e
// and \u0026; U+2028 and U+2029 escaped; invalid UTF-8 as \ufffd), so that
// a body written with it is the bytes encoding/json would write.
func AppendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendBody appends the body of the event that an outbox row holds: its
// id, entity, op, key (KeyText), version, seq (the row's id) and run id,
// and payload, its data's JSON. It is the one writer of an event's body:
// the bytes encoding/json writes of the Body.
func appendBody(b []byte, id, entity, op, key string, version, seq int64, runID string, payload []byte) []byte {
	b = AppendString(append(b, `{"id":`...), id)
	b = AppendString(append(b, `,"entity":`...), entity)
	b = AppendString(append(b, `,"op":`...), op)
	b = append(append(b, `,"key":`...), key...)
	b = strconv.AppendInt(append(b, `,"version":`...), version, 10)
	b = strconv.AppendInt(append(b, `,"seq":`...), seq, 10)
	b = AppendString(append(b, `,"run_id":`...), runID)
	b = append(append(b, `,"data":`...), payload...)
	return append(b, '}')
}

// withSeq is body, the whole body of an event recorded before the outbox
// stored payload (a Body without seq, as encoding/json wrote it), with
// `"seq":seq` after its version, where appendBody writes it: the body's
// other bytes stay as recorded. A body whose version it cannot find gets
// seq last.
func withSeq(body []byte, seq int64) []byte {
	at := len(body) - 1
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err == nil && t == json.Delim('{') {
		for dec.More() {
			name, err := dec.Token()
			if err != nil {
				break
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				break
			}
			if name == "version" {
				at = int(dec.InputOffset())
				break
			}
		}
	}
	if at < 1 || at >= len(body) {
		return body
	}
	out := make([]byte, 0, len(body)+32)
	out = append(out, body[:at]...)
	out = strconv.AppendInt(append(out, `,"seq":`...), seq, 10)
	return append(out, body[at:]...)
}

// AppendTime appends t as FormatTime writes it, RFC 3339 in UTC with
// milliseconds, digit by digit: time.AppendFormat parses its layout at
// every call, which was a tenth of the CPU of an event. A year outside
// [0, 9999], which no DATETIME holds, goes to AppendFormat.
func AppendTime(b []byte, t time.Time) []byte { return AppendTimeDigits(b, t, 3) }

// AppendTimeDigits appends t as AppendTime does with digits fraction
// digits of a second: 3 (milliseconds) or fewer write milliseconds, a
// datetime(P) with P from 4 to 6 writes its P digits.
func AppendTimeDigits(b []byte, t time.Time, digits int) []byte {
	if digits < 3 {
		digits = 3
	}
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, "2006-01-02T15:04:05."+"000000000"[:digits]+"Z07:00")
	}
	hour, min, sec := t.Clock()
	b = append(appendDigits(b, year, 4), '-')
	b = append(appendDigits(b, int(month), 2), '-')
	b = append(appendDigits(b, day, 2), 'T')
	b = append(appendDigits(b, hour, 2), ':')
	b = append(appendDigits(b, min, 2), ':')
	b = append(appendDigits(b, sec, 2), '.')
	return append(appendDigits(b, t.Nanosecond()/pow10[9-digits], digits), 'Z')
}

// pow10 are the powers of ten up to 10^9.
var pow10 = [10]int{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

// appendDigits appends n, 0 <= n, in at least width digits.
func appendDigits(b []byte, n, width int) []byte {
	var d [20]byte
	i := len(d)
	for n > 0 || width > 0 {
		i--
		d[i] = byte('0' + n%10)
		n /= 10
		width--
	}
	return append(b, d[i:]...)
}

// AppendJSONText appends text, the value of a json column, as an event
// carries it: compacted, with <, >, & and U+2028, U+2029 escaped, as
// encoding/json writes a json.RawMessage. Text that is not JSON is an
// error.
func AppendJSONText(b []byte, text string) ([]byte, error) {
	raw, err := json.Marshal(json.RawMessage(text))
	if err != nil {
		return b, fmt.Errorf("not JSON: %w", err)
	}
	return append(b, raw...), nil
}

// appendAny appends v, a value of an Event's Key or Data maps, as
// encoding/json writes it: nil, a string, a bool, an integer, a
// json.Number, a json.RawMessage (AppendJSONText), and maps of strings to
// such values and slices of them, a map's members sorted by name.
func appendAny(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return AppendString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int32:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case json.Number:
		if _, err := strconv.ParseFloat(string(v), 64); err != nil {
			return b, fmt.Errorf("json number %q: %w", v, err)
		}
		return append(b, v...), nil
	case json.RawMessage:
		return AppendJSONText(b, string(v))
	case map[string]any:
		names := make([]string, 0, len(v))
		for k := range v {
			names = append(names, k)
		}
		slices.Sort(names)
		b = append(b, '{')
		for i, k := range names {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(AppendString(b, k), ':')
			var err error
			if b, err = appendAny(b, v[k]); err != nil {
				return b, fmt.Errorf("%s: %w", k, err)
			}
		}
		return append(b, '}'), nil
	case []map[string]any:
		return appendSlice(b, v)
	case []any:
		return appendSlice(b, v)
	}
	return b, fmt.Errorf("a value of type %T", v)
}

// appendSlice appends vs as a JSON array (appendAny).
func appendSlice[T any](b []byte, vs []T) ([]byte, error) {
	if vs == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendAny(b, v); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}
