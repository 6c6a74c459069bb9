//go:build nodemo

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/erpsync/erpsync/internal/cli"
)

// demoBinary is the full build that `make build` writes beside this one:
// erpsync with the demo's embedded servers, which this build leaves out.
const demoBinary = "erpsync-demo"

// demoCommands is `erpsync demo` in a build without the embedded servers:
// it runs erpsync-demo from this binary's directory in this process's
// place, or says how to get it.
func demoCommands() []cli.Command {
	return []cli.Command{{
		Name:    "demo",
		Summary: "the whole job on embedded servers (ERP, Redis, MySQL): runs " + demoBinary + " from beside this binary (make build writes it; make demo runs it)",
		Run: func(_ context.Context, args []string, _, _ io.Writer) error {
			self, err := os.Executable()
			if err == nil {
				path := filepath.Join(filepath.Dir(self), demoBinary)
				if _, err = os.Stat(path); err == nil {
					err = syscall.Exec(path, append([]string{path, "demo"}, args...), os.Environ())
					return fmt.Errorf("run %s: %w", path, err)
				}
			}
			return cli.UsageError(fmt.Errorf("demo: this build of erpsync leaves the demo's embedded servers out (-tags nodemo) and finds no %s beside it; run make demo, or make build, which writes bin/%s", demoBinary, demoBinary))
		},
	}}
}
