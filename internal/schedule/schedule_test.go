package schedule

import (
	"testing"
	"time"
)

func TestEveryIsOnTheGrid(t *testing.T) {
	s, err := Parse(time.Minute, "")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 10, 0, 59, 999, time.UTC)
	if got := s.Next(at); !got.Equal(time.Date(2026, 1, 1, 10, 1, 0, 0, time.UTC)) {
		t.Fatalf("Next = %s", got)
	}
	// Two replicas a few seconds apart agree on the tick.
	if a, b := s.Next(at.Add(-20*time.Second)), s.Next(at); !a.Equal(b) {
		t.Fatalf("replicas disagree: %s vs %s", a, b)
	}
	if got := s.Next(time.Date(2026, 1, 1, 10, 1, 0, 0, time.UTC)); !got.Equal(time.Date(2026, 1, 1, 10, 2, 0, 0, time.UTC)) {
		t.Fatalf("Next on a tick = %s, want the following one", got)
	}
}

func TestCron(t *testing.T) {
	s, err := Parse(0, "*/15 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Next(time.Date(2026, 1, 1, 10, 7, 0, 0, time.UTC)); !got.Equal(time.Date(2026, 1, 1, 10, 15, 0, 0, time.UTC)) {
		t.Fatalf("Next = %s", got)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		every time.Duration
		expr  string
	}{{0, ""}, {time.Minute, "* * * * *"}, {time.Millisecond, ""}, {0, "not cron"}} {
		if _, err := Parse(c.every, c.expr); err == nil {
			t.Errorf("Parse(%s, %q) accepted", c.every, c.expr)
		}
	}
}
