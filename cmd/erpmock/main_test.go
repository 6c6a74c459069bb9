package main

import (
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
)

func TestParse(t *testing.T) {
	env := map[string]string{
		"ERPMOCK_RECORDS":    "50",
		"ERPMOCK_ERROR_RATE": "0.2",
		"ERPMOCK_LATENCY":    "5ms",
		"ERPMOCK_TOKEN":      "from-env",
		"ERPMOCK_FACE":       "v2",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	addr, opt, err := parse([]string{"--addr", "127.0.0.1:0", "--records", "70", "--seed", "9", "--hang", "2s",
		"--rate-limit-rate", "0.1", "--retry-after", "3", "--truncate-rate", "0.05", "--hang-rate", "0.01",
		"--duplicate-rate", "0.3", "--stale-rate", "0.4", "--invalid-rate", "0.02", "--change-rate", "2", "--max-rate", "100", "--no-rev"}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := erpmock.Faults{Latency: 5 * time.Millisecond, ErrorRate: 0.2, RateLimitRate: 0.1, RetryAfter: 3,
		TruncateRate: 0.05, HangRate: 0.01, Hang: 2 * time.Second, DuplicateRate: 0.3, StaleRate: 0.4,
		InvalidRate: 0.02, ChangeRate: 2, MaxRate: 100}
	if addr != "127.0.0.1:0" || opt.Records != 70 || opt.Seed != 9 || opt.Token != "from-env" || opt.Faults != want ||
		opt.Face != erpmock.FaceV2 || !opt.NoRev {
		t.Errorf("addr %q, options %+v", addr, opt)
	}
	for _, args := range [][]string{{"--error-rate", "1.5"}, {"--records", "-1"}, {"--nope"}, {"extra"}, {"--face", "v3"}} {
		if _, _, err := parse(args, lookup); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	env["ERPMOCK_MAX_RATE"] = "fast"
	if _, _, err := parse(nil, lookup); err == nil {
		t.Error("a bad ERPMOCK_MAX_RATE accepted")
	}
}
