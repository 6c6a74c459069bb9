package store

import (
	"fmt"
	"strconv"
	"sync"
	"time"
)

// literal builds the text of a statement with its values written in as SQL
// literals, for the multi-row statements of the hot path. Sent without
// arguments, such a statement costs the client one copy of its text: with
// placeholders, database/sql would first convert every argument and the
// driver would then interpolate them into a second copy (together about
// half of a backfill's allocations, and the garbage collection they cause).
//
// A literal means the same whatever the session's sql_mode and character
// set: a string of printable ASCII other than the backslash is quoted, with
// a quote doubled (which NO_BACKSLASH_ESCAPES does not change), and any
// other string is written in hex with a utf8mb4 introducer, so no byte of
// it can end the literal or be read as an escape.
//
// On PostgreSQL (standard_conforming_strings on, which pgx's simple
// protocol requires) every string is quoted with a quote doubled: no byte
// but the quote ends or escapes a literal there.
type literal struct {
	b []byte
	d Dialect
}

var literals = sync.Pool{New: func() any { return &literal{b: make([]byte, 0, 64<<10)} }}

func newLiteral(d Dialect) *literal {
	l := literals.Get().(*literal)
	l.b = l.b[:0]
	l.d = d
	return l
}

// lit is a literal in the table's dialect.
func (t *Table) lit() *literal { return newLiteral(t.d) }

// ident writes a quoted name.
func (l *literal) ident(name string) { l.sql(l.d.ident(name)) }

// now writes the database's clock.
func (l *literal) now() { l.sql(l.d.now()) }

// bool writes a boolean: 1 or 0 on MySQL (BOOLEAN is TINYINT(1)), true or
// false on PostgreSQL.
func (l *literal) bool(v bool) {
	switch {
	case l.d == Postgres && v:
		l.sql("true")
	case l.d == Postgres:
		l.sql("false")
	case v:
		l.sql("1")
	default:
		l.sql("0")
	}
}

// free returns l to the pool; its text must not be used after.
func (l *literal) free() {
	if cap(l.b) <= 4<<20 {
		literals.Put(l)
	}
}

// text is the statement built so far, copied.
func (l *literal) text() string { return string(l.b) }

func (l *literal) sql(s string) { l.b = append(l.b, s...) }

// str writes s as a string literal: quoted when it is printable ASCII
// without a backslash, else in hex.
func (l *literal) str(s string) {
	quotes := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case l.d == Postgres:
			quotes = quotes || c == '\''
		case c < 0x20 || c > 0x7e || c == '\\':
			l.b = append(l.b, "_utf8mb4 X'"...)
			for i := 0; i < len(s); i++ { // hex.AppendEncode, without copying s into a []byte
				l.b = append(l.b, hexDigits[s[i]>>4], hexDigits[s[i]&15])
			}
			l.b = append(l.b, '\'')
			return
		case c == '\'':
			quotes = true
		}
	}
	l.b = append(l.b, '\'')
	if !quotes {
		// The common case in one copy, not a byte at a time.
		l.b = append(l.b, s...)
	} else {
		for i := 0; i < len(s); i++ {
			if s[i] == '\'' {
				l.b = append(l.b, '\'')
			}
			l.b = append(l.b, s[i])
		}
	}
	l.b = append(l.b, '\'')
}

const hexDigits = "0123456789abcdef"

func (l *literal) int(n int64) { l.b = strconv.AppendInt(l.b, n, 10) }

// time writes t in UTC as 'YYYY-MM-DD hh:mm:ss[.fff]': Millis(t), which
// MariaDB and MySQL 8 store alike.
func (l *literal) time(t time.Time) error {
	t = t.UTC()
	if y := t.Year(); y < 1 || y > 9999 {
		return fmt.Errorf("time %s: year is not in the range [1, 9999]", t.Format(time.RFC3339Nano))
	}
	year, month, day := t.Date()
	hour, min, sec := t.Clock()
	l.b = append(l.b, '\'')
	l.b = appendDigits(l.b, year, 4)
	l.b = append(l.b, '-')
	l.b = appendDigits(l.b, int(month), 2)
	l.b = append(l.b, '-')
	l.b = appendDigits(l.b, day, 2)
	l.b = append(l.b, ' ')
	l.b = appendDigits(l.b, hour, 2)
	l.b = append(l.b, ':')
	l.b = appendDigits(l.b, min, 2)
	l.b = append(l.b, ':')
	l.b = appendDigits(l.b, sec, 2)
	if ms := t.Nanosecond() / 1e6; ms != 0 { // truncated, as Millis
		l.b = append(l.b, '.')
		l.b = appendDigits(l.b, ms, 3)
	}
	l.b = append(l.b, '\'')
	return nil
}

// appendDigits appends v, which is below 10^n, in n digits.
func appendDigits(b []byte, v, n int) []byte {
	start := len(b)
	for range n {
		b = append(b, '0')
	}
	for i := len(b) - 1; i >= start; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return b
}

// exactTime writes t, a column's value, with its microseconds when it has
// digits past the millisecond: a datetime(P) column's value has no more
// than its P (the decoder refuses one with more), which the column keeps
// whole on MariaDB and MySQL 8 alike.
func (l *literal) exactTime(t time.Time) error {
	us := t.Nanosecond() / 1e3 % 1e3
	if us == 0 {
		return l.time(t)
	}
	if err := l.time(t.Truncate(time.Second)); err != nil {
		return err
	}
	l.b = append(l.b[:len(l.b)-1], '.')
	l.b = appendDigits(l.b, t.Nanosecond()/1e3, 6)
	l.b = append(l.b, '\'')
	return nil
}

func (l *literal) timeOrNull(t *time.Time) error {
	if t == nil {
		l.sql("NULL")
		return nil
	}
	return l.time(*t)
}
