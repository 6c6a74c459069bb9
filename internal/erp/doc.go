// Package erp is the client of the ERP membership feed of the contract
// api/erp-api.yaml (api.ERPOpenAPI): it pages memberships ordered by
// (updated_at, erp_id) and counts them.
//
// The client absorbs the feed's transient failures. An attempt that ends in
// a 5xx, 408 or 429 answer, a network error, its own Timeout, a body cut
// short or a 200 whose body does not parse is retried with exponential
// backoff and full jitter, waiting at least the Retry-After of the answer
// (capped by MaxRetryAfter), at most MaxRetries times and never past the
// caller's context. A 401 or 403 (ErrUnauthorized), a 400 (ErrBadRequest)
// and a body over MaxBodyBytes (ErrTooLarge) are never retried. The token
// never appears in errors.
//
// Each item of a page is validated against the Membership schema: required
// fields and their JSON types (version must be written as an integer >= 1),
// lengths in characters, the erp_id pattern, the status enum, RFC 3339
// date-times and ends_at not before starts_at; unknown fields are allowed.
// An item that breaks a rule goes to Page.Invalid with every rule it breaks
// and its raw JSON, and the rest of the page is still usable. The page
// envelope is strict: an object with a data array and a next_cursor string
// or null, or the attempt fails and is retried. The decoder is written by
// hand for this one shape, since decoding is the client's hot path.
//
// A Mapping (--erp-map, --erp-status-map) lets a source serve the fields
// under its own property names and status values; its items are decoded
// by the same reader and held to the same rules, with two additions for
// such sources: dates (YYYY-MM-DD) for starts_at and ends_at, and a
// version derived from updated_at (microseconds) when the source has
// none. A Getter holds the request machinery (authentication: bearer,
// basic or OAuth 2.0 client credentials; retries; timeouts; the body cap;
// the shared rate; hooks) that the Client and the OData source share.
//
// Config.Shape reads an API shaped differently without code: its
// endpoints, parameter names, cursor or offset paging and where its bodies
// keep the records, the next cursor and the count (JSON paths). The same
// hand-written decoder walks those paths, skipping the rest, and validates
// the items as above; the spec's own shape keeps its dedicated decoder.
// Offset paging skips a record whenever an earlier one changes while the
// pages are read (it moves to the end of the feed): prefer a cursor.
//
// Compile turns an entity of the config file (entity.Entity, one of its
// sources) into a Schema, the typed decoder of its records; Config.Schema
// (or the OData source's) reads a feed of them instead of memberships.
// The same hand-written reader walks each item, matching member names
// with a list compiled once per object level (dotted paths read into
// nested objects), and checks every column by its type: string(N) in
// characters, valid UTF-8, no control characters; text up to 65,535
// bytes; int32 and int64 from a JSON integer or an integer string,
// range-checked on the digits; decimal(P,S) from a JSON number or a
// numeric string, exponents included, normalised by moving digits and
// stored as canonical text padded to the scale ("1234.50", never
// "-0.00"); bool from true or false; date YYYY-MM-DD and datetime (RFC
// 3339 with a zone, stored in UTC truncated to the millisecond) in the
// years 1000-9999; json any value, stored compact. No number passes
// through a float64. A column with values stores the value its source
// value maps to, and a value not listed is invalid; a nullable column
// takes a missing or null value (or a missing parent object) as NULL. The
// columns a source sets are constants. A record's Vals hold its values in
// column order, its ErpID is the key text (entity.KeyText), its Version
// the version property (an integer, or an integer string) or updated_at
// in microseconds. An item that breaks a rule is invalid with a reason
// naming each column that failed, and carries its key text only when
// every key part was valid.
//
// An entity with children (a document: a header and its lines) reads each
// child's collection, a JSON array of objects at the child's dotted from
// path, into Record.Children, one entity.Lines per child, each line's
// values in the child's column order, checked as a header's columns are
// (not_before within the line). A record is read whole or not at all: a
// collection that is missing or null (never read as "no lines", which
// would delete them all), not an array, a line that is not an object or
// has a value that does not fit, or two lines with one key (strings
// compared as the child table's index does, trailing spaces ignored) make
// the whole record invalid; an empty array is zero lines. The reason names
// the line and its key ("items[3] (item_no 30): quantity: ..."), at most
// three lines of a collection, then how many more do not fit.
//
// What the client does NOT promise: it does not deduplicate. The feed is
// at-least-once, so a page can hold the same erp_id twice, an older
// version after a newer one, and records seen on earlier pages; the
// consumer keeps the highest version. It also does not check the ordering
// of the feed, nor that times fit a database column (year 0001 is valid
// RFC 3339).
package erp
