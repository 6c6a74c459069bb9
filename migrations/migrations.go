// Package migrations holds erpsync's versioned SQL migrations, embedded so
// the binary can apply them with `erpsync migrate`.
//
// Files are named NNN_name.up.sql and NNN_name.down.sql. Statements in a file
// are separated by a semicolon at the end of a line. Every statement must be
// safe to run again (IF NOT EXISTS), because MySQL commits DDL implicitly and
// a crash between a statement and the bookkeeping row must not wedge the
// schema.
package migrations

import "embed"

// FS holds every *.sql file of this directory.
//
//go:embed *.sql
var FS embed.FS
