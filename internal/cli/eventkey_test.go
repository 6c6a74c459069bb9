package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestConfigCheckEventKeyPastTheOutbox: a key whose change events' key
// text can pass what the outbox holds (a string(200) of CJK or of < is
// 600 or 1,200 bytes, past its 500) is refused when the file is loaded,
// exit 2 with the file and line, not by every run on the page that
// carries one.
func TestConfigCheckEventKeyPastTheOutbox(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.yaml")
	file := `erp: {kind: rest, url: "http://127.0.0.1:1"}
events: {sink: nats, url: "nats://127.0.0.1:4222"}
entities:
  - name: things
    source: /things
    key: [code]
    updated_at: changed_at
    events: true
    columns:
      - {name: code, type: string(200)}
`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	// Nothing may reach a database: the file is refused first.
	t.Setenv("ERPSYNC_MYSQL_DSN", "root@tcp(127.0.0.1:1)/none")
	for _, args := range [][]string{{"config", "check"}, {"run"}, {"migrate"}} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), append(args, "--config", path), &out, &errb)
		want := "erpsync: " + path + ":6: entity things: key: its change events' key text takes up to 1211 bytes (the key's JSON, a string(N) at up to 6 bytes a character, <, > and & escaped as \\u003c), more than the 500 the outbox holds: shorten the key's strings\n"
		if code != ExitUsage || errb.String() != want {
			t.Errorf("%v: exit %d, stderr %q, want exit 2 and %q", args, code, errb.String(), want)
		}
	}
}
