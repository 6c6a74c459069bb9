package discover

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/erpsync/erpsync/internal/entity"
)

// facets are a property's type facets as $metadata writes them.
type facets struct {
	MaxLength, Precision, Scale string
}

// keyStringLength is the length of a key column whose Edm.String has no
// MaxLength: a UNIQUE index needs a bounded column.
const keyStringLength = 255

// Unbounded decimals and binary floats: the column types discover chooses
// when $metadata gives no precision.
var (
	// looseDecimal is an Edm.Decimal without Precision: 28 digits before
	// the point, 10 after. A value with more is quarantined, not rounded.
	looseDecimal = entity.Type{Kind: entity.Decimal, Precision: 38, Scale: 10}
)

// mapped is what an Edm type becomes: a column type, or no column and the
// reason.
type mapped struct {
	typ     entity.Type
	ok      bool
	comment string // what a person should know or check about the mapping
}

// column maps the primitive Edm type name with its facets to a column
// type. key says the property is (part of) the key.
func column(name string, f facets, key bool) mapped {
	switch name {
	case "Edm.String":
		switch n, err := strconv.Atoi(f.MaxLength); {
		case f.MaxLength == "" || strings.EqualFold(f.MaxLength, "max"):
			if key {
				return mapped{entity.Type{Kind: entity.String, Length: keyStringLength}, true,
					fmt.Sprintf("key without MaxLength: string(%d) guessed (a key needs a bounded length); check the longest value", keyStringLength)}
			}
			return mapped{typ: entity.Type{Kind: entity.Text}, ok: true}
		case err != nil || n < 1:
			return mapped{comment: fmt.Sprintf("Edm.String with MaxLength %q: not a length", f.MaxLength)}
		case n > entity.MaxStringLength:
			if key {
				return mapped{comment: fmt.Sprintf("key Edm.String with MaxLength %d: longer than a string column holds (%d)", n, entity.MaxStringLength)}
			}
			return mapped{entity.Type{Kind: entity.Text}, true, fmt.Sprintf("MaxLength %d is longer than string(N) holds: text", n)}
		default:
			return mapped{typ: entity.Type{Kind: entity.String, Length: n}, ok: true}
		}
	case "Edm.Decimal":
		return decimal(f)
	case "Edm.Byte", "Edm.SByte", "Edm.Int16", "Edm.Int32":
		return mapped{typ: entity.Type{Kind: entity.Int32}, ok: true}
	case "Edm.Int64":
		return mapped{typ: entity.Type{Kind: entity.Int64}, ok: true}
	case "Edm.Boolean":
		return mapped{typ: entity.Type{Kind: entity.Bool}, ok: true}
	case "Edm.Date":
		return mapped{typ: entity.Type{Kind: entity.Date}, ok: true}
	case "Edm.DateTimeOffset":
		return dateTime(f)
	case "Edm.Guid":
		return mapped{typ: entity.Type{Kind: entity.String, Length: 36}, ok: true}
	case "Edm.Double", "Edm.Single":
		if key {
			return mapped{comment: name + ": a binary float cannot be a key column"}
		}
		// No decimal(P,S) holds every double (1e300, 0.30000000000000004)
		// and OData writes INF and NaN as strings: a decimal column would
		// quarantine valid records. json keeps the value exactly as the
		// server wrote it.
		return mapped{entity.Type{Kind: entity.JSON}, true,
			name + " is a binary float: no decimal column holds every value exactly, so json keeps it as the server wrote it; check: decimal(P,S) if the values have a known scale"}
	}
	return mapped{comment: fmt.Sprintf("type %s has no column type", name)}
}

// dateTime maps an Edm.DateTimeOffset with its Precision, the fraction
// digits of a second: datetime(P) for 0 to 6, datetime (milliseconds)
// without one, datetime(6) for more (SAP CAP's Timestamp and S/4HANA's
// write Precision="7"), whose values with a non-zero seventh digit are
// invalid: a DATETIME keeps no more than microseconds.
func dateTime(f facets) mapped {
	if f.Precision == "" {
		return mapped{typ: entity.Type{Kind: entity.DateTime}, ok: true}
	}
	p, err := strconv.Atoi(f.Precision)
	switch {
	case err != nil || p < 0:
		return mapped{comment: fmt.Sprintf("Edm.DateTimeOffset with Precision %q: not a precision", f.Precision)}
	case p > entity.MaxDigits:
		return mapped{entity.DateTimeOf(entity.MaxDigits), true,
			fmt.Sprintf("Precision %d: datetime(%d) keeps microseconds, the most a DATETIME holds; a value with a non-zero digit past the sixth is quarantined, never cut", p, entity.MaxDigits)}
	}
	return mapped{typ: entity.DateTimeOf(p), ok: true}
}

// decimal maps an Edm.Decimal with its facets.
func decimal(f facets) mapped {
	if f.Precision == "" {
		return mapped{looseDecimal, true,
			fmt.Sprintf("Edm.Decimal without Precision: %s guessed; check the largest value and its decimals (a value that does not fit is quarantined, never rounded)", looseDecimal)}
	}
	p, err := strconv.Atoi(f.Precision)
	if err != nil || p < 1 {
		return mapped{comment: fmt.Sprintf("Edm.Decimal with Precision %q: not a precision", f.Precision)}
	}
	var s int
	switch {
	case f.Scale == "":
		s = 0 // CSDL's default scale
	case strings.EqualFold(f.Scale, "variable"), strings.EqualFold(f.Scale, "floating"):
		s = min(p, looseDecimal.Scale)
		if p > entity.MaxPrecision || s > entity.MaxScale {
			return mapped{comment: fmt.Sprintf("Edm.Decimal(%d) is wider than MySQL's DECIMAL(%d,%d)", p, entity.MaxPrecision, entity.MaxScale)}
		}
		t := entity.Type{Kind: entity.Decimal, Precision: p, Scale: s}
		return mapped{t, true, fmt.Sprintf("Edm.Decimal with Scale %s: %s guessed; check the most decimals a value has", f.Scale, t)}
	default:
		if s, err = strconv.Atoi(f.Scale); err != nil || s < 0 || s > p {
			return mapped{comment: fmt.Sprintf("Edm.Decimal with Scale %q: not a scale of precision %d", f.Scale, p)}
		}
	}
	if p > entity.MaxPrecision || s > entity.MaxScale {
		return mapped{comment: fmt.Sprintf("Edm.Decimal(%d,%d) is wider than MySQL's DECIMAL(%d,%d)", p, s, entity.MaxPrecision, entity.MaxScale)}
	}
	return mapped{typ: entity.Type{Kind: entity.Decimal, Precision: p, Scale: s}, ok: true}
}

// enum maps an enumeration type: OData writes its values as the members'
// names (a flags enum: several, comma-separated).
func enum(e *enumType) mapped {
	if len(e.Members) == 0 {
		return mapped{comment: "enumeration " + e.Name + " has no members"}
	}
	names := make([]string, len(e.Members))
	longest, all := 0, 0
	for i, m := range e.Members {
		names[i] = m.Name
		longest = max(longest, len(m.Name))
		all += len(m.Name) + 1
	}
	n := longest
	if e.IsFlags {
		n = all
	}
	n = min(max(n, 1), entity.MaxStringLength)
	return mapped{entity.Type{Kind: entity.String, Length: n}, true,
		"enumeration " + e.Name + ": " + strings.Join(names, ", ")}
}
