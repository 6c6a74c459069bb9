package erpmock

import (
	"math"
	"strconv"
	"time"
)

// Record is one membership as the feed serves it.
type Record struct {
	ErpID       string     `json:"erp_id"`
	MemberID    string     `json:"member_id"`
	ProductCode string     `json:"product_code"`
	Status      string     `json:"status"`
	StartsAt    time.Time  `json:"starts_at"`
	EndsAt      *time.Time `json:"ends_at"`
	Version     int64      `json:"version"`
	UpdatedAt   time.Time  `json:"updated_at"`
	// Tenant is the record's tenant (Options.Tenants); "" without.
	Tenant string `json:"tenant,omitempty"`
}

// rec is the compact form the mock keeps in memory: 40 bytes a record, with
// the strings derived from the record's index when it is served.
type rec struct {
	ua       int64 // updated_at, Unix milliseconds
	startsAt int64 // Unix milliseconds
	endsAt   int64 // Unix milliseconds, or noEnd
	version  int64
	member   uint32
	product  uint8
	status   uint8
	invalid  uint8 // one of the flaw constants; valid when zero
	deleted  bool  // gone from the feed (Delete) until Recreate
}

const noEnd = math.MinInt64

const dayMs = int64(24 * time.Hour / time.Millisecond)

var (
	// feedStart is the updated_at of the first record.
	feedStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	// startsFrom is the earliest starts_at.
	startsFrom = time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
)

var products = [...]string{"GYM-BASIC", "GYM-PLUS", "SWIM-10", "YOGA-MONTHLY", "PT-5", "FAMILY", "CORPORATE", "STUDENT"}

var statuses = [...]string{"ACTIVE", "SUSPENDED", "CANCELLED", "EXPIRED"}

// The flaws of invalid records, assigned in turn to the records that
// Faults.InvalidRate selects.
const (
	flawNone uint8 = iota
	flawStatus
	flawEndsBeforeStarts
	flawErpIDChars
	flawErpIDLength
	flawMissingMemberID
	flawVersionZero
	flawVersionString
	flawDate
	flawCount = flawDate
)

// generate returns record i for seed, valid.
func generate(seed int64, i int, members uint32) rec {
	h1, h2, h3 := mix(seed, i, 1), mix(seed, i, 2), mix(seed, i, 3)
	r := rec{
		ua:       feedStart + int64(i/4),
		startsAt: startsFrom + int64(h2%uint64(730*dayMs)),
		endsAt:   noEnd,
		version:  1 + int64(h3%3),
		member:   1 + uint32(h1%uint64(members)),
		product:  uint8((h1 >> 32) % uint64(len(products))),
		status:   pickStatus(h2 >> 48),
	}
	if (h3>>8)%4 != 0 {
		r.endsAt = r.startsAt + (30+int64((h3>>16)%700))*dayMs
	}
	return r
}

// pickStatus maps h to a status, mostly ACTIVE.
func pickStatus(h uint64) uint8 {
	switch p := h % 100; {
	case p < 70:
		return 0
	case p < 80:
		return 1
	case p < 90:
		return 2
	default:
		return 3
	}
}

// mix hashes (seed, i, salt) with the splitmix64 finalizer.
func mix(seed int64, i int, salt uint64) uint64 {
	z := uint64(seed)*0x9E3779B97F4A7C15 + uint64(i)*0xD1B54A32D192ED03 + salt*0x8CB92BA72F3D8DD7
	for range 2 {
		z ^= z >> 30
		z *= 0xBF58476D1CE4E5B9
		z ^= z >> 27
		z *= 0x94D049BB133111EB
		z ^= z >> 31
	}
	return z
}

// unit maps h to [0, 1).
func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }

// appendPadded appends prefix and n zero-padded to width digits.
func appendPadded(b []byte, prefix byte, n uint64, width int) []byte {
	b = append(b, prefix)
	var digits [20]byte
	d := strconv.AppendUint(digits[:0], n, 10)
	for range width - len(d) {
		b = append(b, '0')
	}
	return append(b, d...)
}

// ms converts Unix milliseconds to a UTC time.
func ms(v int64) time.Time { return time.UnixMilli(v).UTC() }

// wireTime is the layout of every time the mock serves: RFC 3339, UTC,
// milliseconds.
const wireTime = "2006-01-02T15:04:05.000Z07:00"

// appendWireTime appends the Unix time v in milliseconds in the layout
// wireTime, without the layout parsing of time.Time.AppendFormat (a tenth
// of a load test's serving CPU). v must lie in the years 0 to 9999.
func appendWireTime(b []byte, v int64) []byte {
	t := ms(v)
	year, month, day := t.Date()
	hour, min, sec := t.Clock()
	b = append4(b, year)
	b = append(b, '-')
	b = append2(b, int(month))
	b = append(b, '-')
	b = append2(b, day)
	b = append(b, 'T')
	b = append2(b, hour)
	b = append(b, ':')
	b = append2(b, min)
	b = append(b, ':')
	b = append2(b, sec)
	b = append(b, '.')
	milli := t.Nanosecond() / 1e6
	b = append(b, byte('0'+milli/100), byte('0'+milli/10%10), byte('0'+milli%10))
	return append(b, 'Z')
}

func append2(b []byte, v int) []byte { return append(b, byte('0'+v/10), byte('0'+v%10)) }

func append4(b []byte, v int) []byte { return append2(append2(b, v/100), v%100) }

// appendJSONString appends s as a JSON string. The mock's strings are
// ASCII; quotes, backslashes and control characters are escaped anyway.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, `\u00`...)
			b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xF])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
