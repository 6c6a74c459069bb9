package syncer

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Limit is a bound given as a count, or as a percentage of a base: the
// items a run fetched (Config.MaxInvalid), the live rows of a table (a
// reconcile's deletion guard).
type Limit struct {
	Count   int64
	Percent float64 // used when IsPercent
	// IsPercent says the limit is Percent of the base.
	IsPercent bool
}

// ParseLimit parses "N" (a count) or "P%" (a percentage, 0 to 100).
func ParseLimit(s string) (Limit, error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || !(v >= 0 && v <= 100) {
			return Limit{}, fmt.Errorf("%q: want a count N or a percentage P%% with 0 <= P <= 100", s)
		}
		return Limit{Percent: v, IsPercent: true}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return Limit{}, fmt.Errorf("%q: want a count N >= 0 or a percentage P%%", s)
	}
	return Limit{Count: n}, nil
}

// Of returns the bound for a base of rows (or items).
func (l Limit) Of(rows int64) int64 {
	if !l.IsPercent {
		return l.Count
	}
	return int64(math.Floor(float64(rows) * l.Percent / 100))
}

func (l Limit) String() string {
	if l.IsPercent {
		return strconv.FormatFloat(l.Percent, 'f', -1, 64) + "%"
	}
	return strconv.FormatInt(l.Count, 10)
}
