package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/testenv"
)

// TestEventChecksRefuseAWrongOutbox: the checks that stand between a
// measurement and its report fail on an outbox short of an event, on an
// event at a version no row has, and on a sink short of an event.
func TestEventChecksRefuseAWrongOutbox(t *testing.T) {
	if testing.Short() {
		t.Skip("builds erpsync and runs a backfill and relays")
	}
	bin, err := testenv.Build(t.TempDir(), "./cmd/erpsync")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b, cfg := testBench(t, Config{Bin: bin, Records: 600})
	ty, err := b.startTyped(ctx, cfg.Records)
	if err != nil {
		t.Fatal(err)
	}
	defer ty.close()
	on, err := ty.eventsTarget()
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.backfillEvents(ctx, ty, on)
	if err != nil {
		t.Fatalf("a right outbox: %v", err)
	}
	exec := func(q string) {
		t.Helper()
		if _, err := b.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	exec("CREATE TABLE saved_events AS SELECT * FROM erpsync_events")
	restore := func() {
		exec("DELETE FROM erpsync_events")
		exec("INSERT INTO erpsync_events SELECT * FROM saved_events")
	}
	for _, c := range []struct{ name, break_ string }{
		{"an event missing", "DELETE FROM erpsync_events ORDER BY id LIMIT 1"},
		{"an event at a version no row has", "UPDATE erpsync_events SET version = version + 100 ORDER BY id DESC LIMIT 1"},
		{"an update instead of an insert", "UPDATE erpsync_events SET op = 'update' ORDER BY id LIMIT 1"},
	} {
		exec(c.break_)
		if err := b.checkOutbox(ctx, ty, r); err == nil || !strings.Contains(err.Error(), "the outbox") {
			t.Errorf("%s: check = %v, want a refusal", c.name, err)
		}
		restore()
	}
	if err := b.checkOutbox(ctx, ty, r); err != nil {
		t.Fatalf("restored outbox: %v", err)
	}
	hook, stop, err := ty.startHook()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if _, err := b.relayOnce(ctx, hook, 100); err != nil {
		t.Fatalf("relay: %v", err)
	}
	// A sink that lost one event.
	count := hook.count
	hook.count = func(ctx context.Context) (int64, string, error) {
		n, note, err := count(ctx)
		return n - 1, note, err
	}
	if _, err := b.relayOnce(ctx, hook, 100); err == nil || !strings.Contains(err.Error(), "received 599 of 600") {
		t.Errorf("relay into a sink short of an event = %v, want a refusal", err)
	}
}
