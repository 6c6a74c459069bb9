//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/testenv"
)

var bin string // the erpsync binary built for the suite

func TestMain(m *testing.M) {
	start := time.Now()
	var remove func()
	var err error
	if bin, remove, err = testenv.BuildTemp("./cmd/erpsync"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	remove()
	if err := report(os.Stdout, time.Since(start)); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		code = max(code, 1)
	}
	if failed() {
		code = max(code, 1)
	}
	os.Exit(code)
}

// row is one scenario's line in the table.
type row struct {
	order      int
	Scenario   string
	Faults     []string
	Runs       int
	Records    int
	Lost       int
	Duplicates int64
	Result     string
}

var (
	mu   sync.Mutex
	rows []*row
)

// scenario starts a scenario's row; it is filed with PASS or FAIL when the
// test ends, after every other cleanup (processes, servers).
func scenario(t *testing.T, order int, name string) *row {
	r := &row{order: order, Scenario: name, Records: -1, Lost: -1, Duplicates: -1}
	t.Cleanup(func() {
		r.Result = "PASS"
		if t.Failed() {
			r.Result = "FAIL"
		}
		mu.Lock()
		rows = append(rows, r)
		mu.Unlock()
	})
	return r
}

func (r *row) fault(format string, args ...any) {
	r.Faults = append(r.Faults, fmt.Sprintf(format, args...))
}

// erpFaults adds the faults erpmock injected between two Stats.
func (r *row) erpFaults(before, after erpmock.Stats) {
	var s5xx int64
	for code := 500; code < 600; code++ {
		s5xx += after.Statuses[code] - before.Statuses[code]
	}
	for _, f := range []struct {
		name string
		n    int64
	}{
		{"5xx", s5xx},
		{"429", after.Statuses[429] - before.Statuses[429]},
		{"truncated", after.Truncated - before.Truncated},
		{"hangs", after.Hung - before.Hung},
		{"records changed", after.Changed - before.Changed},
	} {
		if f.n > 0 {
			r.fault("%s %d", f.name, f.n)
		}
	}
}

func failed() bool {
	mu.Lock()
	defer mu.Unlock()
	for _, r := range rows {
		if r.Result != "PASS" {
			return true
		}
	}
	return false
}

func dash(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// report prints the table and writes it as markdown.
func report(w io.Writer, took time.Duration) error {
	mu.Lock()
	defer mu.Unlock()
	if len(rows) == 0 {
		return nil
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].order < rows[j].order })
	head := []string{"scenario", "faults injected", "runs", "records", "lost", "duplicates", "result"}
	var cells [][]string
	for _, r := range rows {
		faults := strings.Join(r.Faults, ", ")
		if faults == "" {
			faults = "-"
		}
		cells = append(cells, []string{r.Scenario, faults, fmt.Sprint(r.Runs),
			dash(int64(r.Records)), dash(int64(r.Lost)), dash(r.Duplicates), r.Result})
	}
	width := make([]int, len(head))
	for i, h := range head {
		width[i] = len(h)
		for _, c := range cells {
			width[i] = max(width[i], len(c[i]))
		}
	}
	line := func(c []string) {
		for i, s := range c {
			fmt.Fprintf(w, "%-*s  ", width[i], s)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	line(head)
	for _, c := range cells {
		line(c)
	}
	fmt.Fprintf(w, "%d scenarios in %s\n", len(rows), took.Round(time.Second))

	var md strings.Builder
	title, target := "Chaos suite", "make chaos"
	if testenv.Postgres() {
		title, target = "Chaos suite on PostgreSQL", "make chaos-postgres"
	}
	fmt.Fprintf(&md, "# %s\n\n`%s`, %s, %d scenarios in %s.\n\n",
		title, target, time.Now().UTC().Format("2006-01-02 15:04 MST"), len(rows), took.Round(time.Second))
	fmt.Fprintf(&md, "| %s |\n|%s\n", strings.Join(head, " | "), " --- | --- | ---: | ---: | ---: | ---: | --- |")
	for _, c := range cells {
		fmt.Fprintf(&md, "| %s |\n", strings.Join(c, " | "))
	}
	dir, err := outDir()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	path := filepath.Join(dir, "chaos-report.md")
	if err := os.WriteFile(path, []byte(md.String()), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	fmt.Fprintf(w, "report: %s\n", path)
	return nil
}

// outDir is ERPSYNC_CHAOS_OUT, or chaos-report at the module root (go test
// runs in the package's directory).
func outDir() (string, error) {
	if d := os.Getenv("ERPSYNC_CHAOS_OUT"); d != "" {
		return d, nil
	}
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(root)), "chaos-report"), nil
}

// finish ends a scenario: it stops the watcher, turns the ERP's faults off,
// runs `erpsync verify`, compares the table with the truth and fills the
// row's figures. The caller has brought the table to its end state.
func finish(t *testing.T, r *row, e *proctest.Env, w *proctest.Watcher) {
	t.Helper()
	polls, downs := w.Stop()
	if len(downs) > 0 {
		t.Errorf("erp_version went down (%d polls): %v", polls, downs)
	}
	if polls < 2 {
		t.Errorf("the version watcher read the table %d times: it proves nothing", polls)
	}
	e.Mock.SetFaults(erpmock.Faults{})
	res, code := e.Verify(context.Background())
	if code != 0 || !res.OK() {
		t.Errorf("verify exit %d: missing %d, stale %d, unknown %d, ahead %d (e.g. %v %v %v)", code,
			res.Missing.Count, res.Stale.Count, res.Unknown.Count, res.Ahead.Count, res.Missing.IDs, res.Stale.IDs, res.Unknown.IDs)
	}
	s := e.Check()
	r.Runs = e.Processes()
	r.Records = s.Truth
	r.Lost = s.Missing
	r.Duplicates = s.Duplicates()
	if !s.OK() {
		t.Errorf("the table is not the truth: %s", s)
	}
	t.Logf("%s: %s; %d watcher polls; verify: %d rows match", r.Scenario, s, polls, res.Matching)
}
