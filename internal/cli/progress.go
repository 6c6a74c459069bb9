package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/syncer"
)

// liveLine is a terminal's stderr with one line kept at the bottom: the
// progress bar, redrawn in place. A log line written meanwhile clears the
// bar, takes its place and the bar is drawn again below it, so the two
// never share a line.
type liveLine struct {
	mu   sync.Mutex
	w    io.Writer
	line string // the bar on screen; "" when none
}

// clear is the carriage return and ANSI erase-to-end-of-line that wipe the
// line the cursor is on.
const clear = "\r\x1b[K"

// Write writes p (one log line) above the bar.
func (l *liveLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.line == "" {
		return l.w.Write(p)
	}
	_, err := io.WriteString(l.w, clear+string(p)+l.line)
	return len(p), err
}

// draw replaces the bar with line.
func (l *liveLine) draw(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.line = line
	io.WriteString(l.w, clear+line)
}

// end leaves the bar on screen as it is and moves below it.
func (l *liveLine) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.line != "" {
		io.WriteString(l.w, "\n")
		l.line = ""
	}
}

// Unwrap returns the stream the line writes to.
func (l *liveLine) Unwrap() io.Writer { return l.w }

// progress shows a run's progress: with console logs on a terminal (live,
// from newLogger), one line redrawn in place with the records done, the
// rate and, when the ERP counts the window, the total and the ETA; a
// progress log line every 10 s otherwise (JSON logs, a file, a pipe). It
// sets cfg.Progress and returns the function that ends the display.
func progress(ctx context.Context, cfg *syncer.Config, src source, live *liveLine, log zerolog.Logger) func(*syncer.Report) {
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
	if live != nil {
		cfg.ProgressEvery = 250 * time.Millisecond
	} else {
		cfg.ProgressEvery = 10 * time.Second
	}
	rate := func(done int64) float64 { return float64(done) / max(time.Since(start).Seconds(), 0.001) }
	cfg.Progress = func(c store.Counters) {
		done := c.Handled()
		if live == nil {
			ev := log.Info().Int64("fetched", c.Fetched).Int64("done", done).Float64("records_per_second", rate(done))
			if total > 0 {
				ev = ev.Int64("total", total)
			}
			ev.Msg("progress")
			return
		}
		live.draw(bar(done, total, rate(done)))
	}
	return func(rep *syncer.Report) {
		if live == nil {
			return
		}
		if rep != nil && rep.Status != store.StatusSkipped {
			done := rep.Handled()
			live.draw(bar(done, max(total, done), rate(done)))
		}
		live.end()
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
	return fmt.Sprintf("[%s%s] %5.1f%%  %d/%d  %.0f/s  ETA %s", strings.Repeat("=", n), strings.Repeat(" ", width-n), frac*100, done, total, rate, eta)
}
