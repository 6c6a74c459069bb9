package entity

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind is the kind of a column's type.
type Kind uint8

// The column kinds of the config file.
const (
	String   Kind = iota + 1 // string(N): VARCHAR(N), utf8mb4; N counts characters
	Text                     // text: TEXT (up to 65,535 bytes)
	Int32                    // int32: INT
	Int64                    // int64: BIGINT, never through a float64
	Decimal                  // decimal(P,S): DECIMAL(P,S), exact
	Bool                     // bool: BOOLEAN
	Date                     // date: DATE, YYYY-MM-DD
	DateTime                 // datetime: DATETIME(3), UTC; the source value carries a zone; datetime(P): DATETIME(P)
	JSON                     // json: the source value as JSON text
)

// Type is a column's type: a kind and its size.
type Type struct {
	Kind      Kind
	Length    int // string(N): N
	Precision int // decimal(P,S): P
	Scale     int // decimal(P,S): S
	// frac is P+1 for datetime(P), 0 for datetime (3 digits): the zero
	// Type{Kind: DateTime} is datetime, and datetime(3) is the same type.
	// DateTimeOf makes one, Digits reads it.
	frac int
}

// MaxDigits is the most fraction digits of a second a datetime(P) keeps.
const MaxDigits = 6

// DefaultDigits are the fraction digits of datetime: milliseconds.
const DefaultDigits = 3

// DateTimeOf returns the type datetime(p), p from 0 to MaxDigits:
// DATETIME(p), p fraction digits of a second. datetime(3) is datetime.
func DateTimeOf(p int) Type {
	if p == DefaultDigits {
		return Type{Kind: DateTime}
	}
	return Type{Kind: DateTime, frac: p + 1}
}

// Digits returns the fraction digits of a second a datetime column keeps:
// P of datetime(P), 3 for datetime; 0 for another kind.
func (t Type) Digits() int {
	switch {
	case t.Kind != DateTime:
		return 0
	case t.frac == 0:
		return DefaultDigits
	}
	return t.frac - 1
}

// Limits of the sized types, MySQL's.
const (
	MaxStringLength = 16383 // VARCHAR(N) of utf8mb4 in a 65,535-byte row
	MaxPrecision    = 65
	MaxScale        = 30
)

// ParseType parses a type as the config file writes it: string(N), text,
// int32, int64, decimal(P,S), bool, date, datetime, datetime(P) or json.
func ParseType(s string) (Type, error) {
	name, args, sized := strings.Cut(strings.TrimSpace(s), "(")
	if sized {
		if !strings.HasSuffix(args, ")") {
			return Type{}, fmt.Errorf("type %q: want a closing ')'", s)
		}
		args = strings.TrimSuffix(args, ")")
	}
	nums := func(want int) ([]int, error) {
		if !sized {
			return nil, fmt.Errorf("type %q: want %s", s, map[int]string{1: name + "(N)", 2: name + "(P,S)"}[want])
		}
		parts := strings.Split(args, ",")
		if len(parts) != want {
			return nil, fmt.Errorf("type %q: want %s", s, map[int]string{1: name + "(N)", 2: name + "(P,S)"}[want])
		}
		out := make([]int, want)
		for i, p := range parts {
			n, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil {
				return nil, fmt.Errorf("type %q: %q is not a whole number", s, strings.TrimSpace(p))
			}
			out[i] = n
		}
		return out, nil
	}
	simple := map[string]Kind{"text": Text, "int32": Int32, "int64": Int64, "bool": Bool, "date": Date, "datetime": DateTime, "json": JSON}
	switch name {
	case "string":
		n, err := nums(1)
		if err != nil {
			return Type{}, err
		}
		if n[0] < 1 || n[0] > MaxStringLength {
			return Type{}, fmt.Errorf("type %q: want a length of 1 to %d", s, MaxStringLength)
		}
		return Type{Kind: String, Length: n[0]}, nil
	case "decimal":
		n, err := nums(2)
		if err != nil {
			return Type{}, err
		}
		p, sc := n[0], n[1]
		if p < 1 || p > MaxPrecision || sc < 0 || sc > MaxScale || sc > p {
			return Type{}, fmt.Errorf("type %q: want a precision of 1 to %d and a scale of 0 to %d, no more than the precision", s, MaxPrecision, MaxScale)
		}
		return Type{Kind: Decimal, Precision: p, Scale: sc}, nil
	case "datetime":
		if !sized {
			return Type{Kind: DateTime}, nil
		}
		n, err := nums(1)
		if err != nil {
			return Type{}, err
		}
		if n[0] < 0 || n[0] > MaxDigits {
			return Type{}, fmt.Errorf("type %q: want datetime(P) with P, the fraction digits of a second, from 0 to %d", s, MaxDigits)
		}
		return DateTimeOf(n[0]), nil
	}
	if k, ok := simple[name]; ok && !sized {
		return Type{Kind: k}, nil
	}
	return Type{}, fmt.Errorf("unknown type %q: want string(N), text, int32, int64, decimal(P,S), bool, date, datetime, datetime(P) or json", s)
}

