package outbox

import (
	"strconv"
	"unicode/utf8"
)

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

// appendBody appends the body of the event that an outbox row without
// one holds: its id, entity, op, key (KeyText), version and run id, and
// payload, its data's JSON. It writes the bytes encoding/json writes of
// the Body, as the body recorded whole before payload was.
func appendBody(b []byte, id, entity, op, key string, version int64, runID string, payload []byte) []byte {
	b = AppendString(append(b, `{"id":`...), id)
	b = AppendString(append(b, `,"entity":`...), entity)
	b = AppendString(append(b, `,"op":`...), op)
	b = append(append(b, `,"key":`...), key...)
	b = strconv.AppendInt(append(b, `,"version":`...), version, 10)
	b = AppendString(append(b, `,"run_id":`...), runID)
	b = append(append(b, `,"data":`...), payload...)
	return append(b, '}')
}
