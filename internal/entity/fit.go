package entity

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxIndexBytes is the most bytes a MySQL (InnoDB) index may hold: the
// table's UNIQUE index over the key columns.
const MaxIndexBytes = 3072

// MaxEventKeyBytes is the most bytes the key text of a change event may
// take: the outbox's entity_key.
const MaxEventKeyBytes = 500

// EventKeyBytes is the most bytes the key text of e's change events can
// take: the JSON object of its key columns ({"name":value,...}), each
// value at its longest: a string(N) at 6 bytes a character (<, >, & and
// U+2028 are escaped as \u003c, as encoding/json escapes them), an int64
// or a decimal as a string with its sign, point and digits.
func EventKeyBytes(e *Entity) int {
	n := 2 + len(e.Key) - 1 // {}, commas
	for _, i := range e.KeyIndexes() {
		if i < 0 {
			continue
		}
		c := e.Columns[i]
		n += len(c.Name) + 3 // "name":
		switch t := c.Type; t.Kind {
		case String:
			n += 2 + 6*t.Length
		case Int32:
			n += len("-2147483648")
		case Int64:
			n += len(`"-9223372036854775808"`)
		case Decimal:
			n += 2 + 1 + t.Precision // quotes, sign, digits
			if t.Scale > 0 {
				n++ // the point
			}
			if t.Scale == t.Precision {
				n++ // the zero before it
			}
		case Bool:
			n += len("false")
		case Date:
			n += len(`"2006-01-02"`)
		default:
			n += 40 // no key kind
		}
	}
	return n
}

// IndexBytes is how many bytes a column of type t takes in an index: 4 a
// character for string(N) (utf8mb4), MySQL's storage size for the others.
func IndexBytes(t Type) int {
	switch t.Kind {
	case String:
		return 4 * t.Length
	case Int32:
		return 4
	case Int64:
		return 8
	case Date:
		return 3
	case Bool:
		return 1
	case DateTime:
		return 5 + (t.Digits()+1)/2 // 0 to 3 bytes for the fraction
	case Decimal:
		// 4 bytes for each 9 digits of the integer part and of the
		// fraction, and 0 to 4 for the digits left over.
		left := [9]int{0, 1, 1, 2, 2, 3, 3, 4, 4}
		part := func(n int) int { return n/9*4 + left[n%9] }
		return part(t.Precision-t.Scale) + part(t.Scale)
	}
	return 0
}

// Fits tells whether s, a value as a column of type t stores it, fits the
// type; the error says why not. A decimal is digits with an optional sign
// and fraction, a bool true or false, a date YYYY-MM-DD, a datetime RFC
// 3339 with a zone, json any JSON text.
func Fits(t Type, s string) error {
	switch t.Kind {
	case String:
		if !utf8.ValidString(s) {
			return errors.New("not UTF-8")
		}
		if n := utf8.RuneCountInString(s); n > t.Length {
			return fmt.Errorf("%d characters, more than %d", n, t.Length)
		}
	case Text:
		if !utf8.ValidString(s) {
			return errors.New("not UTF-8")
		}
		if len(s) > 65535 {
			return fmt.Errorf("%d bytes, more than 65535", len(s))
		}
	case Int32, Int64:
		bits := map[Kind]int{Int32: 32, Int64: 64}[t.Kind]
		if _, err := strconv.ParseInt(s, 10, bits); err != nil {
			return fmt.Errorf("want a whole number of %d bits", bits)
		}
	case Decimal:
		return fitsDecimal(t, s)
	case Bool:
		if s != "true" && s != "false" {
			return errors.New("want true or false")
		}
	case Date:
		if _, err := time.Parse(time.DateOnly, s); err != nil {
			return errors.New("want a date YYYY-MM-DD")
		}
	case DateTime:
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			return errors.New("want an RFC 3339 date-time with a zone, like 2024-05-01T12:00:00Z")
		}
		if !FractionKept(s, t.Digits()) {
			return fmt.Errorf("more fraction digits of a second than %s keeps", t)
		}
	case JSON:
		if !json.Valid([]byte(s)) {
			return errors.New("want JSON text")
		}
	default:
		return fmt.Errorf("no such type %v", t)
	}
	return nil
}

// FractionKept reports whether the RFC 3339 date-time s (its fraction after
// the seconds, at offset 19) has no non-zero digit past the p-th: whether
// a DATETIME(p) keeps it whole. Trailing zeros are no digits lost.
func FractionKept[T string | []byte](s T, p int) bool {
	if len(s) <= 20 || s[19] != '.' && s[19] != ',' {
		return true
	}
	for i := 20; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if i >= 20+p && s[i] != '0' {
			return false
		}
	}
	return true
}

// fitsDecimal tells whether s is a decimal within t's precision and scale:
// no digit is lost (trailing zeros of the fraction are not digits lost).
func fitsDecimal(t Type, s string) error {
	num := strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	whole, frac, _ := strings.Cut(num, ".")
	digits := func(p string) bool {
		for _, r := range p {
			if r < '0' || r > '9' {
				return false
			}
		}
		return true
	}
	if whole == "" || !digits(whole) || !digits(frac) || strings.HasSuffix(num, ".") {
		return errors.New("want a decimal number, like -12.50")
	}
	whole = strings.TrimLeft(whole, "0")
	frac = strings.TrimRight(frac, "0")
	if len(whole) > t.Precision-t.Scale || len(frac) > t.Scale {
		return fmt.Errorf("more digits than %s holds", t)
	}
	return nil
}
