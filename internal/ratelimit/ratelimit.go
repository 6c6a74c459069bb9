// Package ratelimit caps the request rate of every erpsync instance together
// (replicas, shards, backfills) with a GCRA kept in Redis and run as one Lua
// call per request. Each call reserves the next slot on the server's clock
// and tells the caller how long to wait for it, so callers never poll and a
// fleet never exceeds the rate, whatever its size.
package ratelimit

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/internal/ctxtime"
)

//go:embed gcra.lua
var gcraSrc string

var gcra = redis.NewScript(gcraSrc)

// ErrUnavailable wraps a failure to reach Redis.
var ErrUnavailable = errors.New("ratelimit: redis unavailable")

// Rate is a number of events per period.
type Rate struct {
	N   float64
	Per time.Duration
}

// Interval is the time between two events at this rate.
func (r Rate) Interval() time.Duration { return time.Duration(float64(r.Per) / r.N) }

func (r Rate) String() string { return strconv.FormatFloat(r.N, 'f', -1, 64) + "/" + unit(r.Per) }

func unit(d time.Duration) string {
	switch d {
	case time.Second:
		return "s"
	case time.Minute:
		return "m"
	case time.Hour:
		return "h"
	}
	return d.String()
}

// ParseRate parses "N/s", "N/m", "N/h" or a bare "N" (per second).
func ParseRate(s string) (Rate, error) {
	num, per, ok := strings.Cut(strings.TrimSpace(s), "/")
	r := Rate{Per: time.Second}
	if ok {
		switch per {
		case "s", "sec", "second":
		case "m", "min", "minute":
			r.Per = time.Minute
		case "h", "hour":
			r.Per = time.Hour
		default:
			return Rate{}, fmt.Errorf("rate %q: unit must be s, m or h", s)
		}
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n <= 0 || n > 1e6 {
		return Rate{}, fmt.Errorf("rate %q: want N/s, N/m or N/h with 0 < N <= 1e6", s)
	}
	r.N = n
	return r, nil
}

// Limiter shares one rate among every process that uses the same key.
type Limiter struct {
	rdb   redis.UniversalClient
	key   string
	rate  Rate
	burst int
}

// New returns a limiter of rate on key. burst is how many events may pass at
// once after a quiet time; 1 (the minimum) spaces every event.
func New(rdb redis.UniversalClient, key string, rate Rate, burst int) *Limiter {
	return &Limiter{rdb: rdb, key: key, rate: rate, burst: max(burst, 1)}
}

// Wait blocks until the caller may make one request, or ctx ends.
func (l *Limiter) Wait(ctx context.Context) error {
	interval := l.rate.Interval().Microseconds()
	tolerance := interval * int64(l.burst-1)
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	us, err := gcra.Run(cctx, l.rdb, []string{l.key}, interval, tolerance).Int64()
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if us <= 0 {
		return nil
	}
	return ctxtime.Sleep(ctx, time.Duration(us)*time.Microsecond)
}
