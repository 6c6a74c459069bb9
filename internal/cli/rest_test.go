package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/erp"
)

func TestRESTSettingsFromFlagsAndEnvironment(t *testing.T) {
	t.Setenv("ERPSYNC_ERP_COUNT_PATH", "")
	t.Setenv("ERPSYNC_ERP_REST_PAGING", "offset")
	var s settings
	fs := newFlagSet("t", &bytes.Buffer{})
	s.connFlags(fs)
	if err := parse(fs, []string{"--erp-path", "/v2/members/changes", "--erp-param", "since=changedAfter,until=changedBefore",
		"--erp-records-path", "result.items"}); err != nil {
		t.Fatal(err)
	}
	sh, err := s.REST.shape(kindREST)
	if err != nil {
		t.Fatal(err)
	}
	if sh.Path != "/v2/members/changes" || sh.CountPath != "" || sh.Paging != erp.PagingOffset || sh.Params.Since != "changedAfter" ||
		sh.Params.Cursor != "cursor" || sh.Records.String() != "result.items" || sh.Cursor.String() != "next_cursor" || sh.Count.String() != "count" {
		t.Fatalf("shape %+v", sh)
	}
	var d settings
	d.REST.flags(newFlagSet("t", &bytes.Buffer{}))
	if sh, err := d.REST.shape(kindOData); err != nil || sh != nil {
		t.Fatalf("defaults: %+v, %v", sh, err)
	}
	if _, err := s.REST.shape(kindOData); err == nil || !strings.Contains(err.Error(), "only for --erp-kind rest") {
		t.Fatalf("REST settings for odata: %v", err)
	}
}

func TestBadRESTSettingsExit2WithOneLineNamingTheFlag(t *testing.T) {
	for _, c := range []struct {
		flag string
		args []string
	}{
		{"--erp-count-field", []string{"--erp-kind", "odata", "--erp-count-field", "n"}},
		{"--erp-path", []string{"--erp-path", "v2/members"}},
		{"--erp-count-path", []string{"--erp-count-path", "/count?x=1"}},
		{"--erp-param", []string{"--erp-param", "after=changedAfter"}},
		{"--erp-rest-paging", []string{"--erp-rest-paging", "pages"}},
		{"--erp-records-path", []string{"--erp-records-path", "result..items"}},
		{"--erp-records-path", []string{"--erp-records-path", ""}},
		{"--erp-cursor-path", []string{"--erp-records-path", "result", "--erp-cursor-path", "result.next"}},
		{"--erp-param", []string{"--erp-count-field", "", "--erp-param", "x"}}, // the first bad one
	} {
		flag, args := c.flag, c.args
		var out, errb bytes.Buffer
		// An unreachable MySQL: a usage error must come before connecting.
		code := Main(context.Background(), append([]string{"run", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x"}, args...), &out, &errb)
		msg := strings.TrimSuffix(errb.String(), "\n")
		if code != ExitUsage || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, flag+" (ERPSYNC_") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line naming %s", args, code, errb.String(), flag)
		}
	}
}
