package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// signalled is the cause of a command's context that SIGINT or SIGTERM
// ended.
type signalled struct{ sig syscall.Signal }

func (e signalled) Error() string { return "stopped by " + signalName(e.sig) }

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// withSignals returns ctx ended by SIGTERM or SIGINT, with a signalled
// cause that names the signal, and stop, which lets the signals go.
func withSignals(ctx context.Context) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	stopped := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			cancel(signalled{sig.(syscall.Signal)})
		case <-stopped:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(stopped)
		cancel(nil)
	}
}

// interruptedError is a command a signal stopped before it finished: exit
// 128 + the signal's number (130 for SIGINT, 143 for SIGTERM), with one
// line that says what was done and how to resume.
type interruptedError struct {
	sig  syscall.Signal
	what string // what was done and how to resume
}

func (e interruptedError) Error() string {
	return fmt.Sprintf("interrupted by %s: %s", signalName(e.sig), e.what)
}

func (e interruptedError) code() int { return 128 + int(e.sig) }

// interrupted returns err, or, when a signal ended ctx and err is nil or
// the signal's own doing, the interruptedError that says what (done, and
// how to resume). A run that failed for its own reasons (records that
// failed, too many invalid) stays failed.
func interrupted(ctx context.Context, err error, what string) error {
	var sig signalled
	if !errors.As(context.Cause(ctx), &sig) {
		return err
	}
	// The signal's own doing: an error of the ended context, or its cause
	// itself (context.Cause of a context derived from ctx).
	if err != nil && !errors.Is(err, context.Canceled) && !errors.As(err, new(signalled)) && !errors.As(err, new(depError)) {
		return err
	}
	return interruptedError{sig: sig.sig, what: what}
}
