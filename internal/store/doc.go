// Package store is erpsync's MySQL side: the migrations runner, the guarded
// writes to memberships, the fenced job checkpoint, the run history and the
// quarantine of invalid records.
//
// Every write to memberships carries the fencing token of the lock under
// which it was made, and an update only lands when the incoming ERP version
// is higher than the row's and the token is not older than the row's. Those
// two rules are checked by the database in the same statement that writes,
// so a writer that paused past its lock, or that carries a replayed older
// version, changes nothing. The UNIQUE index on erp_id catches two inserts of
// one record; the store reports it as ErrDuplicate so the caller can re-read
// and apply the version rule.
//
// An entity's table compiles from the entity: ddl_mysql.go holds every
// MySQL text it becomes and the reading of a live table back from
// information_schema; the planner (PlanEntities) compares the two as
// columns and types. Migrate changes a table only where no value can be
// lost (a new table, a new nullable column, a longer string, a wider
// decimal, a column made nullable) and refuses anything else with a
// *LossyChangeError; it does not promise to carry out such a change, nor
// to notice one made by hand until CheckEntities or the next plan reads
// the table. ApplyEntities plans again under Migrate's named lock, so
// instances migrating at once change each table once.
//
// An entity with children is a document: its row and its lines, one table
// per child with the parent's key columns and erp_version, the parent
// version the lines came with. The statements of a parent write that
// lands and those of its lines run in one transaction, so a reader sees a
// document's row and lines of one version; a write that loses changes no
// line. The store does not keep the order the source served lines in (a
// table holds them by line key), nor check that a document's line keys
// are distinct: two lines of one key are one row, the later one's values.
// Lines are written only with their parent: a parent row removed by hand
// leaves its lines, which an insert of the same key later does not clear.
//
// The one write that lands at the version a row holds is Repair:
// reconcile's repair of a live row whose fields or lines differ from the
// source's copy at that version, under the copy's fencing token, compared
// under a row lock first. It is a change of the row like any other: a new
// life of its key and, with events, an update event.
//
// The store works with MariaDB 10.5+ and MySQL 8: it avoids the row alias
// (MySQL only) and RETURNING (MariaDB only) and uses VALUES() in ON DUPLICATE
// KEY UPDATE, which both accept.
package store
