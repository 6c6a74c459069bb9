package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/cli"
	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// secureEnv is a MariaDB, a Redis and an erpmock that a test started on
// loopback, each reachable only over TLS with a CA the test made, with a
// password or token each.
type secureEnv struct {
	t        *testing.T
	ca       *testenv.CA
	other    *testenv.CA // a CA that signed none of the servers
	redis    *testenv.TLSRedis
	dsn      string // the TLS-only MySQL user's DSN, password included
	dsnFile  string
	erpURL   string
	token    string
	tokFile  string
	mock     *erpmock.Mock
	secrets  []string // every secret any command saw, wrong ones included
	dir      string
	job, pfx string
}

// redisACL is the example of the ACL rules erpsync needs in docs/security.md.
var redisACL = []string{"~erpsync:*", "+@read", "+@write", "+@scripting", "+ping", "+time"}

func setupSecure(t *testing.T, records int) *secureEnv {
	t.Helper()
	e := &secureEnv{t: t, ca: testenv.NewCA(t), other: testenv.NewCA(t), dir: t.TempDir(),
		job: testenv.RandomName("secure-"), pfx: testenv.RandomName("erpsync:lock:secure") + ":"}
	mysqlPass, redisPass := testenv.RandomName("mysql-pw-"), testenv.RandomName("redis-pw-")
	e.token = testenv.RandomName("erp-token-")
	e.secrets = []string{mysqlPass, redisPass, e.token}

	e.redis = testenv.StartTLSRedis(t, e.ca, testenv.RandomName("erpsync-"), redisPass, redisACL...)
	maria := testenv.StartTLSMariaDB(t, e.ca)
	db, user := testenv.RandomName("erpsync_tls_"), testenv.RandomName("erpsync_")
	testenv.ExecSQL(t, maria.RootDSN+"mysql",
		fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s' REQUIRE SSL", user, mysqlPass),
		fmt.Sprintf("GRANT ALL ON `%s`.* TO '%s'@'%%'", db, user))
	e.dsn = fmt.Sprintf("%s:%s@tcp(%s)/%s?parseTime=true", user, mysqlPass, maria.Addr, db)
	e.dsnFile = e.write("mysql-dsn", e.dsn+"\n")
	e.tokFile = e.write("erp-token", e.token+"\n")

	e.mock = erpmock.New(erpmock.Options{Records: records, Seed: 31, Token: e.token, Faults: erpmock.Faults{InvalidRate: 0.01}})
	srv := httptest.NewUnstartedServer(e.mock)
	srv.TLS = e.ca.ServerTLS(t, "erp")
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshake errors of the wrong-CA cases
	srv.StartTLS()
	t.Cleanup(srv.Close)
	e.erpURL = srv.URL
	return e
}

