package e2e

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/proctest"
)

// TestAnUnreachableDatabaseIsOneBoundedLine: a closed port and a blackhole
// (a listener that accepts the TCP connection and never sends the
// database's handshake, as a dropped route or a proxy with nothing behind
// it does) are each one line on stderr, exit 2, that says the connection
// was refused or timed out, where, and after how long; no driver log
// lines. On MySQL the lines name the remedy too.
func TestAnUnreachableDatabaseIsOneBoundedLine(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 10, Seed: 61})
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close() // never accepted: the kernel completes the handshake, nobody answers
	holeAddr := hole.Addr().String()

	type connectCase struct {
		args  []string
		want  string
		bound time.Duration
	}
	cases := []connectCase{
		{[]string{"run", "--mysql-dsn", "root@tcp(" + closedAddr + ")/erpsync"},
			"erpsync: mysql at " + closedAddr + ": connection refused: nothing listens there; check the host and port of --mysql-dsn", 5 * time.Second},
		{[]string{"migrate", "--migrate-dsn", "root@tcp(" + closedAddr + ")/erpsync"},
			"erpsync: mysql at " + closedAddr + ": connection refused: nothing listens there; check the host and port of --migrate-dsn", 5 * time.Second},
		{[]string{"run", "--mysql-dsn", "root@tcp(" + holeAddr + ")/erpsync"},
			"erpsync: mysql at " + holeAddr + ": connection timed out after 5s: no MySQL answered; check the host and port of --mysql-dsn and that no firewall drops the packets (timeout= in the DSN sets the bound)", 5 * time.Second},
		{[]string{"verify", "--mysql-dsn", "root@tcp(" + holeAddr + ")/erpsync?timeout=2s"},
			"erpsync: mysql at " + holeAddr + ": connection timed out after 2s: no MySQL answered;", 2 * time.Second},
	}
	if e.Postgres {
		pg := func(addr string) string { return "postgres://root@" + addr + "/erpsync?sslmode=disable" }
		cases = []connectCase{
			{[]string{"run", "--postgres-dsn", pg(closedAddr)}, "erpsync: postgresql at " + closedAddr + ": connection refused", 5 * time.Second},
			{[]string{"migrate", "--migrate-dsn", pg(closedAddr)}, "erpsync: postgresql at " + closedAddr + ": connection refused", 5 * time.Second},
			{[]string{"run", "--postgres-dsn", pg(holeAddr)}, "erpsync: postgresql at " + holeAddr + ": connection timed out after 5s", 5 * time.Second},
			{[]string{"verify", "--postgres-dsn", pg(holeAddr) + "&connect_timeout=2"}, "erpsync: postgresql at " + holeAddr + ": connection timed out after 2s", 2 * time.Second},
		}
	}
	for _, c := range cases {
		start := time.Now()
		r := e.Run(context.Background(), c.args...)
		took := time.Since(start)
		lines := proctest.Lines(r.Stderr)
		if r.Code != 2 || len(lines) != 1 || !strings.HasPrefix(lines[0], c.want) {
			t.Errorf("%v: exit %d, stderr %q;\nwant exit 2 and one line starting %q", c.args, r.Code, r.Stderr, c.want)
			continue
		}
		// Bounded: the connect timeout and the process's start, not the
		// 30 s that the driver's own retries took (generous for a loaded
		// machine; not a measurement).
		if took > c.bound+15*time.Second {
			t.Errorf("%v: took %v, want about %v", c.args, took, c.bound)
		}
		t.Logf("%v (%v): %s", c.args, took.Round(time.Millisecond), lines[0])
	}
}
