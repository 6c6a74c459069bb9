package erp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/erpsync/erpsync/internal/entity"
)

// The page decoder is a hand-written JSON reader for the one shape the feed
// serves. It accepts exactly the documents encoding/json accepts as valid
// JSON, keeps the raw bytes of each item for quarantine, and validates
// items without a map or a reflection pass per record: a 500-record page
// decodes several times faster than with encoding/json.

// maxDepth bounds the nesting of skipped values, as encoding/json does.
const maxDepth = 10000

// syntaxError is a body that is not the page JSON the spec describes.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("offset %d: %s", e.off, e.msg) }

// decodePage decodes and validates a page body, its items as memberships
// read through m or, when s is not nil, as records of s. An error means the
// body as a whole is unusable; an item that breaks the schema goes to
// Page.Invalid.
func decodePage(body []byte, m *Mapping, s *Schema) (*Page, error) {
	d := decoder{b: body, m: m, s: s}
	p, err := d.page()
	if err != nil {
		return nil, fmt.Errorf("decode page: %w", err)
	}
	return p, nil
}

type decoder struct {
	b       []byte
	m       *Mapping // nil: the REST API's own names
	s       *Schema  // not nil: items are records of s, not memberships
	i       int
	ends    []time.Time // slab the EndsAt pointers point into
	scratch []byte
	depth   int
	slots   []slot         // a typed item's leaves
	vals    []entity.Value // slab the typed records' Vals point into
	spans   []int          // where each value's text stands in scratch
	line    lineScratch    // the buffers of a typed item's lines
	twice   []string       // the paths of the members a typed item gives more than once
}

