package loadtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/erpsync/erpsync/internal/cli"
	"github.com/erpsync/erpsync/internal/syncer"
)

// child is one erpsync process of the load test.
type child struct {
	index   int
	mode    string
	args    []string
	report  string // path of its --report file
	logFile string // path of its log, when kept
	cmd     *exec.Cmd

	mu       sync.Mutex
	progress progressLine // its last progress line
	tail     []string     // its last log lines, for failures

	done    chan struct{} // closed when the process ended and its log is read
	rss     *RSSWatch
	peakRSS int64 // KiB, its last VmHWM
	runErr  error
	started time.Time
	ended   time.Time
}

// progressLine is what a child last said in a progress log line.
type progressLine struct {
	At      time.Duration `json:"-"`
	Fetched int64         `json:"fetched"`
	Done    int64         `json:"done"`
}

const tailLines = 20

// start starts the child, its stderr going to logPath and through the
// progress scanner. The DSN goes in its environment, not on its command
// line, where any user of the machine could read a password.
func (c *child) start(ctx context.Context, bin, dsn, logPath string, t0 time.Time) error {
	c.cmd = exec.CommandContext(ctx, bin, c.args...)
	c.cmd.Env = append(cli.EnvWithoutSettings(), dsnEnv(dsn)+"="+dsn)
	// Cancelled: ask for a clean stop first (the syncer writes what it
	// holds, within its grace), then kill.
	c.cmd.Cancel = func() error { return c.cmd.Process.Signal(syscall.SIGTERM) }
	c.cmd.WaitDelay = 30 * time.Second
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("create child log: %w", err)
	}
	c.cmd.Stdout = logFile
	pr, pw := io.Pipe()
	c.cmd.Stderr = io.MultiWriter(logFile, pw)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		c.scan(pr, t0)
	}()
	c.done = make(chan struct{})
	c.started = time.Now()
	if err := c.cmd.Start(); err != nil {
		c.done = nil
		logFile.Close()
		pw.Close()
		return fmt.Errorf("start %s: %w", bin, err)
	}
	c.rss = WatchRSS(c.cmd.Process.Pid, 50*time.Millisecond)
	go func() {
		defer close(c.done)
		// Wait returns after the stderr copy ended.
		c.runErr = c.cmd.Wait()
		c.peakRSS = c.rss.Stop()
		c.ended = time.Now()
		pw.Close()
		<-scanned
		logFile.Close()
	}()
	return nil
}

// wait waits until the child ended and its log was read.
func (c *child) wait() { <-c.done }

// scan reads the child's JSON log lines: progress lines and a tail.
func (c *child) scan(r io.Reader, t0 time.Time) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var l struct {
			Message string `json:"message"`
			Fetched int64  `json:"fetched"`
			Done    int64  `json:"done"`
		}
		_ = json.Unmarshal([]byte(line), &l)
		c.mu.Lock()
		if l.Message == "progress" {
			c.progress = progressLine{At: time.Since(t0), Fetched: l.Fetched, Done: l.Done}
		}
		c.tail = append(c.tail, line)
		if len(c.tail) > tailLines {
			c.tail = c.tail[len(c.tail)-tailLines:]
		}
		c.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, r)
}

func (c *child) lastProgress() progressLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.progress
}

// result collects what the child left: exit code, peak RSS, run report.
func (c *child) result() (ProcessResult, error) {
	res := ProcessResult{
		Index:      c.index,
		Mode:       c.mode,
		Args:       c.args,
		ExitCode:   -1,
		Seconds:    c.ended.Sub(c.started).Seconds(),
		PeakRSSKiB: c.peakRSS,
	}
	if st := c.cmd.ProcessState; st != nil {
		res.ExitCode = st.ExitCode()
		if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
			res.RusageMaxRSSKiB = ru.Maxrss // KiB on Linux
			res.CPUSeconds = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
		}
	}
	c.mu.Lock()
	res.LogTail = append([]string(nil), c.tail...)
	c.mu.Unlock()
	b, err := os.ReadFile(c.report)
	if err != nil {
		return res, fmt.Errorf("process %d (%s): read report: %w", c.index, c.mode, err)
	}
	var rep syncer.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return res, fmt.Errorf("process %d (%s): decode report: %w", c.index, c.mode, err)
	}
	res.Report = &rep
	if rep.FinishedAt != nil {
		if d := rep.FinishedAt.Sub(rep.StartedAt).Seconds(); d > 0 {
			res.RecordsPerSecond = float64(rep.Handled()) / d
		}
	}
	if c.runErr != nil && res.ExitCode < 0 {
		return res, fmt.Errorf("process %d (%s): %w", c.index, c.mode, c.runErr)
	}
	return res, nil
}
