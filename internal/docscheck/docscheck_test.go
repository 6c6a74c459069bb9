package docscheck_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/docscheck"
	"github.com/erpsync/erpsync/internal/testenv"
)

// root is the repository: tests run in their package's directory.
const root = "../.."

func report(t *testing.T, what string, problems []docscheck.Problem) {
	t.Helper()
	for _, p := range problems {
		t.Errorf("%s: %s", what, p)
	}
}

// TestDocs runs every check on this repository.
func TestDocs(t *testing.T) {
	files, err := docscheck.DocFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("doc files %v: want README.md and docs/*.md", files)
	}
	t.Run("links", func(t *testing.T) { report(t, "link", docscheck.Links(root, files)) })
	t.Run("make targets", func(t *testing.T) { report(t, "make", docscheck.MakeTargets(root, files)) })
	t.Run("runbooks", func(t *testing.T) {
		report(t, "runbook", docscheck.Runbooks(root, "deploy/prometheus/alerts.yml", "docs/operations.md"))
	})
	t.Run("flags", func(t *testing.T) {
		dir := t.TempDir()
		bin, err := testenv.Build(dir, "./cmd/erpsync")
		if err != nil {
			t.Fatal(err)
		}
		cmds, err := docscheck.CommandFlags(bin)
		if err != nil {
			t.Fatal(err)
		}
		// The commands that must be there, whatever is added later.
		for _, c := range []string{"migrate", "run", "backfill", "schedule", "verify", "runs", "loadtest", "demo"} {
			if len(cmds[c]) == 0 {
				t.Errorf("erpsync help lists no command %s with flags (got %v)", c, cmds)
			}
		}
		if !slices.Contains(cmds["run"], "mysql-dsn-file") || !slices.Contains(cmds["backfill"], "since") {
			t.Errorf("flags not read from the usage: run %v, backfill %v", cmds["run"], cmds["backfill"])
		}
		report(t, "configuration", docscheck.Flags(root, "docs/configuration.md", cmds))
	})
	t.Run("erpmock flags", func(t *testing.T) {
		bin, err := testenv.Build(t.TempDir(), "./cmd/erpmock")
		if err != nil {
			t.Fatal(err)
		}
		flags, err := docscheck.UsageFlags(bin, "-h")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(flags, "error-rate") {
			t.Fatalf("flags not read from erpmock -h: %v", flags)
		}
		report(t, "erpmock", docscheck.Mentioned(root, "docs/connect-erp.md", "erpmock -h", flags))
	})
}

// write creates files (path: content) under a new directory and returns it.
func write(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// want fails unless problems are exactly the strings given, in order.
func want(t *testing.T, problems []docscheck.Problem, msgs ...string) {
	t.Helper()
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	if !slices.Equal(got, msgs) {
		t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(msgs, "\n  "))
	}
}

func TestLinksNameFileAndTarget(t *testing.T) {
	dir := write(t, map[string]string{
		"README.md": "# Top\n[ok](docs/a.md) [anchor](docs/a.md#the-section) [bad](docs/gone.md)\n" +
			"[bad anchor](docs/a.md#nowhere) [web](https://example.com/x) `[code](nowhere.md)`\n" +
			"```\n[fenced](nowhere.md)\n```\n[self](#top) [dir](docs)\n",
		"docs/a.md": "# A\n## The section\n[up](../README.md#top) [self](#missing)\n",
	})
	want(t, docscheck.Links(dir, []string{"README.md", "docs/a.md"}),
		"README.md: link docs/gone.md: no file docs/gone.md",
		"README.md: link docs/a.md#nowhere: no heading #nowhere in docs/a.md",
		"docs/a.md: link #missing: no heading #missing in docs/a.md",
	)
}

func TestAnchor(t *testing.T) {
	for h, a := range map[string]string{
		"How it stays correct":                    "how-it-stays-correct",
		"`erpsync run`":                           "erpsync-run",
		"Redlock, and what it does not promise":   "redlock-and-what-it-does-not-promise",
		"ErpsyncLockLost":                         "erpsynclocklost",
		"Speed: `make bench`, `erpsync loadtest`": "speed-make-bench-erpsync-loadtest",
	} {
		if got := docscheck.Anchor(h); got != a {
			t.Errorf("Anchor(%q) = %q, want %q", h, got, a)
		}
	}
}

func TestMakeTargets(t *testing.T) {
	dir := write(t, map[string]string{
		"Makefile":  "GO ?= go\nBIN := bin\n.PHONY: all test\nall: build\nbuild:\n\tgo build\ntest lint: vet\n",
		"README.md": "Run `make test`, `make lint` and `make gone`; to make sure, nothing else.\n```sh\nmake build   # ok, and make targets in a comment\n$ make docs-check\ncd x && make build\n```\n",
	})
	want(t, docscheck.MakeTargets(dir, []string{"README.md"}),
		"README.md: `make gone`: no target gone in the Makefile",
		"README.md: `make docs-check`: no target docs-check in the Makefile",
	)
}

func TestFlagsNameCommandAndFlag(t *testing.T) {
	dir := write(t, map[string]string{"docs/configuration.md": "# Configuration\n## Common settings\n" +
		"| `--mysql-dsn` | ... |\n| `--erp-token-file` | ... |\n" +
		"## `erpsync run`\n`--report FILE` writes the report.\n" +
		"## `erpsync backfill --since T`\n`--since`, and `--shard-count`.\n",
	})
	cmds := map[string][]string{
		"run":       {"mysql-dsn", "report", "erp-token", "erp-token-file"},
		"backfill":  {"mysql-dsn", "since", "shard"},
		"reconcile": {"mysql-dsn", "max-delete"},
	}
	want(t, docscheck.Flags(dir, "docs/configuration.md", cmds),
		"docs/configuration.md: erpsync backfill -h prints --shard, which neither the section of `erpsync backfill` nor \"Common settings\" documents",
		"docs/configuration.md: no section for `erpsync reconcile` (a heading that names it)",
		"docs/configuration.md: erpsync reconcile -h prints --max-delete, which neither the section of `erpsync reconcile` nor \"Common settings\" documents",
		"docs/configuration.md: erpsync run -h prints --erp-token, which neither the section of `erpsync run` nor \"Common settings\" documents",
	)
}

func TestMentioned(t *testing.T) {
	dir := write(t, map[string]string{"docs/x.md": "`--addr` and `--error-rate-max`\n"})
	want(t, docscheck.Mentioned(dir, "docs/x.md", "erpmock -h", []string{"addr", "error-rate"}),
		"docs/x.md: erpmock -h prints --error-rate, which the page does not document")
}

func TestRunbooks(t *testing.T) {
	dir := write(t, map[string]string{
		"alerts.yml": "groups:\n  - name: x\n    rules:\n      - alert: A1\n        expr: up\n      - alert: B2\n        expr: up\n",
		"ops.md":     "# Ops\n## Runbooks\n### A1\nDo this.\n",
	})
	want(t, docscheck.Runbooks(dir, "alerts.yml", "ops.md"),
		`ops.md: no runbook heading "B2" for the alert of alerts.yml`)
}