func (d *decoder) fail(msg string) error {
	if d.i >= len(d.b) {
		return &syntaxError{off: d.i, msg: "unexpected end of input"}
	}
	return &syntaxError{off: d.i, msg: msg}
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// next skips white space and returns the next byte, or 0 at the end.
func (d *decoder) next() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// atEnd skips white space and reports whether the input ends there (a NUL
// byte, which next also returns as 0, is not the end).
func (d *decoder) atEnd() bool {
	d.ws()
	return d.i >= len(d.b)
}

// expect consumes c after white space.
func (d *decoder) expect(c byte) error {
	if d.next() != c {
		return d.fail(fmt.Sprintf("want %q", c))
	}
	d.i++
	return nil
}

// object reads the members of an object whose '{' is next, calling member
// with each key once the reader stands on the member's value.
func (d *decoder) object(member func(key []byte) error) error {
	if err := d.expect('{'); err != nil {
		return err
	}
	if d.next() == '}' {
		d.i++
		return nil
	}
	for {
		if d.next() != '"' {
			return d.fail("want a member name")
		}
		key, err := d.str()
		if err != nil {
			return err
		}
		if err := d.expect(':'); err != nil {
			return err
		}
		d.ws()
		if err := member(key); err != nil {
			return err
		}
		switch d.next() {
		case ',':
			d.i++
		case '}':
			d.i++
			return nil
		default:
			return d.fail("want ',' or '}'")
		}
	}
}

func (d *decoder) page() (*Page, error) {
	p := &Page{}
	var haveData, haveNext bool
	err := d.object(func(key []byte) error {
		switch string(key) {
		case "data":
			haveData = true
			p.Records, p.Invalid = nil, nil // a repeated member replaces the first
			return d.items(p)
		case "next_cursor":
			haveNext = true
			switch d.next() {
			case 'n':
				p.NextCursor = ""
				return d.literal("null")
			case '"':
				s, err := d.str()
				p.NextCursor = string(s)
				return err
			}
			return d.fail("next_cursor is neither a string nor null")
		}
		return d.skip()
	})
	if err != nil {
		return nil, err
	}
	if !d.atEnd() {
		return nil, d.fail("data after the page object")
	}
	switch {
	case !haveData:
		return nil, errors.New("page without data")
	case !haveNext:
		return nil, errors.New("page without next_cursor")
	}
	return p, nil
}

func (d *decoder) items(p *Page) error {
	if d.next() != '[' {
		return d.fail("data is not an array")
	}
	d.i++
	if d.next() == ']' {
		d.i++
		return nil
	}
	// A valid membership takes 190 bytes or more with its member names:
	// this capacity seldom has to grow. A typed item's size depends on its
	// entity: the capacity is set from the first item's, once it is read.
	if d.s == nil {
		p.Records = make([]Record, 0, len(d.b)/160+1)
	}
	for first := d.s != nil; ; first = false {
		start := d.i
		var err error
		if d.s != nil {
			err = d.typedItem(p)
		} else {
			err = d.membership(p)
		}
		if err != nil {
			return err
		}
		if first {
			// Items of one page are about the same size; a tenth more
			// for those that are longer.
			n := (len(d.b)-d.i)/max(d.i-start, 1) + 1
			p.Records = slices.Grow(p.Records, n+n/10)
		}
		switch d.next() {
		case ',':
			d.i++
		case ']':
			d.i++
			return nil
		default:
			return d.fail("want ',' or ']'")
		}
	}
}

// membership reads the item ahead and adds it to p as a membership or an
// invalid item.
func (d *decoder) membership(p *Page) error {
	d.ws()
	start := d.i
	var f fields
	if d.next() == '{' {
		if err := d.item(&f); err != nil {
			return err
		}
	} else {
		if err := d.skip(); err != nil {
			return err
		}
		f.notObject = true
	}
	if r, problems := d.record(&f); problems == "" {
		p.Records = append(p.Records, r)
	} else {
		p.Invalid = append(p.Invalid, d.invalid(&f, problems, d.b[start:d.i]))
	}
	return nil
}

// Field indexes of a Membership.
const (
	fErpID = iota
	fMemberID
	fProductCode
	fStatus
	fStartsAt
	fEndsAt
	fVersion
	fUpdatedAt
	nFields
)

var fieldNames = [nFields]string{"erp_id", "member_id", "product_code", "status", "starts_at", "ends_at", "version", "updated_at"}

// Kinds of a field's value.
const (
	kMissing = iota
	kString
	kNull
	kInt    // a number written as an integer
	kNumber // any other number
	kOther  // true, false, an object or an array
)

type field struct {
	kind uint8
	val  []byte // the unescaped string, or the number as written
}

type fields struct {
	f         [nFields]field
	notObject bool
	twice     uint16 // the fields whose member the item gives more than once
}

// item reads an object whose '{' is next into f, keeping the fields of a
// Membership. It is object() unrolled, for the hot path.
func (d *decoder) item(f *fields) error {
	d.i++
	if d.next() == '}' {
		d.i++
		return nil
	}
	for {
		if d.next() != '"' {
			return d.fail("want a member name")
		}
		key, err := d.str()
		if err != nil {
			return err
		}
		if err := d.expect(':'); err != nil {
			return err
		}
		var k int
		if d.m == nil {
			k = fieldIndex(key)
		} else {
			k = d.m.field(key)
		}
		var fl field
		switch c := d.next(); {
		case k < 0:
			err = d.skip()
		case c == '"':
			fl.kind = kString
			fl.val, err = d.str()
		case c == 'n':
			fl.kind = kNull
			err = d.literal("null")
		case c == '-' || c >= '0' && c <= '9':
			var isInt bool
			fl.val, isInt, err = d.number()
			fl.kind = kNumber
			if isInt {
				fl.kind = kInt
			}
		default:
			fl.kind = kOther
			err = d.skip()
		}
		if err != nil {
			return err
		}
		if k >= 0 {
			if f.f[k].kind != kMissing {
				// encoding/json takes the last; which one the ERP
				// meant is not for the decoder to guess.
				f.twice |= 1 << k
			}
			f.f[k] = fl
		}
		switch d.next() {
		case ',':
			d.i++
		case '}':
			d.i++
			return nil
		default:
			return d.fail("want ',' or '}'")
		}
	}
}

func fieldIndex(key []byte) int {
	switch string(key) {
	case "erp_id":
		return fErpID
	case "member_id":
		return fMemberID
	case "product_code":
		return fProductCode
	case "status":
		return fStatus
	case "starts_at":
		return fStartsAt
	case "ends_at":
		return fEndsAt
	case "version":
		return fVersion
	case "updated_at":
		return fUpdatedAt
	}
	return -1
}

// record validates f against the Membership schema. It returns the record,
// or what is wrong with it.
func (d *decoder) record(f *fields) (Record, string) {
	if f.notObject {
		return Record{}, "item is not a JSON object"
	}
	var pb [nFields]string
	problems := pb[:0]
	names := &fieldNames
	if d.m != nil {
		names = &d.m.labels
	}
	bad := func(k int, msg string) { problems = append(problems, names[k]+": "+msg) }
	for k := range nFields {
		if f.twice&(1<<k) != 0 {
			bad(k, givenTwice)
		}
	}

	erpID := f.text(fErpID, 64, bad)
	if f.f[fErpID].kind == kString {
		for i, c := range erpID {
			if !idChar[c] {
				r, _ := utf8.DecodeRune(erpID[i:])
				bad(fErpID, fmt.Sprintf("character %q not allowed (want ^[A-Za-z0-9._-]+$)", r))
				break
			}
		}
	}
	memberID := f.text(fMemberID, 64, bad)
	productCode := f.text(fProductCode, 32, bad)

	var status string
	if s := f.f[fStatus]; s.kind != kString {
		bad(fStatus, describe(s)+", want a string")
	} else if status = d.statusOf(s.val); status == "" {
		bad(fStatus, quote(s.val)+" is not one of ACTIVE, SUSPENDED, CANCELLED, EXPIRED")
	}

	dates := d.m != nil // a mapped source may serve dates (Edm.Date) for starts_at and ends_at
	startsAt, okStart := f.time(fStartsAt, dates, true, bad)
	updatedAt, okUpdated := f.time(fUpdatedAt, false, false, bad)
	var endsAt *time.Time
	if e := f.f[fEndsAt]; e.kind != kMissing && e.kind != kNull {
		if t, ok := f.time(fEndsAt, dates, true, bad); ok {
			if okStart && t.Before(startsAt) {
				bad(fEndsAt, "before starts_at")
			}
			if len(d.ends) == cap(d.ends) {
				d.ends = make([]time.Time, 0, 64)
			}
			d.ends = append(d.ends, t)
			endsAt = &d.ends[len(d.ends)-1]
		}
	}

	var version int64
	switch v := f.f[fVersion]; {
	case d.m != nil && d.m.noVersion:
		if okUpdated {
			if version = updatedAt.UnixMicro(); version < 1 {
				bad(fVersion, "updated_at is not after 1970-01-01T00:00:00Z")
			}
		}
	case v.kind == kInt:
		n, err := strconv.ParseInt(string(v.val), 10, 64)
		switch {
		case err != nil:
			digits := string(v.val)
			if len(digits) > 40 {
				digits = digits[:40] + "..."
			}
			bad(fVersion, digits+" is out of the int64 range")
		case n < 1:
			bad(fVersion, string(v.val)+" is below 1")
		default:
			version = n
		}
	case v.kind == kNumber:
		bad(fVersion, quote(v.val)+" is not an integer")
	default:
		bad(fVersion, describe(v)+", want an integer")
	}

	if len(problems) > 0 {
		return Record{}, strings.Join(problems, "; ")
	}
	// One allocation for the three strings.
	d.scratch = append(append(append(d.scratch[:0], erpID...), memberID...), productCode...)
	all := string(d.scratch)
	a, b := len(erpID), len(erpID)+len(memberID)
	return Record{
		ErpID:       all[:a],
		MemberID:    all[a:b],
		ProductCode: all[b:],
		Status:      status,
		StartsAt:    startsAt,
		EndsAt:      endsAt,
		Version:     version,
		UpdatedAt:   updatedAt,
	}, ""
}

// text checks a required string of 1 to maxChars characters.
func (f *fields) text(k, maxChars int, bad func(int, string)) []byte {
	v := f.f[k]
	switch {
	case v.kind != kString:
		bad(k, describe(v)+", want a string")
	case len(v.val) == 0:
		bad(k, "empty")
	case !utf8.Valid(v.val):
		bad(k, badUTF8(v.val))
	case len(v.val) > maxChars && utf8.RuneCount(v.val) > maxChars:
		bad(k, fmt.Sprintf("longer than %d characters", maxChars))
	default:
		if r, ok := controlChar(v.val); ok {
			bad(k, fmt.Sprintf("control character %U not allowed", r))
		}
	}
	return v.val
}

// controlChar returns the first control character of the valid UTF-8 b:
// C0 (U+0000-U+001F), DEL (U+007F) or C1 (U+0080-U+009F, encoded 0xC2
// 0x80-0x9F). The schema allows them in member_id and product_code, but no
// ERP means them there: a NUL or an escape sequence in an identifier is
// garbage that would reach logs, terminals and other systems.
func controlChar(b []byte) (rune, bool) {
	for i, c := range b {
		switch {
		case c < 0x20 || c == 0x7f:
			return rune(c), true
		case c == 0xc2 && i+1 < len(b) && b[i+1] >= 0x80 && b[i+1] <= 0x9f:
			return rune(b[i+1]), true
		}
	}
	return 0, false
}

// time checks a required RFC 3339 date-time, or also a date
// (YYYY-MM-DD, UTC midnight) when dates is true. A column's (column true)
// may not have more fraction digits than its DATETIME(3) keeps.
func (f *fields) time(k int, dates, column bool, bad func(int, string)) (time.Time, bool) {
	v := f.f[k]
	if v.kind != kString {
		bad(k, describe(v)+", want an RFC 3339 date-time")
		return time.Time{}, false
	}
	if dates && len(v.val) == len("2006-01-02") {
		t, ok := parseDate(v.val)
		if !ok {
			bad(k, quote(v.val)+" is not a date (YYYY-MM-DD)")
		}
		return t, ok
	}
	t, ok := parseTime(v.val)
	switch {
	case !ok:
		bad(k, quote(v.val)+" is not an RFC 3339 date-time")
	case column && !entity.FractionKept(v.val, entity.DefaultDigits):
		bad(k, quote(v.val)+" has more fraction digits of a second than datetime keeps")
		return t, false
	}
	return t, ok
}

// invalid builds the quarantine entry of an item, with what could be read:
// its erp_id, updated_at and version, by the rules of a valid record.
func (d *decoder) invalid(f *fields, problems string, raw []byte) Invalid {
	inv := Invalid{Reason: problems, Raw: append([]byte(nil), raw...)}
	if v := f.f[fErpID]; v.kind == kString {
		inv.ErpID = string(v.val)
	}
	if v := f.f[fUpdatedAt]; v.kind == kString {
		inv.UpdatedAt, _ = parseTime(v.val)
	}
	switch v := f.f[fVersion]; {
	case d.m != nil && d.m.noVersion:
		if n := inv.UpdatedAt.UnixMicro(); !inv.UpdatedAt.IsZero() && n >= 1 {
			inv.Version = n
		}
	case v.kind == kInt:
		if n, err := strconv.ParseInt(string(v.val), 10, 64); err == nil && n >= 1 {
			inv.Version = n
		}
	}
	return inv
}

// statusOf returns the status a served value stands for, translated by
// the mapping; "" when it is none of the contract's.
func (d *decoder) statusOf(b []byte) string {
	if d.m != nil {
		if s, ok := d.m.status[string(b)]; ok {
			return s
		}
	}
	return statusOf(b)
}

func statusOf(b []byte) string {
	switch string(b) {
	case "ACTIVE":
		return "ACTIVE"
	case "SUSPENDED":
		return "SUSPENDED"
	case "CANCELLED":
		return "CANCELLED"
	case "EXPIRED":
		return "EXPIRED"
	}
	return ""
}

// givenTwice is the reason of a member an item gives more than once.
const givenTwice = "given more than once in the item"

var idChar = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	return t
}()

