//go:build !nodemo

package main

import (
	"github.com/erpsync/erpsync/internal/cli"
	"github.com/erpsync/erpsync/internal/demo"
)

// demoCommands adds `erpsync demo`, which links the embedded Redis and MySQL
// servers into the binary. Build with -tags nodemo to leave them out (the
// Docker image does: about 50 MiB less memory per process).
func demoCommands() []cli.Command { return []cli.Command{demo.Command()} }
