package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/entity"
)

// TestEventSettingsFromFile: the file's events block fills what the flags
// leave unset; the secret file's trailing newline is not part of the
// secret.
func TestEventSettingsFromFile(t *testing.T) {
	dir := t.TempDir()
	secretPath := filepath.Join(dir, "hook")
	if err := os.WriteFile(secretPath, []byte("hook-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../examples/rest-invoices.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "erpsync.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(string(example), "/run/secrets/hook", secretPath, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	var ev eventSettings
	if err := ev.fill(f); err != nil {
		t.Fatal(err)
	}
	if ev.Sink != "webhook" || ev.URL != "https://hooks.example.com/erpsync" || ev.Secret != "hook-secret" || ev.Subject != "erpsync.events" || ev.Exchange != "erpsync" {
		t.Fatalf("settings %+v", ev)
	}
	flags := eventSettings{URL: "http://127.0.0.1:9999/hook", Secret: "from-the-flag"}
	if err := flags.fill(f); err != nil {
		t.Fatal(err)
	}
	if flags.URL != "http://127.0.0.1:9999/hook" || flags.Secret != "from-the-flag" || flags.Sink != "webhook" {
		t.Fatalf("the flags did not win: %+v", flags)
	}
	bad := eventSettings{Sink: "kafka", URL: "x"}
	if err := bad.fill(nil); err == nil || !strings.Contains(err.Error(), "want webhook, nats or rabbitmq") {
		t.Fatalf("sink kafka: %v", err)
	}
}

// TestWebhookWantsASecret: a webhook without a secret is a usage error
// (exit 2) naming the file and line of the events block, or the flag,
// unless the block says unsigned: true or --events-unsigned is given.
func TestWebhookWantsASecret(t *testing.T) {
	example, err := os.ReadFile("../../examples/rest-invoices.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, from, to string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if !strings.Contains(string(example), from) {
			t.Fatalf("the example lacks %q", from)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(example), from, to, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	noSecret := write("nosecret.yaml", "  secret_file: /run/secrets/hook\n", "")
	unsigned := write("unsigned.yaml", "  secret_file: /run/secrets/hook\n", "  unsigned: true\n")
	load := func(path string) *entity.File {
		t.Helper()
		f, err := loadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	var ev eventSettings
	err = ev.fill(load(noSecret))
	var usage usageError
	if !errors.As(err, &usage) || !strings.Contains(err.Error(), noSecret+":10: events: a webhook without a secret") {
		t.Fatalf("no secret in the file: %v, want a usage error at %s:10", err, noSecret)
	}
	if err := (&eventSettings{Secret: "from-the-flag"}).fill(load(noSecret)); err != nil {
		t.Fatalf("the secret from the flag: %v", err)
	}
	if err := (&eventSettings{}).fill(load(unsigned)); err != nil {
		t.Fatalf("unsigned: true: %v", err)
	}
	flags := eventSettings{Sink: "webhook", URL: "http://127.0.0.1:9/hook"}
	if err := flags.fill(nil); !errors.As(err, &usage) || !strings.HasPrefix(err.Error(), "--events-secret: a webhook without a secret") {
		t.Fatalf("flags without a secret: %v", err)
	}
	flags.Unsigned = true
	if err := flags.fill(nil); err != nil {
		t.Fatalf("--events-unsigned: %v", err)
	}
}
