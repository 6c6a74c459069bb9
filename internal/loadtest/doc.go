// Package loadtest is `erpsync loadtest`: it starts the mock ERP in this
// process and several erpsync processes against it at once (one run and
// overlapping backfills, each reading the whole feed), samples the table
// while they run, verifies the table against the feed at the end and writes
// a JSON and a self-contained HTML report.
//
// What it measures from the outside, without any hook in the syncer:
//
//   - throughput: the growth of the memberships table (COUNT(*) every
//     500 ms), the records erpmock serves each process, and each process's
//     own report;
//   - latency: the serve-to-write latency of every row, from the moment
//     erpmock began the last write of the first whole page that carried the row's
//     final version to any process, to the row's updated_at, which the
//     database sets when the statement that wrote the version starts. It is
//     not the syncer's per-record processing time: it leaves out the ERP
//     request and the commit, and a record served to several processes
//     counts once, from its first serve;
//   - per process: exit code, run report, peak RSS (VmHWM from /proc: the
//     rusage maxrss of a child started by a Go process includes the
//     parent's RSS, see RSSWatch), CPU time and the erpmock-side latency of
//     its API requests.
//
// It does not promise a quiet machine: the mock, the sampler and every
// process share the CPUs, as they would not in production.
package loadtest
