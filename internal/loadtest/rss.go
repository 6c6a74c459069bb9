package loadtest

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"time"
)

// RSSWatch follows the peak resident set of a running process through
// /proc/<pid>/status (VmHWM, the high-water mark of its address space).
//
// The rusage of a child (ru_maxrss) is no good for this when the parent is
// big: Go starts a child with clone(CLONE_VM|CLONE_VFORK), and at exec the
// kernel keeps the high-water mark of the address space it leaves, which
// is the parent's, as the child's maxrss. A 200 MiB parent makes every child
// report at least 200 MiB. VmHWM belongs to the address space the child
// execs into, so it is the child's own.
type RSSWatch struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	peak int64 // KiB
}

// WatchRSS starts reading the VmHWM of process pid every interval until
// Stop. Linux only: elsewhere Peak stays 0.
func WatchRSS(pid int, interval time.Duration) *RSSWatch {
	w := &RSSWatch{stop: make(chan struct{}), done: make(chan struct{})}
	path := "/proc/" + strconv.Itoa(pid) + "/status"
	go func() {
		defer close(w.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if kib, ok := readHWM(path); ok {
				w.mu.Lock()
				w.peak = max(w.peak, kib)
				w.mu.Unlock()
			}
			select {
			case <-t.C:
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

// Stop ends the watch and returns the peak in KiB (0 when never read).
// Call it when the process has exited: the last reads before the exit
// give the peak.
func (w *RSSWatch) Stop() int64 {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	return w.Peak()
}

// Peak returns the highest VmHWM read so far, in KiB.
func (w *RSSWatch) Peak() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak
}

var hwmField = []byte("VmHWM:")

func readHWM(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	i := bytes.Index(b, hwmField)
	if i < 0 {
		return 0, false // a zombie has no VmHWM
	}
	line := b[i+len(hwmField):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	f := bytes.Fields(line) // "12345 kB"
	if len(f) == 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(f[0]), 10, 64)
	return n, err == nil
}
