package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestFlagWinsOverEnvironment(t *testing.T) {
	t.Setenv("ERPSYNC_WORKERS", "7")
	t.Setenv("ERPSYNC_LOCK_TTL", "9s")
	var s settings
	fs := newFlagSet("t", &bytes.Buffer{})
	s.connFlags(fs)
	s.syncFlags(fs)
	if err := parse(fs, []string{"--workers", "3"}); err != nil {
		t.Fatal(err)
	}
	if s.Workers != 3 || s.LockTTL != 9*time.Second {
		t.Fatalf("workers %d (want the flag's 3), lock ttl %s (want the environment's 9s)", s.Workers, s.LockTTL)
	}
}

func TestBadEnvironmentNamesTheVariable(t *testing.T) {
	t.Setenv("ERPSYNC_PAGE_SIZE", "many")
	var s settings
	fs := newFlagSet("t", &bytes.Buffer{})
	s.syncFlags(fs)
	err := parse(fs, nil)
	if err == nil || !strings.Contains(err.Error(), "ERPSYNC_PAGE_SIZE") {
		t.Fatalf("parse = %v, want an error naming ERPSYNC_PAGE_SIZE", err)
	}
}

func TestUsageErrorsExit2WithoutConnecting(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"nope"},
		{"run", "--workers", "0"},
		{"run", "--page-size", "5000"},
		{"run", "--log-format", "xml"},
		{"run", "--erp-rate", "fast"},
		{"run", "stray-argument"},
		{"backfill", "--since", "yesterday"},
		{"backfill", "--since", "2025-01-02T00:00:00Z", "--until", "2025-01-01T00:00:00Z"},
		{"schedule"},
		{"schedule", "--every", "1m", "--cron", "* * * * *"},
		{"run", "--mysql-dsn", "not a dsn"},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), args, &out, &errb)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want 2 (stderr: %s)", args, code, errb.String())
		}
		if len(args) > 0 && errb.Len() == 0 {
			t.Errorf("%v: no message on stderr", args)
		}
	}
}

func TestBar(t *testing.T) {
	got := bar(50, 200, 10)
	if !strings.Contains(got, "25.0%") || !strings.Contains(got, "50/200") || !strings.Contains(got, "ETA 15s") {
		t.Fatalf("bar = %q", got)
	}
	if got := bar(7, -1, 3); !strings.Contains(got, "7 records") {
		t.Fatalf("bar without a total = %q", got)
	}
}
