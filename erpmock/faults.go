package erpmock

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
)

// Faults are the switches that make the mock misbehave. Rates are
// probabilities in [0, 1] per API request unless noted; zero turns a fault
// off.
type Faults struct {
	// Latency is added to every API response.
	Latency time.Duration
	// ErrorRate answers 500, 502, 503 or 504, chosen at random. A 503
	// carries Retry-After: RetryAfter.
	ErrorRate float64
	// RateLimitRate answers 429 with Retry-After: RetryAfter.
	RateLimitRate float64
	// RetryAfter is the Retry-After of injected 429 and 503 answers, in
	// seconds. Defaults to 1.
	RetryAfter int
	// TruncateRate answers 200 with a Content-Length for the whole body,
	// sends half of it and closes the connection.
	TruncateRate float64
	// HangRate holds the response until the client gives up or Hang has
	// passed, then answers normally.
	HangRate float64
	// Hang is how long a hung response is held. Defaults to 30s.
	Hang time.Duration
	// DuplicateRate, per page, appends an exact copy of one record of the
	// page to the page.
	DuplicateRate float64
	// StaleRate, per page, appends an older version (lower version, other
	// field values, older updated_at) of one record of the page; the newest
	// version stays in the page.
	StaleRate float64
	// InvalidRate, per record, serves the record invalid, forever. It is
	// decided from the seed when the mock is built and read only by New.
	InvalidRate float64
	// ChangeRate, per page request, changes this many random valid records
	// before the page is read.
	ChangeRate int
	// DeleteRate, per page request, deletes this many random valid records
	// before the page is read (see Mock.Delete).
	DeleteRate int
	// StuckCursor serves every page after the first with the next_cursor
	// it was asked with: a client that follows next_cursor reads the same
	// page for ever (the ERP bug a sync must stop on).
	StuckCursor bool
	// StallUntil, when set, holds every page request whose updated_until
	// is given and not after it, for Hang or until the client gives up,
	// as a hung response: the early parts of a window stall while the
	// later ones are paged. Counts are not held. Defaults to zero: none.
	StallUntil time.Time
	// MaxRate caps API requests per second over all clients (token bucket,
	// burst of one second); above it the mock answers 429 with Retry-After.
	// Zero means unlimited.
	MaxRate float64
}

func (f Faults) retryAfter() int {
	if f.RetryAfter <= 0 {
		return 1
	}
	return f.RetryAfter
}

func (f Faults) hang() time.Duration {
	if f.Hang <= 0 {
		return 30 * time.Second
	}
	return f.Hang
}

// Validate reports the first switch out of its range.
func (f Faults) Validate() error {
	rates := []struct {
		name string
		v    float64
	}{
		{"error_rate", f.ErrorRate}, {"rate_limit_rate", f.RateLimitRate},
		{"truncate_rate", f.TruncateRate}, {"hang_rate", f.HangRate},
		{"duplicate_rate", f.DuplicateRate}, {"stale_rate", f.StaleRate},
		{"invalid_rate", f.InvalidRate},
	}
	for _, r := range rates {
		if !(r.v >= 0 && r.v <= 1) { // also catches NaN
			return fmt.Errorf("erpmock: %s %v not in [0, 1]", r.name, r.v)
		}
	}
	switch {
	case f.Latency < 0:
		return errors.New("erpmock: latency is negative")
	case f.Hang < 0:
		return errors.New("erpmock: hang is negative")
	case f.RetryAfter < 0:
		return errors.New("erpmock: retry_after is negative")
	case f.ChangeRate < 0:
		return errors.New("erpmock: change_rate is negative")
	case f.DeleteRate < 0:
		return errors.New("erpmock: delete_rate is negative")
	case !(f.MaxRate >= 0) || math.IsInf(f.MaxRate, 0):
		return fmt.Errorf("erpmock: max_rate %v is not a finite rate >= 0", f.MaxRate)
	}
	return nil
}

// faultsJSON is the wire form of Faults: snake_case names, durations as Go
// duration strings ("50ms").
type faultsJSON struct {
	Latency       string  `json:"latency"`
	ErrorRate     float64 `json:"error_rate"`
	RateLimitRate float64 `json:"rate_limit_rate"`
	RetryAfter    int     `json:"retry_after"`
	TruncateRate  float64 `json:"truncate_rate"`
	HangRate      float64 `json:"hang_rate"`
	Hang          string  `json:"hang"`
	DuplicateRate float64 `json:"duplicate_rate"`
	StaleRate     float64 `json:"stale_rate"`
	InvalidRate   float64 `json:"invalid_rate"`
	ChangeRate    int     `json:"change_rate"`
	DeleteRate    int     `json:"delete_rate"`
	MaxRate       float64 `json:"max_rate"`
	StuckCursor   bool    `json:"stuck_cursor"`
	StallUntil    string  `json:"stall_until,omitempty"`
}

// MarshalJSON writes f with snake_case names and durations as Go duration
// strings.
func (f Faults) MarshalJSON() ([]byte, error) {
	return json.Marshal(faultsJSON{
		Latency: f.Latency.String(), ErrorRate: f.ErrorRate, RateLimitRate: f.RateLimitRate,
		RetryAfter: f.RetryAfter, TruncateRate: f.TruncateRate, HangRate: f.HangRate,
		Hang: f.Hang.String(), DuplicateRate: f.DuplicateRate, StaleRate: f.StaleRate,
		InvalidRate: f.InvalidRate, ChangeRate: f.ChangeRate, DeleteRate: f.DeleteRate, MaxRate: f.MaxRate,
		StuckCursor: f.StuckCursor, StallUntil: stallText(f.StallUntil),
	})
}

