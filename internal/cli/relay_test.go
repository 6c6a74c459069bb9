package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	var ev eventSettings
	if err := ev.fill(path); err != nil {
		t.Fatal(err)
	}
	if ev.Sink != "webhook" || ev.URL != "https://hooks.example.com/erpsync" || ev.Secret != "hook-secret" || ev.Subject != "erpsync.events" || ev.Exchange != "erpsync" {
		t.Fatalf("settings %+v", ev)
	}
	flags := eventSettings{URL: "http://127.0.0.1:9999/hook", Secret: "from-the-flag"}
	if err := flags.fill(path); err != nil {
		t.Fatal(err)
	}
	if flags.URL != "http://127.0.0.1:9999/hook" || flags.Secret != "from-the-flag" || flags.Sink != "webhook" {
		t.Fatalf("the flags did not win: %+v", flags)
	}
	bad := eventSettings{Sink: "kafka", URL: "x"}
	if err := bad.fill(""); err == nil || !strings.Contains(err.Error(), "want webhook, nats or rabbitmq") {
		t.Fatalf("sink kafka: %v", err)
	}
}
