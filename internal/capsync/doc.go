// Package capsync tests erpsync's OData source end to end: real erpsync
// processes sync a real OData v4 server (SAP CAP, internal/captest) into
// the real MariaDB under real Redis locks. A backfill of 20,000 records;
// a run while records change; runs and a backfill overlapping; a run
// killed with SIGKILL and resumed; verify at the end; a wrong password and
// an unreachable service; the version derived from LastChangeDateTime;
// a bearer token, a mapped ChangeCounter version, server paging over
// CAP's reliable next links, and a schedule. Reconciles against records
// DELETEd in CAP: soft deletes, records POSTed again and restored, the
// deletion guard with --dry-run and --force, and runs racing a reconcile.
// It also shows, page by page against CAP, why keyset paging is the
// default: CAP's offset next links skip a record when an earlier one
// changes during the read.
//
// The tests need the CAP project's node_modules (`make cap-deps`) and
// Node.js 20 or later; without them they fail with a line saying so.
package capsync
