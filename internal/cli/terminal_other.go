//go:build !linux && !darwin && !freebsd && !netbsd && !openbsd

package cli

import "os"

// isTTY is a character device, on systems without termios.
func isTTY(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
