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
// The store works with MariaDB 10.5+ and MySQL 8: it avoids the row alias
// (MySQL only) and RETURNING (MariaDB only) and uses VALUES() in ON DUPLICATE
// KEY UPDATE, which both accept.
package store