func (e *secureEnv) write(name, content string) string {
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// good is the environment of a command that reaches all three servers:
// secrets from files and a rediss:// URL with the password in it.
func (e *secureEnv) good() map[string]string {
	return map[string]string{
		"ERPSYNC_MYSQL_DSN_FILE": e.dsnFile,
		"ERPSYNC_MYSQL_TLS_CA":   e.ca.File,
		"ERPSYNC_REDIS_ADDR":     fmt.Sprintf("rediss://%s:%s@%s", e.redis.User, e.redis.Password, e.redis.Addr),
		"ERPSYNC_REDIS_TLS_CA":   e.ca.File,
		"ERPSYNC_ERP_URL":        e.erpURL,
		"ERPSYNC_ERP_TLS_CA":     e.ca.File,
		"ERPSYNC_ERP_TOKEN_FILE": e.tokFile,
		"ERPSYNC_JOB":            e.job,
		"ERPSYNC_LOCK_PREFIX":    e.pfx,
		"ERPSYNC_ERP_RATE":       "1000/s", // the shared rate's key also lives in the ACL's erpsync:*
		"ERPSYNC_ERP_RATE_KEY":   "erpsync:rate:" + e.job,
		"ERPSYNC_LOG_LEVEL":      "debug", // as much output as there is, to scan
		"ERPSYNC_ERP_RETRIES":    "2",
	}
}

// result is what one erpsync process left behind.
type result struct {
	code           int
	stdout, stderr string
	report         []byte // nil when no report was written
}

// run starts erpsync with env (no other ERPSYNC_ variable; an empty value
// is unset) and args, adds --report to run, waits for it and fails the test if any secret appears in
// any byte it wrote.
func (e *secureEnv) run(env map[string]string, args ...string) result {
	e.t.Helper()
	report := filepath.Join(e.dir, testenv.RandomName("report-")+".json")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if args[0] == "run" {
		args = append(args, "--report", report)
	}
	c := exec.CommandContext(ctx, bin, args...)
	c.Env = cli.EnvWithoutSettings()
	for k, v := range env {
		if v != "" {
			c.Env = append(c.Env, k+"="+v)
		}
	}
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	r := result{}
	if err := c.Run(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			e.t.Fatalf("erpsync %v: %v", args, err)
		}
		r.code = ee.ExitCode()
	}
	r.stdout, r.stderr = stdout.String(), stderr.String()
	if b, err := os.ReadFile(report); err == nil {
		r.report = b
	}
	for _, sec := range e.secrets {
		for what, b := range map[string]string{"stdout": r.stdout, "stderr": r.stderr, "report": string(r.report)} {
			if strings.Contains(b, sec) {
				e.t.Errorf("erpsync %v: a secret appears in its %s:\n%s", args, what, b)
			}
		}
	}
	return r
}

// with returns a copy of the good environment with changes.
func (e *secureEnv) with(changes map[string]string) map[string]string {
	env := e.good()
	for k, v := range changes {
		env[k] = v
	}
	return env
}

// errorLine returns the one "erpsync: " line of stderr; the test fails
// unless there is exactly one and it holds every want.
func errorLine(t *testing.T, r result, want ...string) string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.HasPrefix(l, "erpsync: ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("want one error line, got %d in:\n%s", len(lines), r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(lines[0], w) {
			t.Errorf("error line %q lacks %q", lines[0], w)
		}
	}
	return lines[0]
}

