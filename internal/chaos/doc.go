// Package chaos is the chaos suite of `make chaos`: scenarios that break
// real erpsync OS processes, the real MariaDB and Redis and the (mock) ERP
// while they work, then check that the table equals the ERP's truth.
//
// Every scenario runs against its own database and lock prefix (or its own
// redis-server), watches the table while it runs to prove that no row's
// erp_version ever goes down, and ends with `erpsync verify` matching the
// feed and the table holding exactly one row per erp_id at the truth's
// version. The faults are injected by real means: SIGKILL, SIGSTOP past the
// lock TTL, a redis-server killed and started again empty, KILL CONNECTION
// of erpsync's MySQL sessions, and erpmock's fault switches.
//
// The tests carry the build tag chaos, so `go test ./...` leaves them out:
//
//	go test -race -tags chaos -count=1 -v -timeout 10m ./internal/chaos/
//
// At the end the suite prints a table (scenario, faults injected, runs,
// records, lost, duplicates, result) and writes it as markdown to
// chaos-report/chaos-report.md at the module root, or to the directory
// named by ERPSYNC_CHAOS_OUT.
//
// What the suite does not show: that erpsync survives every interleaving.
// The faults land where timing puts them; a scenario asserts the outcomes
// the contract allows (exit 0 or 1 under a fault, exit 2 with nothing
// written when a dependency is down at start) and the end state, never how
// long anything took.
package chaos
