// Command erpsync copies an ERP's memberships into MySQL idempotently. See
// the README and shared/spec/cli.md.
package main

import (
	"context"
	"os"

	"github.com/erpsync/erpsync/internal/cli"
	"github.com/erpsync/erpsync/internal/loadtest"
)

func main() {
	extra := append([]cli.Command{loadtest.Command()}, demoCommands()...)
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr, extra...))
}
