// Package schedule says when the ticks of a scheduled job fall: every D on
// the wall-clock grid of D, or by a cron expression. Replicas that share a
// schedule agree on its ticks without talking to each other, which is what
// lets a job lock held until the next tick (lock-at-least-for) give each
// tick to exactly one replica.
package schedule

import (
	"errors"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule gives the tick after a time.
type Schedule interface {
	// Next returns the first tick strictly after t.
	Next(t time.Time) time.Time
}

// Every ticks at the multiples of D since the Unix epoch (UTC).
type Every time.Duration

// Next returns the first multiple of D after t.
func (e Every) Next(t time.Time) time.Time {
	d := time.Duration(e)
	return t.Truncate(d).Add(d)
}

// Parse returns the schedule of --every (a Go duration of at least 1s) or of
// --cron (five fields, or a descriptor such as @hourly; evaluated in UTC).
// Exactly one of them must be given.
func Parse(every time.Duration, expr string) (Schedule, error) {
	switch {
	case every != 0 && expr != "":
		return nil, errors.New("give --every or --cron, not both")
	case every == 0 && expr == "":
		return nil, errors.New("give --every D (like 1m) or --cron EXPR")
	case expr != "":
		s, err := cron.ParseStandard(expr)
		if err != nil {
			return nil, fmt.Errorf("--cron %q: %w", expr, err)
		}
		return cronSchedule{s}, nil
	case every < time.Second:
		return nil, fmt.Errorf("--every %s: want at least 1s", every)
	default:
		return Every(every), nil
	}
}

type cronSchedule struct{ s cron.Schedule }

func (c cronSchedule) Next(t time.Time) time.Time { return c.s.Next(t.UTC()) }
