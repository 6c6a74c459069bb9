package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
)

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress shows a run's progress: a bar on a terminal (total from the
// ERP's count endpoint, rate, ETA), a log line every 10 s elsewhere. It sets
// cfg.Progress and returns the function that ends the display.
func progress(ctx context.Context, cfg *syncer.Config, src source, stderr io.Writer, log zerolog.Logger) func(*syncer.Report) {
	tty := isTerminal(stderr)
	var total int64 = -1
	if cfg.Mode == syncer.ModeBackfill {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if n, err := src.Count(cctx, cfg.Since, cfg.Until); err == nil {
			total = n
			if cfg.Shards > 1 {
				total = (n + int64(cfg.Shards) - 1) / int64(cfg.Shards)
			}
		}
		cancel()
	}
	start := time.Now()
	var mu sync.Mutex
	drawn := false
	if tty {
		cfg.ProgressEvery = 250 * time.Millisecond
	} else {
		cfg.ProgressEvery = 10 * time.Second
	}
	cfg.Progress = func(c store.Counters) {
		el := time.Since(start).Seconds()
		done := c.Handled()
		rate := float64(done) / max(el, 0.001)
		if !tty {
			ev := log.Info().Int64("fetched", c.Fetched).Int64("done", done).Float64("records_per_second", rate)
			if total > 0 {
				ev = ev.Int64("total", total)
			}
			ev.Msg("progress")
			return
		}
		mu.Lock()
		defer mu.Unlock()
		drawn = true
		fmt.Fprint(stderr, "\r"+bar(done, total, rate))
	}
	return func(*syncer.Report) {
		mu.Lock()
		defer mu.Unlock()
		if drawn {
			fmt.Fprintln(stderr)
		}
	}
}

// bar renders one progress line.
func bar(done, total int64, rate float64) string {
	if total <= 0 {
		return fmt.Sprintf("%d records  %.0f/s", done, rate)
	}
	frac := min(float64(done)/float64(total), 1)
	const width = 30
	n := int(frac * width)
	eta := "?"
	if rate > 0 && done < total {
		eta = (time.Duration(float64(total-done)/rate) * time.Second).Round(time.Second).String()
	} else if done >= total {
		eta = "0s"
	}
	return fmt.Sprintf("[%s%s] %5.1f%%  %d/%d  %.0f/s  ETA %s ", strings.Repeat("=", n), strings.Repeat(" ", width-n), frac*100, done, total, rate, eta)
}