// String returns the type as the config file writes it.
func (t Type) String() string {
	switch t.Kind {
	case String:
		return fmt.Sprintf("string(%d)", t.Length)
	case Decimal:
		return fmt.Sprintf("decimal(%d,%d)", t.Precision, t.Scale)
	case Text:
		return "text"
	case Int32:
		return "int32"
	case Int64:
		return "int64"
	case Bool:
		return "bool"
	case Date:
		return "date"
	case DateTime:
		if t.frac != 0 {
			return fmt.Sprintf("datetime(%d)", t.Digits())
		}
		return "datetime"
	case JSON:
		return "json"
	}
	return fmt.Sprintf("kind(%d)", t.Kind)
}

// Column is one declared column of an entity's table.
type Column struct {
	Name string
	// From is the path of the source property the column reads: one name,
	// or several for a dotted path into nested objects. Defaults to the
	// column's own name.
	From     []string
	Type     Type
	Nullable bool
	// Values maps source values to stored ones; a value not listed makes
	// the record invalid. Nil: the value is stored as it comes.
	Values map[string]string
	// Pattern, for a string or text column, is a regular expression (RE2)
	// the source value must match; "" for none.
	Pattern string
	// NotBefore, for a date or datetime column, names a column of the same
	// type whose value this one may not be before (when both are set); ""
	// for none.
	NotBefore string
	// Line is the line of the config file that declares the column (0 for
	// a built-in entity).
	Line int
}

// Source is one place an entity is read from: an OData entity set or a
// REST records path, with the constant key columns it fills (one company
// or tenant of several).
type Source struct {
	Name string
	// Set holds constant column values of the records of this source:
	// column name to value, as the column stores it.
	Set map[string]string
	// Params are REST query parameters sent with every request of this
	// source (its pages, counts and the scans of verify and reconcile):
	// what selects its own records, like company=1000. Nil: none.
	Params map[string]string
	// Line is the line of the config file that declares the source (0 for
	// a built-in entity).
	Line int
}

// Entity is one kind of record an ERP holds, declared once: its table, its
// key, its change cursor and version, and its typed columns. Every layer
// (the decoder, the validation, the SQL, the table) compiles from it.
type Entity struct {
	// Name names the job: its locks, checkpoint, history and metrics label.
	Name string
	// Table is the MySQL table. Defaults to Name.
	Table string
	// Sources are where the records come from; one for most entities.
	Sources []Source
	// Key names the key columns, in order: the table's UNIQUE index.
	Key []string
	// UpdatedAt is the path of the source property that is the change
	// cursor: a date-time with a zone.
	UpdatedAt []string
	// Version is the path of the source property that holds the record's
	// version, a positive integer. Nil: updated_at in microseconds.
	Version []string
	// Columns are the declared columns, key columns included, in table
	// order.
	Columns []Column
	// Every and Cron are the entity's own schedule, when the file gives one.
	Every time.Duration
	Cron  string
	// Events tells whether every write that changes a row of the entity
	// records a change event in the outbox. Defaults to false.
	Events bool
	// REST is the REST shape of the entity's source, as the file writes
	// it; nil when the file gives none (the settings' shape applies).
	REST *RESTShape
	// Children are the collections inside each record that are written to
	// tables of their own (a document's lines).
	Children []*Child
	// Line is the line of the config file that declares the entity.
	Line int
}

// Child is a collection inside each record of an entity (an OData
// navigation property, a REST array property) written to a table of its
// own: the parent's key columns, the child's columns, and a UNIQUE index
// over the parent key and the child key.
type Child struct {
	// Name names the collection in the entity.
	Name string
	// Table is the MySQL table. Defaults to Name.
	Table string
	// From is the path of the source property that holds the collection.
	// Defaults to Name.
	From []string
	// Key names the key columns of a line within its parent, in order.
	Key []string
	// Columns are the child's declared columns, its key columns included.
	Columns []Column
	// Line is the line of the config file that declares the child.
	Line int
}

// Lines are the lines of one child collection of a record (a document's
// lines), in the order the source served them: each line the values of the
// child's Columns, in order. The parent's key columns are not among them:
// a line's row takes them from its parent.
type Lines [][]Value

// Column returns the declared column name, or nil.
func (e *Entity) Column(name string) *Column {
	for i := range e.Columns {
		if e.Columns[i].Name == name {
			return &e.Columns[i]
		}
	}
	return nil
}