func stallText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// UnmarshalJSON reads the form MarshalJSON writes. Fields absent from b keep
// their value in f, so decoding into the current faults patches them.
// Unknown fields are an error.
func (f *Faults) UnmarshalJSON(b []byte) error {
	cur, err := f.MarshalJSON()
	if err != nil {
		return err
	}
	var j faultsJSON
	if err := json.Unmarshal(cur, &j); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("erpmock: decode faults: %w", err)
	}
	latency, err := time.ParseDuration(j.Latency)
	if err != nil {
		return fmt.Errorf("erpmock: latency: %w", err)
	}
	hang, err := time.ParseDuration(j.Hang)
	if err != nil {
		return fmt.Errorf("erpmock: hang: %w", err)
	}
	var stall time.Time
	if j.StallUntil != "" {
		if stall, err = time.Parse(time.RFC3339Nano, j.StallUntil); err != nil {
			return fmt.Errorf("erpmock: stall_until: %w", err)
		}
	}
	*f = Faults{
		Latency: latency, ErrorRate: j.ErrorRate, RateLimitRate: j.RateLimitRate,
		RetryAfter: j.RetryAfter, TruncateRate: j.TruncateRate, HangRate: j.HangRate,
		Hang: hang, DuplicateRate: j.DuplicateRate, StaleRate: j.StaleRate,
		InvalidRate: j.InvalidRate, ChangeRate: j.ChangeRate, DeleteRate: j.DeleteRate, MaxRate: j.MaxRate,
		StuckCursor: j.StuckCursor, StallUntil: stall,
	}
	return nil
}

// stalls reports whether f.StallUntil holds the request r.
func (f Faults) stalls(r *http.Request) bool {
	if f.StallUntil.IsZero() || strings.HasSuffix(r.URL.Path, "/count") {
		return false
	}
	until, err := time.Parse(time.RFC3339Nano, r.URL.Query().Get("updated_until"))
	return err == nil && !until.After(f.StallUntil)
}

// hit draws whether a fault of probability p happens. It draws nothing when
// p is zero, so that switching one fault on does not shift the decisions
// of the others.
func (m *Mock) hit(p float64) bool {
	if p <= 0 {
		return false
	}
	if p >= 1 {
		return true
	}
	m.fmu.Lock()
	defer m.fmu.Unlock()
	return m.rng.Float64() < p
}

// intN draws from [0, n).
func (m *Mock) intN(n int) int {
	m.fmu.Lock()
	defer m.fmu.Unlock()
	return m.rng.IntN(n)
}

// bucket is a token bucket holding up to one second of requests.
type bucket struct {
	tokens float64
	last   time.Time
}

// admit takes a token at rate per second, or says how long until one is
// there.
func (m *Mock) admit(rate float64, now time.Time) (ok bool, wait time.Duration) {
	if rate <= 0 {
		return true, 0
	}
	m.fmu.Lock()
	defer m.fmu.Unlock()
	b := &m.bucket
	burst := max(rate, 1)
	if b.last.IsZero() {
		b.tokens = burst
	} else {
		b.tokens = min(burst, b.tokens+now.Sub(b.last).Seconds()*rate)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / rate * float64(time.Second))
}

// Flags defines a flag on fs for each fault, writing into f and starting
// every usage text with usagePrefix; the defaults are f's values (RetryAfter
// and Hang: their defaults when zero). cmd/erpmock and erpsync loadtest share them.
func (f *Faults) Flags(fs *flag.FlagSet, usagePrefix string) {
	u := func(s string) string { return usagePrefix + s }
	fs.DurationVar(&f.Latency, "latency", f.Latency, u("latency added to every response"))
	fs.Float64Var(&f.ErrorRate, "error-rate", f.ErrorRate, u("probability of a 500/502/503/504 answer"))
	fs.Float64Var(&f.RateLimitRate, "rate-limit-rate", f.RateLimitRate, u("probability of a 429 answer"))
	fs.IntVar(&f.RetryAfter, "retry-after", f.retryAfter(), u("Retry-After `seconds` of 429 and 503 answers"))
	fs.Float64Var(&f.TruncateRate, "truncate-rate", f.TruncateRate, u("probability of a 200 with half its body"))
	fs.Float64Var(&f.HangRate, "hang-rate", f.HangRate, u("probability of a hung response"))
	fs.DurationVar(&f.Hang, "hang", f.hang(), u("how long a hung response is held"))
	fs.Float64Var(&f.DuplicateRate, "duplicate-rate", f.DuplicateRate, u("probability per page of a record twice"))
	fs.Float64Var(&f.StaleRate, "stale-rate", f.StaleRate, u("probability per page of an older version after the newest"))
	fs.Float64Var(&f.InvalidRate, "invalid-rate", f.InvalidRate, u("share of records served invalid"))
	fs.IntVar(&f.ChangeRate, "change-rate", f.ChangeRate, u("records changed per page request"))
	fs.IntVar(&f.DeleteRate, "delete-rate", f.DeleteRate, u("records deleted per page request"))
	fs.Float64Var(&f.MaxRate, "max-rate", f.MaxRate, u("requests per second over all clients (0: unlimited)"))
	fs.BoolVar(&f.StuckCursor, "stuck-cursor", f.StuckCursor, u("answer every page after the first with the next_cursor it was asked with"))
}
