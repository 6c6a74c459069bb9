package guarantee

import (
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/store"
)

// checkInterruptExit holds the exit of a run stopped by SIGTERM to the
// contract: 143 and one last line that says how to resume when it ended
// interrupted; 1 when it failed (its job lock lost on a loaded machine).
func checkInterruptExit(t testing.TB, res proctest.Result, rep map[string]any) {
	t.Helper()
	lines := proctest.Lines(res.Stdout)
	last := ""
	if len(lines) > 0 {
		last = lines[len(lines)-1]
	}
	switch rep["status"] {
	case store.StatusInterrupted:
		if res.Code != 143 || !strings.HasPrefix(last, "erpsync: interrupted by SIGTERM: ") || !strings.Contains(last, "continues from there") && !strings.Contains(last, "starts from the job's last checkpoint") {
			t.Errorf("a run interrupted by SIGTERM: exit %d, last line %q; want 143 and the line that says how to resume", res.Code, last)
		}
	case store.StatusFailed:
		if res.Code != 1 {
			t.Errorf("a run that failed after SIGTERM: exit %d, want 1", res.Code)
		}
	}
}
