package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/secret"
)

func TestSecretFromFileFlagOrEnvironment(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte("tok-from-file\n"), 0o600)
	dsn := filepath.Join(dir, "dsn")
	os.WriteFile(dsn, []byte("u:pw-from-file@tcp(h:1)/db\n"), 0o600)
	t.Setenv("ERPSYNC_MYSQL_DSN_FILE", dsn)
	var s settings
	fs := newFlagSet("t", &bytes.Buffer{})
	s.connFlags(fs)
	if err := parse(fs, []string{"--erp-token-file", tok}); err != nil {
		t.Fatal(err)
	}
	if s.ERPToken != "tok-from-file" || s.MySQLDSN != "u:pw-from-file@tcp(h:1)/db" {
		t.Fatalf("token %q, dsn %q", s.ERPToken, s.MySQLDSN)
	}
}

func TestSecretAndItsFileBothGivenIsAUsageError(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("tok-from-file"), 0o600)
	for _, c := range []struct {
		env  map[string]string
		args []string
	}{
		{args: []string{"run", "--erp-token", "x-token-flag", "--erp-token-file", tok}},
		{env: map[string]string{"ERPSYNC_ERP_TOKEN": "x-token-env"}, args: []string{"run", "--erp-token-file", tok}},
		{env: map[string]string{"ERPSYNC_ERP_TOKEN_FILE": tok}, args: []string{"run", "--erp-token", "x-token-flag"}},
		{args: []string{"run", "--redis-password-file", filepath.Join(t.TempDir(), "missing")}},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			var out, errb bytes.Buffer
			if code := Main(context.Background(), c.args, &out, &errb); code != ExitUsage {
				t.Fatalf("exit %d, want 2; stderr: %s", code, errb.String())
			}
			msg := errb.String()
			if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "-file") {
				t.Errorf("want one line naming the -file setting, got %q", msg)
			}
			if strings.Contains(msg, "x-token") || strings.Contains(msg, "tok-from-file") {
				t.Errorf("the secret is in the message: %q", msg)
			}
		})
	}
}

func TestRedisAddressForms(t *testing.T) {
	s := settings{RedisPassword: ""}
	o, err := redisOptions(&s, "rediss://app:pw-in-url@localhost:6380/3", nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.Addr != "localhost:6380" || o.Username != "app" || o.Password != "pw-in-url" || o.DB != 3 || o.TLSConfig == nil || o.TLSConfig.ServerName != "localhost" {
		t.Fatalf("rediss URL: %+v", o)
	}
	s = settings{RedisUsername: "flag-user", RedisPassword: "flag-pw", RedisTLS: true}
	o, err = redisOptions(&s, "redis://app:pw-in-url@10.0.0.1:6379", nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.Username != "flag-user" || o.Password != "flag-pw" || o.TLSConfig == nil || o.TLSConfig.ServerName != "10.0.0.1" {
		t.Fatalf("flags over URL: %+v", o)
	}
	if got := redisHost("rediss://app:pw@h1:1/2, u:pw@h2:2 ,h3:3"); got != "h1:1,h2:2,h3:3" {
		t.Fatalf("redisHost = %q", got)
	}
}

// TestOutputMasksKnownSecrets: a message that would carry a secret (here an
// environment variable's bad value, which parse quotes) reaches stderr
// masked.
func TestOutputMasksKnownSecrets(t *testing.T) {
	const pw = "Secret-pw-42"
	t.Setenv("ERPSYNC_REDIS_DB", pw)
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"run", "--redis-password", pw}, &out, &errb)
	if code != ExitUsage || strings.Contains(errb.String(), pw) || !strings.Contains(errb.String(), "--redis-db *** (from ERPSYNC_REDIS_DB)") {
		t.Fatalf("exit %d, stderr %q: want exit 2 and the password masked", code, errb.String())
	}
}

func TestERPPasswordAndClientSecretFromFiles(t *testing.T) {
	dir := t.TempDir()
	pw, sec := filepath.Join(dir, "pw"), filepath.Join(dir, "sec")
	os.WriteFile(pw, []byte("pw-from-file\n"), 0o600)
	os.WriteFile(sec, []byte("secret-from-file\n"), 0o600)
	t.Setenv("ERPSYNC_ERP_PASSWORD_FILE", pw)
	var s settings
	var errb bytes.Buffer
	red := new(secret.Redactor)
	fs := newFlagSet("t", red.Writer(&errb))
	s.connFlags(fs)
	if err := parse(fs, []string{"--erp-oauth-client-secret-file", sec}); err != nil {
		t.Fatal(err)
	}
	if s.ERP.Password != "pw-from-file" || s.ERP.OAuthClientSecret != "secret-from-file" {
		t.Fatalf("password %q, client secret %q", s.ERP.Password, s.ERP.OAuthClientSecret)
	}
	fs.Output().Write([]byte("pw-from-file secret-from-file\n"))
	if got := errb.String(); got != "*** ***\n" {
		t.Errorf("the redactor let through %q", got)
	}
}

// TestDSNPasswordOfEitherForm: the redactor learns the password of a
// DSN of MySQL's form, of a postgres:// URL (percent-decoded) and of a
// libpq key=value string (unquoted); a DSN that does not parse is masked
// whole.
func TestDSNPasswordOfEitherForm(t *testing.T) {
	for _, c := range []struct{ dsn, want string }{
		{"app:my-pw-1@tcp(db:3306)/erpsync", "my-pw-1"},
		{"postgres://app:pg-pw-2@db:5432/erpsync?sslmode=disable", "pg-pw-2"},
		{"postgresql://app:pg%40pw%2F3@db/erpsync", "pg@pw/3"},
		{"host=db user=app password='pg pw 4' dbname=erpsync", "pg pw 4"},
		{"postgres://app:pg-pw-5@db:5432/erpsync?sslmode=bogus", "postgres://app:pg-pw-5@db:5432/erpsync?sslmode=bogus"},
	} {
		if got := dsnPassword(c.dsn); len(got) != 1 || got[0] != c.want {
			t.Errorf("dsnPassword(%q) = %q, want [%q]", c.dsn, got, c.want)
		}
	}
}