// describe names what a field holds, for a reason.
func describe(v field) string {
	switch v.kind {
	case kMissing:
		return "missing"
	case kString:
		return "a string"
	case kNull:
		return "null"
	case kInt, kNumber:
		return "a number"
	}
	return "a boolean, object or array"
}

// quote quotes a value for a reason, cut to a readable length.
func quote(b []byte) string {
	const max = 40
	if len(b) > max {
		return strconv.Quote(string(b[:max])) + "..."
	}
	return strconv.Quote(string(b))
}

// str reads a string whose '"' is next and returns its unescaped bytes,
// which alias the input when the string has no escapes.
func (d *decoder) str() ([]byte, error) {
	d.i++ // the opening quote
	start := d.i
	// Eight bytes at a time (SWAR): a byte below 0x20, '"' or '\\' sets
	// its high bit in m. A borrow can set bits above the first such byte,
	// never below it, so the lowest bit marks it.
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; d.i+8 <= len(d.b); d.i += 8 {
		x := binary.LittleEndian.Uint64(d.b[d.i:])
		q, bs := x^(ones*'"'), x^(ones*'\\')
		if m := ((x-ones*0x20)&^x | (q-ones)&^q | (bs-ones)&^bs) & highs; m != 0 {
			d.i += bits.TrailingZeros64(m) / 8
			break
		}
	}
	for d.i < len(d.b) && !special[d.b[d.i]] {
		d.i++
	}
	switch {
	case d.i == len(d.b):
		return nil, d.fail("")
	case d.b[d.i] == '"':
		d.i++
		return d.b[start : d.i-1], nil
	case d.b[d.i] == '\\':
		return d.unescape(start)
	}
	return nil, d.fail("control character in string")
}

