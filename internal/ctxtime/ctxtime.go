// Package ctxtime holds the one context-aware wait that the retry and
// pacing loops of erpsync, its ERP client, its rate limiter and erpmock
// share.
package ctxtime

import (
	"context"
	"time"
)

// Sleep waits d, or less when ctx ends first. It returns nil when it waited
// all of d, and ctx's error otherwise; a d of zero or less waits nothing and
// returns ctx's error.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
