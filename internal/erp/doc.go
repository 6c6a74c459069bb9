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
// Config.Shape reads an API shaped differently without code: its
// endpoints, parameter names, cursor or offset paging and where its bodies
// keep the records, the next cursor and the count (JSON paths). The same
// hand-written decoder walks those paths, skipping the rest, and validates
// the items as above; the spec's own shape keeps its dedicated decoder.
// Offset paging skips a record whenever an earlier one changes while the
// pages are read (it moves to the end of the feed): prefer a cursor.
//
// What the client does NOT promise: it does not deduplicate. The feed is
// at-least-once, so a page can hold the same erp_id twice, an older
// version after a newer one, and records seen on earlier pages; the
// consumer keeps the highest version. It also does not check the ordering
// of the feed, nor that times fit a database column (year 0001 is valid
// RFC 3339).
package erp
