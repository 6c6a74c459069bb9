package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/testenv"
)

// TestEverySettingCheckedAtItsSource: a value out of range, from a flag or
// from its environment variable, a mistyped flag and a bad value are one
// line naming the flag (and the variable), exit 2; -h and version go to
// stdout, exit 0.
func TestEverySettingCheckedAtItsSource(t *testing.T) {
	e := setup(t, erpmock.Options{Records: 10})
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"run", "--workers", "-1"}, "erpsync: --workers -1: want 1..4096"},
		{[]string{"ERPSYNC_WORKERS=-5"}, []string{"run"}, "erpsync: --workers -5 (from ERPSYNC_WORKERS): want 1..4096"},
		{nil, []string{"run", "--workers", "0"}, "erpsync: --workers 0: want 1..4096"},
		{nil, []string{"run", "--chunk-size", "0"}, "erpsync: --chunk-size 0: want 1..5000"},
		{nil, []string{"run", "--lock-ttl", "0s"}, "erpsync: --lock-ttl 0s: want at least 10ms"},
		{nil, []string{"run", "--grace", "-1s"}, "erpsync: --grace -1s: must not be negative (0: none)"},
		{nil, []string{"run", "--job", ""}, `erpsync: --job "": want 1..150 characters`},
		{nil, []string{"run", "--erp-retries", "-1"}, "erpsync: --erp-retries -1: want 0..100"},
		{[]string{"ERPSYNC_LOCK_TTL=soon"}, []string{"run"}, "erpsync: --lock-ttl soon (from ERPSYNC_LOCK_TTL): want a duration, like 30s or 5m"},
		{nil, []string{"run", "--wrokers", "3"}, "erpsync: unknown flag --wrokers; did you mean --workers? (erpsync run -h lists the flags)"},
		{nil, []string{"loadtest", "--processes", "0"}, "erpsync: --processes 0: want 1..64"},
	} {
		cmd := e.Cmd(context.Background(), c.args...)
		cmd.Env = append(cmd.Env, c.env...)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := cmd.ProcessState.ExitCode()
		if lines := proctest.Lines(errb.String()); code != 2 || len(lines) != 1 || lines[0] != c.want {
			t.Errorf("%v %v: exit %d (err %v), stderr %q; want exit 2 and %q", c.env, c.args, code, err, errb.String(), c.want)
		}
	}
	r := e.Run(context.Background(), "run", "-h")
	if r.Code != 0 || r.Stderr != "" || !strings.HasPrefix(r.Stdout, "Usage: erpsync run [flags]\n\nOne incremental pass") {
		t.Errorf("run -h: exit %d, stderr %q, stdout starts %.200q", r.Code, r.Stderr, r.Stdout)
	}
	helpGroups(t, r.Stdout)
	// The test's binary is built by go build as the machine's GOFLAGS say:
	// stamped from the checkout (a module version and its commit) unless
	// they hold -buildvcs=false ("(devel)", no commit).
	for _, v := range [][]string{{"version"}, {"--version"}} {
		r := e.Run(context.Background(), v...)
		if r.Code != 0 || !versionLine.MatchString(r.Stdout) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", v, r.Code, r.Stdout, r.Stderr)
		}
	}
	// --erp-retries 0 means no retry: one request to an ERP that fails it.
	e.Mock.SetFaults(erpmock.Faults{ErrorRate: 1})
	r = e.Run(context.Background(), "run", "--erp-retries", "0")
	if r.Code != 2 || !strings.Contains(r.Stderr, "giving up after 1 attempts") {
		t.Errorf("run --erp-retries 0 against a failing ERP: exit %d, %s", r.Code, r.Stderr)
	}
}

