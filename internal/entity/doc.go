// Package entity declares what erpsync syncs: an Entity is one kind of ERP
// record (memberships, customers, invoices), with its table, its key, its
// change cursor and version, and its typed columns. One declaration drives
// every layer: the page decoder, the validation, the SQL and the table each
// compile from it once, and the hot path runs what they compiled, never a
// lookup by name per field and record.
//
// The built-in Memberships entity is what erpsync syncs without a config
// file; a file declares any others. Load and Parse read one (YAML: the ERP
// connection, the entities, where change events go) and check it whole
// before anything uses it: a mistake is one FileError naming the line and
// what to fix. JSONSchema is the file's JSON Schema, for editors.
//
// What it does not promise: a declaration says what the table holds, not
// that the ERP serves it. A value the ERP sends that does not fit its
// column is refused (the record is quarantined), never truncated, rounded
// or coerced. A file that Parse accepts can still name a source the ERP
// does not have, or properties its records do not carry: that shows when
// erpsync reads them. The JSON Schema checks a file's structure only
// (keys, value types, names, types); Parse checks the rest.
package entity
