// Package regex stands in for github.com/dolthub/go-icu-regex, which the
// embedded MySQL server of `erpsync demo` (github.com/dolthub/go-mysql-server)
// links for its REGEXP_* functions. That package compiles a WebAssembly
// build of ICU when the program starts, about 0.3 s of CPU paid by every
// erpsync process, a `relay --once` or a `run` from a scheduler included,
// although only the demo's server could ever use it. This one has the same
// API over Go's regexp (RE2 syntax, which covers what erpsync's own SQL
// would ask; erpsync issues no REGEXP). go.mod replaces the module with
// this directory.
package regex

import (
	"context"
	"regexp"
	"strings"
	"unicode/utf8"

	errors "gopkg.in/src-d/go-errors.v1"
)

// Regex is the API of go-icu-regex's Regex: a regular expression set by
// SetRegexString, matched against the string set by SetMatchString.
// Positions count in characters, from 1 (IndexOf, Replace, Substring) or
// from 0 (Matches, as go-icu-regex counts them); an occurrence below 1 is
// the first.
type Regex interface {
	SetRegexString(ctx context.Context, regexStr string, flags RegexFlags) error
	SetMatchString(ctx context.Context, matchStr string) error
	IndexOf(ctx context.Context, start int, occurrence int, endIndex bool) (int, error)
	Matches(ctx context.Context, start int, occurrence int) (bool, error)
	Replace(ctx context.Context, replacementStr string, position int, occurrence int) (string, error)
	Substring(ctx context.Context, start int, occurrence int) (string, bool, error)
	StringBufferSize() uint32
	Close() error
}

// The errors of go-icu-regex.
var (
	ErrRegexNotYetSet = errors.NewKind("SetRegexString must be called before any other function")
	ErrMatchNotYetSet = errors.NewKind("SetMatchString must be called as there is nothing to match against")
	ErrInvalidRegex   = errors.NewKind("the given regular expression is invalid")
)

// ShouldPanic is go-icu-regex's; a Regex here holds nothing to leak.
var ShouldPanic = true

// SetRegexLeakHandler is go-icu-regex's; a Regex here holds nothing to
// leak, so handler is never called.
func SetRegexLeakHandler(handler func()) {}

// SetPoolFetchMax is go-icu-regex's; there is no pool here.
func SetPoolFetchMax(maxFetch uint64) {}

// RegexFlags are go-icu-regex's flags (ICU's values).
type RegexFlags uint32

// The flags. Unix_Lines, Comments, Unicode_Word and
// Error_On_Unknown_Escapes change nothing here.
const (
	RegexFlags_None                     RegexFlags = 0
	RegexFlags_Unix_Lines               RegexFlags = 1
	RegexFlags_Case_Insensitive         RegexFlags = 2
	RegexFlags_Comments                 RegexFlags = 4
	RegexFlags_Multiline                RegexFlags = 8
	RegexFlags_Literal                  RegexFlags = 16
	RegexFlags_Dot_All                  RegexFlags = 32
	RegexFlags_Unicode_Word             RegexFlags = 256
	RegexFlags_Error_On_Unknown_Escapes RegexFlags = 512
)

// CreateRegex returns a Regex; the buffer size is go-icu-regex's and
// means nothing here.
func CreateRegex(stringBufferInBytes uint32) Regex { return &goRegex{} }

type goRegex struct {
	re       *regexp.Regexp
	match    string
	matchSet bool
}

func (g *goRegex) SetRegexString(_ context.Context, regexStr string, flags RegexFlags) error {
	if flags&RegexFlags_Literal != 0 {
		regexStr = regexp.QuoteMeta(regexStr)
	}
	var prefix string
	for _, f := range []struct {
		flag RegexFlags
		re   string
	}{{RegexFlags_Case_Insensitive, "i"}, {RegexFlags_Multiline, "m"}, {RegexFlags_Dot_All, "s"}} {
		if flags&f.flag != 0 {
			prefix += f.re
		}
	}
	if prefix != "" {
		regexStr = "(?" + prefix + ")" + regexStr
	}
	re, err := regexp.Compile(regexStr)
	if err != nil {
		return ErrInvalidRegex.New()
	}
	g.re = re
	return nil
}

func (g *goRegex) SetMatchString(_ context.Context, matchStr string) error {
	if g.re == nil {
		return ErrRegexNotYetSet.New()
	}
	g.match, g.matchSet = matchStr, true
	return nil
}

// ready reports whether the regex and then the match string were set.
func (g *goRegex) ready() error {
	if g.re == nil {
		return ErrRegexNotYetSet.New()
	}
	if !g.matchSet {
		return ErrMatchNotYetSet.New()
	}
	return nil
}

// find returns the byte offsets of the occurrence-th match (from 1; below
// 1 the first) at or after the character at index from (from 0), nil
// when there is none.
func (g *goRegex) find(from, occurrence int) ([]int, error) {
	if err := g.ready(); err != nil {
		return nil, err
	}
	off := byteOffset(g.match, from)
	if off < 0 {
		return nil, nil
	}
	occurrence = max(occurrence, 1)
	ms := g.re.FindAllStringIndex(g.match[off:], occurrence)
	if len(ms) < occurrence {
		return nil, nil
	}
	m := ms[occurrence-1]
	return []int{off + m[0], off + m[1]}, nil
}

// byteOffset is the byte offset of the character at index i (from 0) of
// s; -1 past its end.
func byteOffset(s string, i int) int {
	off := 0
	for n := 0; n < i; n++ {
		if off >= len(s) {
			return -1
		}
		_, size := utf8.DecodeRuneInString(s[off:])
		off += size
	}
	return off
}

func (g *goRegex) IndexOf(_ context.Context, start, occurrence int, endIndex bool) (int, error) {
	m, err := g.find(start-1, occurrence)
	if m == nil {
		return 0, err
	}
	at := m[0]
	if endIndex {
		at = m[1]
	}
	return utf8.RuneCountInString(g.match[:at]) + 1, nil
}

// Matches counts start from 0, as go-icu-regex does.
func (g *goRegex) Matches(_ context.Context, start, occurrence int) (bool, error) {
	m, err := g.find(start, occurrence)
	return m != nil, err
}

// Replace replaces the occurrence-th match at or after the position-th
// character, or with occurrence 0 every match there; $1 in replacementStr
// is the first group.
func (g *goRegex) Replace(_ context.Context, replacementStr string, position, occurrence int) (string, error) {
	if err := g.ready(); err != nil {
		return "", err
	}
	from := byteOffset(g.match, position-1)
	if from < 0 {
		return g.match, nil
	}
	head, tail := g.match[:from], g.match[from:]
	if occurrence == 0 {
		return head + g.re.ReplaceAllString(tail, replacementStr), nil
	}
	ms := g.re.FindAllStringSubmatchIndex(tail, occurrence)
	if occurrence < 0 || len(ms) < occurrence {
		return g.match, nil
	}
	m := ms[occurrence-1]
	var b strings.Builder
	b.WriteString(head)
	b.WriteString(tail[:m[0]])
	b.Write(g.re.ExpandString(nil, replacementStr, tail, m))
	b.WriteString(tail[m[1]:])
	return b.String(), nil
}

func (g *goRegex) Substring(_ context.Context, start, occurrence int) (string, bool, error) {
	m, err := g.find(start-1, occurrence)
	if m == nil {
		return "", false, err
	}
	return g.match[m[0]:m[1]], true, nil
}

func (g *goRegex) StringBufferSize() uint32 { return 0 }

func (g *goRegex) Close() error { return nil }
