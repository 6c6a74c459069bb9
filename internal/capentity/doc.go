// Package capentity tests erpsync's typed entities end to end: the built
// erpsync binary, driven by a config file, syncs the SalesService of a real
// SAP CAP server (internal/captest) into the real MariaDB under real Redis
// locks. The file `erpsync discover` writes from CAP's $metadata is used as
// it is: migrate, run and verify sync Customers (a composite key, decimals,
// Int64 past 2^53, booleans, dates, NULLs, non-ASCII strings) and
// SalesOrders in one command, and each table is compared with CAP value for
// value. Runs, backfills and a run of one entity overlap while the test
// PATCHes, POSTs and DELETEs customers; a run killed with SIGKILL resumes;
// one entity set is read as two sources, one per company code; and bad
// input (values that do not fit their column, a bad file, a table changed
// behind erpsync's back) ends as the docs say.
//
// Documents are synced from OrdersService: sales orders whose lines (a
// composition, read with $expand) go to a child table. While CAP revises
// orders in deep PATCHes that add, change and remove lines, and creates
// and deletes orders, runs and a backfill overlap and a run is killed
// mid-write; the header table then equals CAP row for row, the child table
// line for line, and every change event carries the lines of its version.
//
// It compares text: every column is read back as MySQL's text of it and
// CAP's values are decoded with json.Number, so no number passes through a
// float64 on either side. It promises nothing about timing.
//
// The tests need the CAP project's node_modules (`make cap-deps`) and
// Node.js 20 or later; without them they fail with a line saying so.
package capentity
