package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigCheck(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"config", "check", "--config", "../../examples/customers.yaml"}, &out, &errb)
	if code != ExitOK || errb.Len() != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "customers: table customers, sources Customers (company=1000); Customers (company=2000)") {
		t.Errorf("stdout %q", out.String())
	}
}

func TestConfigCheckFromTheEnvironment(t *testing.T) {
	t.Setenv("ERPSYNC_CONFIG", "../../examples/memberships.yaml")
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"config", "check"}, &out, &errb); code != ExitOK || !strings.HasPrefix(out.String(), "memberships: ") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

func TestConfigCheckBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("entities:\n  - name: x\n    colums: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"config", "check", "--config", path}, &out, &errb)
	want := "erpsync: " + path + `:3: unknown key "colums" (did you mean "columns"?)` + "\n"
	if code != ExitUsage || errb.String() != want || out.Len() != 0 {
		t.Errorf("exit %d, stderr %q, want exit 2 and %q", code, errb.String(), want)
	}
}

func TestConfigUsage(t *testing.T) {
	for _, args := range [][]string{{"config"}, {"config", "nope"}, {"config", "check"}, {"config", "schema", "extra"}, {"config", "check", "--config", "/nonexistent/c.yaml"}} {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), args, &out, &errb); code != ExitUsage || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
	for _, args := range [][]string{{"config", "-h"}, {"config", "check", "-h"}} {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), args, &out, &errb); code != ExitOK || !strings.Contains(out.String(), "  --config") {
			t.Errorf("%v: exit %d, stdout %q", args, code, out.String())
		}
	}
}

func TestConfigSchema(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"config", "schema"}, &out, &errb); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var v map[string]any
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("stdout is not the schema: %v", err)
	}
}
