// Package reconcile revokes in the database the memberships the ERP no
// longer has, and repairs what the incremental runs missed.
//
// A reconcile scans every record the source holds (the full scan of
// verify), compares it with the table, and then:
//
//   - soft-deletes (sets deleted_at on) each live row whose erp_id the feed
//     lacks, under the record's lock and guarded by its version and fencing
//     token: the UPDATE applies only while the row still has the version
//     the comparison read and a token no newer than the lock's, so a run
//     that writes the record back at the same moment wins;
//   - writes the feed's records whose row is absent, soft-deleted (a
//     restore) or at an older version through the syncer's write path
//     (locks, guards);
//   - repairs the rows that hold the feed's version and whose fields or
//     lines differ from the record's (a change the ERP made without a new
//     version, which no run takes), under the record's lock and fencing
//     token, as a change of the row that records an update event
//     (syncer.Syncer.Repair, store.Store.Repair).
//
// Before it deletes anything, a guard compares the scan with the table: an
// empty scan while the table has rows, or more deletions than MaxDelete
// allows, refuses the whole reconcile (ErrRefused): nothing is written. A
// feed that lost half its records to an ERP fault looks exactly like half
// of the memberships being revoked; only an operator can tell (Force).
//
// What it does not promise: the scan is not a snapshot. A record deleted
// from the ERP after the scan passed it, or recreated after, is seen by the
// next reconcile. A run racing a reconcile may write back a record the ERP
// has just deleted (the writer wins); the next reconcile deletes it again.
// A soft-deleted row whose record comes back at a lower version than the
// row's stays deleted: the version guard never lets a row go back.
package reconcile
