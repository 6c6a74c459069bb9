package e2e

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: the controlling side the test reads and
// the terminal side a process writes to, as it would to a user's terminal.
func openPTY(t *testing.T) (ptm, pts *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		ptm.Close()
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		ptm.Close()
		t.Fatalf("pty number: %v", err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		ptm.Close()
		t.Fatalf("open pty: %v", err)
	}
	// Output as a terminal would pass it: no "\n" to "\r\n".
	if tio, err := unix.IoctlGetTermios(int(pts.Fd()), unix.TCGETS); err == nil {
		tio.Oflag &^= unix.OPOST
		_ = unix.IoctlSetTermios(int(pts.Fd()), unix.TCSETS, tio)
	}
	return ptm, pts
}

// runOnTerminal runs c with its stderr on a pseudo-terminal (stdout to a
// buffer) and returns the exit code, stdout and what the terminal showed.
func runOnTerminal(t *testing.T, c *exec.Cmd) (code int, stdout, terminal string) {
	t.Helper()
	ptm, pts := openPTY(t)
	defer ptm.Close()
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, pts
	if err := c.Start(); err != nil {
		pts.Close()
		t.Fatalf("start %v: %v", c.Args, err)
	}
	pts.Close() // the child holds its own copy; its exit ends the reads
	var screen bytes.Buffer
	read := make(chan struct{})
	go func() {
		io.Copy(&screen, ptm) // EIO once the child's side is closed
		close(read)
	}()
	err := c.Wait()
	<-read
	code = 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("%v: %v", c.Args, err)
		}
		code = ee.ExitCode()
	}
	return code, out.String(), screen.String()
}
