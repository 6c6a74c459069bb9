// Command erpsync copies an ERP's memberships into MySQL idempotently. See
// docs/configuration.md for its commands and settings.
package main

import (
	"context"
	"os"
	"runtime/debug"

	"github.com/erpsync/erpsync/internal/cli"
	"github.com/erpsync/erpsync/internal/loadtest"
)

func main() {
	// A sync's heap is small and short-lived: collecting at 200% growth
	// instead of 100% halves the collections for about 15 MiB more peak
	// RSS (docs/performance.md). GOGC set in the environment wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(200)
	}
	extra := append([]cli.Command{loadtest.Command()}, demoCommands()...)
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr, extra...))
}
