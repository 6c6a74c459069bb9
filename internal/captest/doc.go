// Package captest runs a real OData v4 server for tests: the SAP CAP
// project in ./cap, served by @sap/cds on Node.js with an in-memory SQLite
// database (the sql.js driver, no native build). It exists so that erpsync's
// OData source is tested against the server it will meet in production
// rather than against a mock that shares the source's own reading of the
// protocol.
//
// Start copies the project into the test's temporary directory (linking
// node_modules), writes N deterministic records for a seed as the CSV seed
// data, starts cds-serve on a free loopback port and stops its process
// group when the test ends. The Server it returns has the entity set URLs,
// the basic-auth credentials, and methods that PATCH, POST and DELETE
// records while a sync pages, and that read back every record as the
// reference a test compares the database with.
//
// The service is ErpService at /odata/v4/erp with two entity sets:
// Memberships (key MembershipID; LastChangeDateTime, an Edm.DateTimeOffset
// stamped by the server on insert and on every update, is its only change
// marker) and VersionedMemberships (the same plus ChangeCounter, an
// Edm.Int32 that every update increments). The page limit, reliable
// (key-based) paging and authentication are Options.
//
// A second service, SalesService at /odata/v4/sales, holds typed entities
// seeded from cap/db/data/sales-*.csv: Customers (a composite key
// CompanyCode and Customer, Decimal(15,2), Int64 values past 2^53,
// Boolean, Date, nullable and bounded strings, a structured Address, a
// ChangeCounter) and SalesOrders with a composition of Items, both with
// CAP's managed modifiedAt. The project turns on
// cds.features.ieee754compatible, so Int64 and Decimal values are served
// as exact strings (Decimal padded to its scale); ErpService has neither
// type and is served as before. Server.Customers and Server.SalesOrders
// (TypedSet) read and change them as JSON objects with exact numbers.
//
// A third service, OrdersService at /odata/v4/orders, holds documents:
// SalesOrders (key OrderNo; ChangedAt stamped and ChangeCounter bumped on
// every change) with a composition of Items (key ItemNo within the order;
// Decimal quantities and amounts, a UnitPrice of up to 28 digits served as
// text, a nullable Batch), seeded with SeedOrders. CAP's page limit
// applies to the orders only: $expand=Items brings every line of each
// order, with no nested nextLink. Server.Orders reads the documents back
// whole, creates and deletes orders and revises one in a deep PATCH that
// inserts, updates and deletes its lines at once.
//
// The project also loads @cap-js-community/odata-v2-adapter, which serves
// every service again as OData V2 under /odata/v2/ (V2 turns a URL of
// the V4 services into its V2 twin): EDMX 1.0 $metadata, {"d":{"results":
// [...]}} JSON, /Date(ms)/ values, __next links of the same page limit.
// A test reads through V2 and changes the records through V4.
//
// The package needs node (Node.js 20 or later) in PATH and the project's
// node_modules, installed with `make cap-deps` (npm ci); without them Start
// fails the test with a line saying so. It does not skip. It promises
// nothing about CAP beyond what its own tests assert (captest_test.go
// documents the OData behaviour the source relies on), and it has no delta
// or change tracking: a DELETE leaves no trace in the feed.
package captest