// KeyIndexes returns the indexes in Columns of the key columns, in key
// order.
func (e *Entity) KeyIndexes() []int { return keyIndexes(e.Columns, e.Key) }

// keyIndexes returns the index in cols of each of key's columns, -1 for
// one not declared.
func keyIndexes(cols []Column, key []string) []int {
	out := make([]int, len(key))
	for i, k := range key {
		out[i] = slices.IndexFunc(cols, func(c Column) bool { return c.Name == k })
	}
	return out
}

// KeyIndexes returns the indexes in Columns of the child's key columns,
// in key order (-1 for a key column not declared).
func (c *Child) KeyIndexes() []int { return keyIndexes(c.Columns, c.Key) }

// TableName returns Table, or Name when Table is empty.
func (e *Entity) TableName() string {
	if e.Table != "" {
		return e.Table
	}
	return e.Name
}

// Value is one column's value of a record, as it is stored. Which field
// holds it depends on the column's kind: S for string, text, decimal (the
// canonical digits, "-12.50"), date ("YYYY-MM-DD") and json (the JSON
// text); I for int32, int64 and bool (0 or 1); T for datetime (UTC).
type Value struct {
	Null bool
	S    string
	I    int64
	T    time.Time
}

// Text returns v as text: how the key of a record is written and compared.
func (v Value) Text(k Kind) string {
	switch {
	case v.Null:
		return ""
	case k == Int32 || k == Int64:
		return strconv.FormatInt(v.I, 10)
	case k == Bool:
		if v.I != 0 {
			return "true"
		}
		return "false"
	case k == DateTime:
		// Milliseconds, or the microseconds of a datetime(P) value that
		// has them (a datetime is no key column: this is for messages).
		if v.T.Nanosecond()%1e6 != 0 {
			return v.T.UTC().Format("2006-01-02T15:04:05.000000Z")
		}
		return v.T.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	return v.S
}

// KeyText returns the text that identifies a record by its key values, in
// key order: the single value's text for a one-column key, else the texts
// joined by a unit separator (0x1f). Lock keys, logs and the quarantine
// table carry it.
func KeyText(parts []string) string {
	if len(parts) == 1 {
		return parts[0]
	}
	return strings.Join(parts, KeySeparator)
}

// KeySeparator joins the parts of a composite key's text.
const KeySeparator = "\x1f"

// SplitKey returns the parts of a key text made by KeyText for n columns.
func SplitKey(key string, n int) []string {
	if n == 1 {
		return []string{key}
	}
	return strings.SplitN(key, KeySeparator, n)
}

// Reserved are the column names erpsync's own columns take in every
// entity's table.
var Reserved = []string{"erp_version", "erp_updated_at", "fence_token", "created_at", "updated_at", "deleted_at", "quarantined_at", "quarantined_version", "restore_count", "quarantined_updated_at"}

// OwnTables are the tables erpsync keeps for itself: no entity may take
// one of these names. (memberships is not one: it is the built-in
// entity's table, which a file may declare.)
var OwnTables = []string{"sync_checkpoints", "sync_runs", "quarantined_records", "sync_quarantine_seq", "sync_table_owners", "schema_migrations", "erpsync_entities", "erpsync_events"}

// Patterns of the built-in memberships entity: the contract's erp_id, and
// a string that is not empty.
const (
	ErpIDPattern    = "^[A-Za-z0-9._-]+$"
	NonEmptyPattern = "."
)

// Memberships is the built-in entity, what erpsync syncs when no config
// file is given: the memberships table of the contract.
func Memberships() *Entity {
	return &Entity{
		Name:      "memberships",
		Table:     "memberships",
		Sources:   []Source{{Name: "memberships"}},
		Key:       []string{"erp_id"},
		UpdatedAt: []string{"updated_at"},
		Version:   []string{"version"},
		Columns: []Column{
			{Name: "erp_id", From: []string{"erp_id"}, Type: Type{Kind: String, Length: 64}, Pattern: ErpIDPattern},
			{Name: "member_id", From: []string{"member_id"}, Type: Type{Kind: String, Length: 64}, Pattern: NonEmptyPattern},
			{Name: "product_code", From: []string{"product_code"}, Type: Type{Kind: String, Length: 32}, Pattern: NonEmptyPattern},
			{Name: "status", From: []string{"status"}, Type: Type{Kind: String, Length: 16},
				Values: map[string]string{"ACTIVE": "ACTIVE", "SUSPENDED": "SUSPENDED", "CANCELLED": "CANCELLED", "EXPIRED": "EXPIRED"}},
			{Name: "starts_at", From: []string{"starts_at"}, Type: Type{Kind: DateTime}},
			{Name: "ends_at", From: []string{"ends_at"}, Type: Type{Kind: DateTime}, Nullable: true, NotBefore: "starts_at"},
		},
	}
}
