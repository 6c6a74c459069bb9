// Package e2e drives the built erpsync binary as separate OS processes
// against the real MariaDB and Redis and an in-process erpmock: overlapping
// runs and backfills, processes killed with SIGKILL or frozen with SIGSTOP
// past their lock TTL, and a watcher that fails the test if any row's
// erp_version ever goes down. The harness (database, mock, processes,
// watcher, truth check) is internal/proctest's Env.
package e2e
