//go:build nodemo

package main

import "github.com/erpsync/erpsync/internal/cli"

// demoCommands is empty in a build without the embedded servers.
func demoCommands() []cli.Command { return nil }
