package bench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/bench"
	"github.com/erpsync/erpsync/internal/testenv"
)

// TestEventsAndRelay runs the events and relay rows on a tiny feed: the
// rows work and check what they measure, not how fast they are.
func TestEventsAndRelay(t *testing.T) {
	if testing.Short() {
		t.Skip("builds erpsync and runs several backfills and relays")
	}
	bin, err := testenv.Build(t.TempDir(), "./cmd/erpsync")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1500
	var log bytes.Buffer
	res, err := bench.Run(context.Background(), bench.Config{
		Bin: bin, MySQLDSN: benchDSN(t), RedisAddr: testenv.RedisAddr(), NATSURL: testenv.NATSURL(),
		Records: n, Repeat: 2, Only: []string{bench.Events, bench.Relay}, Log: &log,
	})
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, log.String())
	}
	ev := res.Events
	if ev == nil || ev.On == nil || ev.Off == nil || ev.On.Report.Inserted != n || ev.Off.Report.Inserted != n {
		t.Fatalf("events = %+v", ev)
	}
	if len(ev.Rounds) != 2 || !ev.Rounds[0].OnFirst || ev.Rounds[1].OnFirst || len(ev.On.Rounds) != 2 {
		t.Errorf("rounds = %+v, on's rounds %v: want two, events on first in the first", ev.Rounds, ev.On.Rounds)
	}
	if ev.RelayStart <= 0 {
		t.Errorf("relay start = %v, want the wall time of a relay with nothing pending", ev.RelayStart)
	}
	if got, want := len(ev.Relay), 2*len(bench.RelayBatchSizes); got != want {
		t.Fatalf("%d relay rows, want %d", got, want)
	}
	for _, r := range ev.Relay {
		if r.Records != n || r.PerSecond <= 0 || len(r.Rounds) != 2 {
			t.Errorf("relay row %+v", r)
		}
	}
	goals := res.Goals()
	if len(goals) != 1 || goals[0].Value != ev.Ratio() {
		t.Errorf("goals = %+v, want the events' alone at %.2f", goals, ev.Ratio())
	}
	var md bytes.Buffer
	res.Markdown(&md)
	for _, want := range []string{"| typed backfill (12 columns), events on |", "| relay --once to a webhook, --batch-size 100 |",
		"| relay --once to NATS JetStream, --batch-size 1000 |",
		"| erpsync relay --once (nothing pending: ", "| typed backfill (12 columns), events on / off |", "(on first), "} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}
