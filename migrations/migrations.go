// Package migrations holds erpsync's versioned SQL migrations, embedded so
// the binary can apply them with `erpsync migrate`.
//
// Files are named NNN_name.up.sql and NNN_name.down.sql: MySQL's in this
// directory, PostgreSQL's in postgres/, with the same versions and names.
// Statements in a file are separated by a semicolon at the end of a line.
// Every statement must be safe to run again (IF NOT EXISTS), because MySQL
// commits DDL implicitly and a crash between a statement and the
// bookkeeping row must not wedge the schema. PostgreSQL runs a migration's
// statements and its bookkeeping row in one transaction.
package migrations

import "embed"

// FS holds every *.sql file of this directory and of postgres/.
//
//go:embed *.sql postgres/*.sql
var FS embed.FS

// PostgresDir is the directory of FS that holds PostgreSQL's migrations.
const PostgresDir = "postgres"
