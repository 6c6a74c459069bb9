package redisproc

import (
	"errors"
	"testing"
)

// TestStartGivesUpOnAServerThatExits: a redis-server that exits before it
// answers (here: an option it refuses; in the wild: a port taken between
// the search and the bind) is started again on another port, and after
// five exits Start says so instead of waiting out its deadline.
func TestStartGivesUpOnAServerThatExits(t *testing.T) {
	s, err := Start("--no-such-option", "x")
	if err == nil {
		s.Stop()
		t.Fatal("a redis-server with an option it refuses started")
	}
	if !errors.Is(err, ErrExited) {
		t.Fatalf("Start: %v; want the server's exit before it answered", err)
	}
}

// TestStartAndStop: a started server answers, and is gone once stopped.
func TestStartAndStop(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
	select {
	case <-s.exited:
	default:
		t.Fatal("Stop returned before the process exited")
	}
}
