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

func TestERPSourceFlagErrorsNameTheFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--erp-kind", "soap"}, `--erp-kind "soap": want rest or odata`},
		{[]string{"--erp-map", "erp_id=No,colour=Red"}, `--erp-map: unknown field "colour"`},
		{[]string{"--erp-map", "erp_id=No,erp_id=Key"}, "--erp-map: field erp_id mapped twice"},
		{[]string{"--erp-map", "member_id="}, "--erp-map: field member_id mapped to an empty property"},
		{[]string{"--erp-status-map", "active=LIVE"}, `--erp-status-map: status map: "active" maps to "LIVE"`},
		{[]string{"--erp-kind", "odata", "--erp-paging", "offset"}, `--erp-paging "offset": want keyset or server`},
		{[]string{"--erp-paging", "server"}, `--erp-paging "server": only for --erp-kind odata`},
		{[]string{"--erp-kind", "odata", "--erp-url", "http://h/odata/Set?$top=1"}, "--erp-url: erp: entity set URL"},
		{[]string{"--erp-password", "pw"}, "--erp-password without --erp-username"},
		{[]string{"--erp-oauth-client-id", "c"}, "OAuth needs --erp-oauth-token-url, --erp-oauth-client-id and --erp-oauth-client-secret"},
		{[]string{"--erp-token", "t", "--erp-username", "u"}, "more than one ERP authentication"},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"run", "--mysql-dsn", "root@tcp(127.0.0.1:1)/none"}, c.args...)
		if code := Main(context.Background(), args, &out, &errb); code != ExitUsage || !strings.Contains(errb.String(), c.want) ||
			strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line with %q", c.args, code, errb.String(), c.want)
		}
	}
}

// Reconcile refuses paging that can skip a record during its scan: it
// would soft-delete the live row of the record it did not see.
func TestReconcileRefusesPagingThatSkips(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"reconcile", "--erp-kind", "odata", "--erp-paging", "server"}, "--erp-paging server: reconcile needs paging that cannot skip a record"},
		{[]string{"reconcile", "--erp-rest-paging", "offset"}, "--erp-rest-paging offset: reconcile needs paging that cannot skip a record"},
		{[]string{"schedule", "--every", "1m", "--reconcile-every", "1h", "--erp-rest-paging", "offset"}, "--erp-rest-paging offset: reconcile needs"},
	} {
		var out, errb bytes.Buffer
		args := append(c.args, "--mysql-dsn", "root@tcp(127.0.0.1:1)/none")
		if code := Main(context.Background(), args, &out, &errb); code != ExitUsage || !strings.Contains(errb.String(), c.want) ||
			strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line with %q", c.args, code, errb.String(), c.want)
		}
	}
	// A schedule without reconciles may page by offset.
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"schedule", "--every", "1m", "--erp-rest-paging", "offset", "--mysql-dsn", "root@tcp(127.0.0.1:1)/none"}, &out, &errb); code != ExitUsage || strings.Contains(errb.String(), "reconcile needs") {
		t.Errorf("schedule with offset paging and no reconcile: exit %d, stderr %q; want only the unreachable database's exit 2", code, errb.String())
	}
}