// TestSecureTransportEndToEnd runs migrate and run as separate processes
// over TLS to MariaDB, Redis (an ACL user) and the ERP, then every way to
// get the CA, a password or an address wrong: each exits 2 with one line,
// and no secret appears in any output or report.
func TestSecureTransportEndToEnd(t *testing.T) {
	t.Parallel()
	e := setupSecure(t, 600)

	if r := e.run(e.good(), "migrate"); r.code != 0 {
		t.Fatalf("migrate over TLS: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := e.run(e.good(), "run", "--page-size", "100")
	if r.code != 0 {
		t.Fatalf("run over TLS: exit %d\n%s", r.code, r.stderr)
	}
	if !bytes.Contains(r.report, []byte(`"status": "succeeded"`)) || !bytes.Contains(r.report, []byte(`"inserted": `+strconv.Itoa(len(e.mock.Truth())))) {
		t.Fatalf("run report:\n%s", r.report)
	}

	// The same with every secret and CA as a flag, the Redis password
	// apart from its address.
	e.mock.Change(40)
	flags := []string{"run", "--overlap", "1h",
		"--mysql-dsn", e.dsn, "--mysql-tls-ca", e.ca.File,
		"--redis-addr", e.redis.Addr, "--redis-username", e.redis.User, "--redis-password", e.redis.Password, "--redis-tls-ca", e.ca.File,
		"--erp-url", e.erpURL, "--erp-token", e.token, "--erp-tls-ca", e.ca.File}
	r = e.run(map[string]string{"ERPSYNC_JOB": e.job, "ERPSYNC_LOCK_PREFIX": e.pfx, "ERPSYNC_LOG_LEVEL": "debug"}, flags...)
	if r.code != 0 || !bytes.Contains(r.report, []byte(`"status": "succeeded"`)) || bytes.Contains(r.report, []byte(`"updated": 0,`)) {
		t.Fatalf("run with flags: exit %d\n%s\n%s", r.code, r.stderr, r.report)
	}

	// A run that fails after it connected writes a failed report: no
	// secret in it either.
	e.mock.SetFaults(erpmock.Faults{Latency: 300 * time.Millisecond})
	r = e.run(e.good(), "run", "--overlap", "1h", "--page-size", "10", "--max-duration", "1s")
	e.mock.SetFaults(erpmock.Faults{})
	if r.code != 1 || !bytes.Contains(r.report, []byte(`"status": "failed"`)) || !bytes.Contains(r.report, []byte(`"error"`)) {
		t.Fatalf("run past --max-duration: exit %d, want 1 and a failed report\n%s\n%s", r.code, r.stderr, r.report)
	}

	wrongMySQL := strings.Replace(e.dsn, e.secrets[0], "not-"+e.secrets[0], 1)
	wrongRedis := testenv.RandomName("wrong-redis-pw-")
	e.secrets = append(e.secrets, "not-"+e.secrets[0], wrongRedis)
	closed := proctest.FreeAddr(t)
	unreachable, err := store.ParseDSN(e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	unreachable.Addr = closed
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"mysql wrong CA", map[string]string{"ERPSYNC_MYSQL_TLS_CA": e.other.File}, nil, []string{"mysql unavailable at 127.0.0.1:", "certificate signed by unknown authority"}},
		{"migrate wrong CA", map[string]string{"ERPSYNC_MYSQL_TLS_CA": e.other.File}, []string{"migrate"}, []string{"mysql", "certificate signed by unknown authority"}},
		{"redis wrong CA", map[string]string{"ERPSYNC_REDIS_TLS_CA": e.other.File}, nil, []string{"redis", "certificate signed by unknown authority"}},
		{"erp wrong CA", map[string]string{"ERPSYNC_ERP_TLS_CA": e.other.File}, nil, []string{"erp", "certificate signed by unknown authority"}},
		{"mysql without TLS", map[string]string{"ERPSYNC_MYSQL_TLS_CA": ""}, nil, []string{"mysql", "Access denied"}},
		{"mysql wrong password", map[string]string{"ERPSYNC_MYSQL_DSN_FILE": "", "ERPSYNC_MYSQL_DSN": wrongMySQL}, nil, []string{"mysql", "Access denied"}},
		{"mysql unreachable", map[string]string{"ERPSYNC_MYSQL_DSN_FILE": "", "ERPSYNC_MYSQL_DSN": unreachable.FormatDSN()}, nil, []string{"mysql at " + closed + ": connection refused"}},
		{"redis wrong password", map[string]string{"ERPSYNC_REDIS_ADDR": e.redis.Addr, "ERPSYNC_REDIS_USERNAME": e.redis.User, "ERPSYNC_REDIS_PASSWORD": wrongRedis}, nil, []string{"redis", "WRONGPASS"}},
		{"redis without TLS", map[string]string{"ERPSYNC_REDIS_ADDR": "redis://" + e.redis.User + ":" + e.redis.Password + "@" + e.redis.Addr, "ERPSYNC_REDIS_TLS_CA": ""}, nil, []string{"redis unavailable at " + e.redis.Addr}},
		{"redis unreachable", map[string]string{"ERPSYNC_REDIS_ADDR": "rediss://" + e.redis.User + ":" + e.redis.Password + "@" + closed}, nil, []string{"redis unavailable at " + closed}},
		{"erp wrong token", map[string]string{"ERPSYNC_ERP_TOKEN_FILE": "", "ERPSYNC_ERP_TOKEN": "not-" + e.token}, nil, []string{"erp", "refused the token"}},
		{"token and token file", map[string]string{"ERPSYNC_ERP_TOKEN": e.token}, nil, []string{"--erp-token", "ERPSYNC_ERP_TOKEN_FILE", "both given"}},
		{"token and token file flags", nil, []string{"run", "--erp-token", e.token}, []string{"--erp-token-file", "both given"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if args == nil {
				args = []string{"run"}
			}
			r := e.run(e.with(c.env), args...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2\n%s", r.code, r.stderr)
			}
			t.Log(errorLine(t, r, c.want...))
		})
	}
}
