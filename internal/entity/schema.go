package entity

import (
	"bytes"
	_ "embed"
)

//go:embed schema.json
var schema []byte

// JSONSchema returns the JSON Schema (draft 2020-12) of the config file,
// for an editor to check a file while it is typed: every key, the enums
// and the patterns of names and types. It checks the file's structure;
// Parse checks the rest (a key column that is declared, a table no other
// entity takes, values that fit their columns).
func JSONSchema() []byte { return bytes.Clone(schema) }
