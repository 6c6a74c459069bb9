package cli

import (
	"io"
	"os"
)

// IsTerminal reports whether w writes to a terminal: an *os.File whose
// descriptor is a tty, found through the writers that wrap it (the
// secret-redacting stderr) by their Unwrap method. /dev/null and files are
// not terminals, though /dev/null is a character device.
func IsTerminal(w io.Writer) bool {
	for w != nil {
		if f, ok := w.(*os.File); ok {
			return isTTY(f)
		}
		u, ok := w.(interface{ Unwrap() io.Writer })
		if !ok {
			return false
		}
		w = u.Unwrap()
	}
	return false
}

// Colour reports whether lines written to w may carry ANSI colours: w is a
// terminal and NO_COLOR (https://no-color.org) is unset or empty.
func Colour(w io.Writer) bool { return os.Getenv("NO_COLOR") == "" && IsTerminal(w) }