// TestErrorsAPersonCanActOn: a database that does not exist, a DSN in URL
// form, an ERP that answers HTML and a base URL that already holds the
// path are each one line that says what to do, exit 2.
func TestErrorsAPersonCanActOn(t *testing.T) {
	e := setup(t, erpmock.Options{Records: 10})
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html><head><title>Sign in</title></head>\n<body>proxy login</body></html>"))
	}))
	defer html.Close()
	// A DSN of the other database's form given to the flag of this one.
	wrongForm := []string{"run", "--mysql-dsn", "mysql://root@127.0.0.1:3306/erpsync"}
	wrongFormSays := "erpsync: --mysql-dsn: parse mysql dsn: a mysql:// URL: want the go-sql-driver form user:pass@tcp(host:port)/db?parseTime=true"
	if e.Postgres {
		wrongForm = []string{"run", "--postgres-dsn", "root@tcp(127.0.0.1:5432)/erpsync"}
		wrongFormSays = "erpsync: --postgres-dsn: parse postgres dsn: want a postgres:// URL (postgres://user@host:5432/db?sslmode=disable) or a libpq key=value string (host=... dbname=...), not MySQL's user@tcp(host:port)/db form"
	}
	nosuch := testenv.WithDatabase(t, e.DSN, "erpsync_e2e_nosuch")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", testenv.DSNFlag(nosuch), nosuch},
			`erpsync: database "erpsync_e2e_nosuch" does not exist: run erpsync migrate`},
		{wrongForm, wrongFormSays},
		{[]string{"run", "--erp-url", html.URL, "--erp-count-path", "", "--erp-retries", "0"},
			`erpsync: erp at ` + html.URL + ` answered, but not with the feed (check --erp-url and that no proxy or login page stands in front): erp: page request: giving up after 1 attempts: erp: GET ` + html.URL + `/api/v1/memberships?limit=1: status 200, Content-Type "text/html": not JSON: "<html><head><title>Sign in</title></head> <body>proxy login</body></html>"`},
		{[]string{"run", "--erp-url", e.ERPURL + "/api/v1/memberships"},
			"erpsync: erp at " + e.ERPURL + "/api/v1/memberships: GET " + e.ERPURL + "/api/v1/memberships/api/v1/memberships/count: status 404 (not found): --erp-url is the base URL, like http://host:8090, and --erp-path the path of the records"},
	} {
		r := e.Run(context.Background(), c.args...)
		if lines := proctest.Lines(r.Stderr); r.Code != 2 || len(lines) != 1 || lines[0] != c.want {
			t.Errorf("%v: exit %d, stderr %q;\nwant exit 2 and %q", c.args, r.Code, r.Stderr, c.want)
		}
	}
}

// helpGroups fails the test unless run's -h groups its flags as the
// groups' titles say, in order, with the rarely needed flags (TLS files,
// the REST API's shape, the rate key) in the last group only.
func helpGroups(t *testing.T, help string) {
	t.Helper()
	at := 0
	for _, g := range []struct{ title, flags string }{
		{"Sync", "--job --workers --page-size --max-invalid"},
		{"Database", "--mysql-dsn"},
		{"Redis and locks", "--redis-addr --lock-prefix"},
		{"ERP", "--erp-url --erp-kind --erp-token --erp-map --erp-retries"},
		{"Output", "--log-format --report"},
		{"Advanced (TLS files, Redlock and Cluster, REST API shape, rate key)", "--mysql-tls-ca --redis-tls-key --erp-tls-ca --erp-records-path --erp-rate-key --redis-addrs"},
	} {
		i := strings.Index(help[at:], "\n"+g.title+":\n")
		if i < 0 {
			t.Errorf("run -h: no group %q after byte %d:\n%s", g.title, at, help)
			return
		}
		start := at + i + 1
		end := strings.Index(help[start:], "\n\n")
		group := help[start : start+end]
		for _, f := range strings.Fields(g.flags) {
			if !strings.Contains(group, "\n  "+f+" ") {
				t.Errorf("run -h: %s is not in the group %q:\n%s", f, g.title, group)
			}
		}
		at = start
	}
	if n := strings.Count(help, "\n  --mysql-tls-ca "); n != 1 {
		t.Errorf("run -h lists --mysql-tls-ca %d times, want once (under Advanced)", n)
	}
}

// versionLine is the one line of erpsync version: the module version, the
// commit when the build was stamped, and the Go version (this test's, the
// toolchain that built both).
var versionLine = regexp.MustCompile(`^erpsync (\(devel\)|v\S+ commit [0-9a-f]{40}( \(modified\))?) ` + regexp.QuoteMeta(runtime.Version()) + "\n$")