// special marks the bytes that end the plain run of a string.
var special = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// unescape reads the rest of a string from its first escape, as
// encoding/json does, except for a lone surrogate (a \ud800 not followed
// by a low surrogate, or a \udc00 alone): encoding/json makes it U+FFFD,
// so that two different strings read as one; here it is kept as the three
// bytes that would encode it (WTF-8), which are not valid UTF-8, and every
// check of a string refuses it with a reason (badUTF8).
func (d *decoder) unescape(start int) ([]byte, error) {
	out := append(make([]byte, 0, d.i-start+16), d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return out, nil
		case c < 0x20:
			return nil, d.fail("control character in string")
		case c != '\\':
			out = append(out, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.b) {
			d.i++
			return nil, d.fail("")
		}
		d.i += 2
		switch d.b[d.i-1] {
		case '"', '\\', '/':
			out = append(out, d.b[d.i-1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return nil, d.fail("bad \\u escape")
			}
			if r >= 0xD800 && r < 0xDC00 {
				// A high surrogate pairs with a following low one.
				save := d.i
				if d.i+1 < len(d.b) && d.b[d.i] == '\\' && d.b[d.i+1] == 'u' {
					d.i += 2
					if lo, ok := d.hex4(); ok && lo >= 0xDC00 && lo < 0xE000 {
						out = utf8.AppendRune(out, (r-0xD800)<<10|(lo-0xDC00)+0x10000)
						continue
					}
				}
				d.i = save
				out = appendSurrogate(out, r)
				continue
			} else if r >= 0xDC00 && r < 0xE000 {
				out = appendSurrogate(out, r)
				continue
			}
			out = utf8.AppendRune(out, r)
		default:
			d.i--
			return nil, d.fail("bad escape")
		}
	}
	return nil, d.fail("")
}

// appendSurrogate appends the lone surrogate r as the three bytes that
// would encode it in UTF-8 (0xED 0xA0-0xBF 0x80-0xBF): bytes no valid
// UTF-8 holds.
func appendSurrogate(out []byte, r rune) []byte {
	return append(out, 0xED, 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
}

// badUTF8 says what is wrong with b, which is not valid UTF-8: a lone
// UTF-16 surrogate that a \u escape wrote (appendSurrogate), or broken
// UTF-8.
func badUTF8(b []byte) string {
	for i := 0; i+2 < len(b); i++ {
		if b[i] == 0xED && b[i+1] >= 0xA0 && b[i+1] <= 0xBF && b[i+2] >= 0x80 && b[i+2] <= 0xBF {
			r := rune(b[i+1]&0x3F)<<6 | rune(b[i+2]&0x3F) | 0xD000
			return fmt.Sprintf("a lone UTF-16 surrogate (\\u%04x), which is no character", r)
		}
	}
	return "not valid UTF-8"
}

func (d *decoder) hex4() (rune, bool) {
	if d.i+4 > len(d.b) {
		return 0, false
	}
	var r rune
	for _, c := range d.b[d.i : d.i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	d.i += 4
	return r, true
}

// number reads a JSON number and reports whether it is written as an
// integer (no fraction, no exponent), which is what the schema's "integer"
// means in the JSON Schema draft OpenAPI 3.0 builds on.
func (d *decoder) number() ([]byte, bool, error) {
	start := d.i
	digits := func() bool {
		s := d.i
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
		}
		return d.i > s
	}
	if d.b[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(d.b) && d.b[d.i] == '0':
		d.i++
	case !digits():
		return nil, false, d.fail("bad number")
	}
	isInt := true
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		isInt = false
		if !digits() {
			return nil, false, d.fail("bad number")
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		isInt = false
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if !digits() {
			return nil, false, d.fail("bad number")
		}
	}
	return d.b[start:d.i], isInt, nil
}

func (d *decoder) literal(lit string) error {
	if len(d.b)-d.i < len(lit) || string(d.b[d.i:d.i+len(lit)]) != lit {
		return d.fail("bad literal")
	}
	d.i += len(lit)
	return nil
}

// skip reads any JSON value.
func (d *decoder) skip() error {
	switch c := d.next(); {
	case c == '"':
		_, err := d.str()
		return err
	case c == '{' || c == '[':
		if d.depth++; d.depth > maxDepth {
			return d.fail("nested too deep")
		}
		defer func() { d.depth-- }()
		if c == '{' {
			return d.object(func([]byte) error { return d.skip() })
		}
		d.i++
		if d.next() == ']' {
			d.i++
			return nil
		}
		for {
			if err := d.skip(); err != nil {
				return err
			}
			switch d.next() {
			case ',':
				d.i++
			case ']':
				d.i++
				return nil
			default:
				return d.fail("want ',' or ']'")
			}
		}
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		_, _, err := d.number()
		return err
	}
	return d.fail("want a value")
}

// decodeCount decodes the body of the count endpoint.
func decodeCount(body []byte) (int64, error) {
	return decodeCountAt(body, JSONPath{"count"})
}
