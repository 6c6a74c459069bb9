package store

import (
	"fmt"

	"github.com/erpsync/erpsync/internal/entity"
)

// PostgreSQL parses and types every literal of a multi-row VALUES list
// one by one: 1,000 rows of a dozen literals cost its server more than
// writing them (about 54 µs a row, against 19 µs for a COPY and an INSERT
// ... SELECT from it). The same rows as one INSERT ... SELECT FROM
// unnest(...), each column one array literal, are parsed as one literal a
// column and went 2.5 to 4 times as fast, still one statement with its
// values written in. The sync's inserts and upserts on PostgreSQL are
// written so (unnestInsert); MySQL keeps its VALUES list.

// arrayType is the PostgreSQL type of the array a column of kind k is
// sent in: an assignment cast takes it to the column's own type (text to
// varchar(N), bigint to integer).
func arrayType(k entity.Kind) string {
	switch k {
	case entity.Int32, entity.Int64:
		return "bigint[]"
	case entity.Decimal:
		return "numeric[]"
	case entity.Bool:
		return "boolean[]"
	case entity.Date:
		return "date[]"
	case entity.DateTime:
		return "timestamptz[]"
	}
	return "text[]"
}

// compileUnnest is the head of the table's unnest insert: "INSERT INTO t
// (cols..., erp_version, erp_updated_at, fence_token, created_at,
// updated_at) SELECT u.*, now, now FROM unnest(" (the arrays and ") AS u"
// follow).
func (t *Table) compileUnnest() string {
	return "INSERT INTO " + t.d.ident(t.name) + " (" + t.rowCols + ") SELECT u.*, " + t.d.now() + ", " + t.d.now() + " FROM unnest("
}

// unnestInsert writes the INSERT of rows as one INSERT ... SELECT FROM
// unnest(...): one array literal a column, in the rows' order.
func (t *Table) unnestInsert(l *literal, rows []Row) error {
	for i := range rows {
		if len(rows[i].Vals) != len(t.kinds) {
			return fmt.Errorf("key %q: %d values for %d columns", rows[i].Key, len(rows[i].Vals), len(t.kinds))
		}
	}
	l.sql(t.unnest)
	for j, k := range t.kinds {
		l.sql("'{")
		for i := range rows {
			if i > 0 {
				l.b = append(l.b, ',')
			}
			if err := l.element(k, rows[i].Vals[j]); err != nil {
				return fmt.Errorf("key %q: %s: %w", rows[i].Key, t.ent.Columns[j].Name, err)
			}
		}
		l.sql("}'::" + arrayType(k) + ", ")
	}
	l.intArray(rows, func(r *Row) int64 { return r.Version })
	l.sql(", '{")
	for i := range rows {
		if i > 0 {
			l.b = append(l.b, ',')
		}
		if err := l.element(entity.DateTime, entity.Value{T: Millis(rows[i].UpdatedAt)}); err != nil {
			return fmt.Errorf("key %q: updated_at: %w", rows[i].Key, err)
		}
	}
	l.sql("}'::timestamptz[], ")
	l.intArray(rows, func(r *Row) int64 { return r.Fence })
	l.sql(") AS u")
	return nil
}

// intArray writes field of every row as one bigint[] literal.
func (l *literal) intArray(rows []Row, field func(*Row) int64) {
	l.sql("'{")
	for i := range rows {
		if i > 0 {
			l.b = append(l.b, ',')
		}
		l.int(field(&rows[i]))
	}
	l.sql("}'::bigint[]")
}

// bare writes v, a value of kind k, when it is a boolean (t or f) or an
// integer, as PostgreSQL's array elements and COPY's fields both take it,
// and reports whether it did.
func (l *literal) bare(k entity.Kind, v entity.Value) bool {
	switch k {
	case entity.Bool:
		if v.I != 0 {
			l.b = append(l.b, 't')
		} else {
			l.b = append(l.b, 'f')
		}
	case entity.Int32, entity.Int64:
		l.int(v.I)
	default:
		return false
	}
	return true
}

// element writes v, a value of kind k, as an element of an array literal
// inside a string literal: NULL bare, numbers and booleans bare, the rest
// in double quotes with '"' and '\' escaped by a backslash (the array's
// syntax) and '\” doubled (the string literal's).
func (l *literal) element(k entity.Kind, v entity.Value) error {
	switch {
	case v.Null:
		l.sql("NULL")
	case l.bare(k, v):
	case k == entity.DateTime:
		// The time's literal, quoted: '2025-03-04 05:06:07.123' becomes
		// "2025-03-04 05:06:07.123".
		start := len(l.b)
		if err := l.exactTime(v.T); err != nil {
			return err
		}
		l.b[start] = '"'
		l.b[len(l.b)-1] = '"'
	default:
		l.b = append(l.b, '"')
		s := v.S
		for i := 0; i < len(s); i++ {
			switch c := s[i]; c {
			case '"', '\\':
				l.b = append(l.b, '\\', c)
			case '\'':
				l.b = append(l.b, '\'', '\'')
			default:
				l.b = append(l.b, c)
			}
		}
		l.b = append(l.b, '"')
	}
	return nil
}
