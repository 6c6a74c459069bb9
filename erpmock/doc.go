// Package erpmock is a mock of the ERP membership feed described in
// api/erp-api.yaml (api.ERPOpenAPI), served by an http.Handler that tests
// can start in-process (httptest.NewServer(erpmock.New(opt))) and that
// cmd/erpmock serves as a binary. It serves that document at /openapi.yaml,
// and its tests validate its answers against it, faults included.
//
// The feed holds Options.Records deterministic records: the same Seed and
// Records give the same records, byte for byte. Record i (from 0) has the
// erp_id "M" followed by i+1 zero-padded to at least seven digits, and an
// updated_at of 2025-01-01T00:00:00Z plus i/4 milliseconds, so every four
// consecutive records share one updated_at and page boundaries fall inside
// ties. Pages are ordered by (updated_at, erp_id) and the cursor is a keyset
// over that pair, so a client that pages while nothing changes sees every
// record exactly once.
//
// Options.Face serves the same records under another API instead:
// FaceV2 is a homegrown API shaped differently (its own path, parameter
// names, envelope, field names and status values, offset or token paging,
// optionally without a version), the test bed of a REST source configured
// without code.
//
// Beside the spec's endpoints, GET /v1/typed/contracts (and its /count)
// serves the same records as contracts, a typed entity (ContractOf): a
// composite key split from the erp_id, a status code, a decimal(12,2)
// amount, a decimal balance and an int64 serial past 2^53 (as JSON numbers
// on some records and strings on others), a date, a nullable date-time and
// a nested object; paging, cursors and faults are those of the spec's
// endpoint, and every flaw of an invalid record stays a flaw. GET
// /v1/typed/orders serves them as documents (OrderOf): each contract with
// an array of lines that its erp_id and version determine (OrderLines), so
// that lines come, go and change from one version to the next.
//
// Faults are switches that make the mock misbehave the way the real ERP is
// allowed to: latency, 5xx answers, 429 with Retry-After, a global request
// rate, truncated bodies, hung responses, a record twice in one page, an
// older version of a record after the newer one, invalid records, and
// records that change while clients page. A changed record gets version+1
// and an updated_at newer than every other record, so it moves to the end
// of the feed and a client that keeps paging meets it again.
//
// Truth returns the latest version of every valid record, which is what a
// correct consumer must end up holding. The /admin endpoints expose the
// same controls over HTTP for harnesses that drive the binary; they and
// /openapi.yaml are subject neither to faults nor to the token.
//
// What the mock does NOT promise: it is not the ERP. Its records are
// plausible, not realistic; fault decisions come from one seeded generator
// shared by all clients, so they are reproducible only for a single client
// issuing requests in a fixed order; and every record lives in memory
// (about 60 bytes each, so a million records take some 60 MB).
package erpmock
