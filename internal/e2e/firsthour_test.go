package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
)

// lastScreenLine is what a terminal shows on the line of the progress bar:
// the text after the last carriage return (and erase) before the final
// newline.
func lastScreenLine(screen string) string {
	screen = strings.TrimSuffix(screen, "\n")
	if i := strings.LastIndex(screen, "\n"); i >= 0 {
		screen = screen[i+1:]
	}
	if i := strings.LastIndex(screen, "\r"); i >= 0 {
		screen = screen[i+1:]
	}
	return strings.TrimPrefix(screen, "\x1b[K")
}

// On a terminal, a backfill shows one line redrawn in place: the records
// done of the window's total, the rate and the ETA; never a progress log
// line. JSON logs on the same terminal stay JSON, without a bar.
func TestProgressBarOnATerminal(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 1200, Seed: 36})
	c := e.Cmd(context.Background(), "backfill", "--since", "2020-01-01T00:00:00Z", "--page-size", "100")
	c.Env = append(c.Env, "ERPSYNC_LOG_FORMAT=", "ERPSYNC_LOG_LEVEL=info")
	code, _, screen := runOnTerminal(t, c)
	if code != 0 {
		t.Fatalf("backfill exit %d: %q", code, screen)
	}
	line := lastScreenLine(screen)
	want := regexp.MustCompile(`^\[={30}\] 100\.0%  1200/1200  \d+/s  ETA 0s$`)
	if !want.MatchString(line) {
		t.Errorf("last progress line %q, want it to match %s; terminal:\n%q", line, want, screen)
	}
	if strings.Contains(screen, "progress") {
		t.Errorf("a progress log line on a terminal:\n%q", screen)
	}
	if !strings.Contains(screen, "\r\x1b[K[") {
		t.Errorf("no bar redrawn in place:\n%q", screen)
	}

	c = e.Cmd(context.Background(), "backfill", "--since", "2020-01-01T00:00:00Z", "--log-format", "json")
	code, _, screen = runOnTerminal(t, c)
	if code != 0 || strings.Contains(screen, "\r") {
		t.Errorf("--log-format json on a terminal: exit %d, want 0 and no bar: %q", code, screen)
	}
}
