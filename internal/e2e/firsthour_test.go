package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/erpsync/erpsync/erpmock"
	"github.com/erpsync/erpsync/internal/captest"
	"github.com/erpsync/erpsync/internal/proctest"
	"github.com/erpsync/erpsync/internal/testenv"
)

// lastScreenLine is what a terminal shows on the line of the progress bar:
// the text after the last carriage return (and erase) before the final
// newline.
func lastScreenLine(screen string) string {
	screen = strings.TrimSuffix(screen, "\n")
	if i := strings.LastIndex(screen, "\n"); i >= 0 {
		screen = screen[i+1:]
	}
	if i := strings.LastIndex(screen, "\r"); i >= 0 {
		screen = screen[i+1:]
	}
	return strings.TrimPrefix(screen, "\x1b[K")
}

// On a terminal, a backfill shows one line redrawn in place: the records
// done of the window's total, the rate and the ETA; never a progress log
// line. JSON logs on the same terminal stay JSON, without a bar.
func TestProgressBarOnATerminal(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 1200, Seed: 36})
	c := e.Cmd(context.Background(), "backfill", "--since", "2020-01-01T00:00:00Z", "--page-size", "100")
	c.Env = append(c.Env, "ERPSYNC_LOG_FORMAT=", "ERPSYNC_LOG_LEVEL=info")
	code, _, screen := runOnTerminal(t, c)
	if code != 0 {
		t.Fatalf("backfill exit %d: %q", code, screen)
	}
	line := lastScreenLine(screen)
	want := regexp.MustCompile(`^\[={30}\] 100\.0%  1200/1200  \d+/s  ETA 0s$`)
	if !want.MatchString(line) {
		t.Errorf("last progress line %q, want it to match %s; terminal:\n%q", line, want, screen)
	}
	if strings.Contains(screen, "progress") {
		t.Errorf("a progress log line on a terminal:\n%q", screen)
	}
	if !strings.Contains(screen, "\r\x1b[K[") {
		t.Errorf("no bar redrawn in place:\n%q", screen)
	}

	c = e.Cmd(context.Background(), "backfill", "--since", "2020-01-01T00:00:00Z", "--log-format", "json")
	code, _, screen = runOnTerminal(t, c)
	if code != 0 || strings.Contains(screen, "\r") {
		t.Errorf("--log-format json on a terminal: exit %d, want 0 and no bar: %q", code, screen)
	}
}

// The docs' example password, "erpsync", is the program's name: the
// program's own lines keep it, every value that holds it masks it.
func TestSecretThatIsTheProgramsNameLeavesItsLinesReadable(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 10, Seed: 1})
	dir := t.TempDir()
	cfg, err := os.ReadFile("../../examples/customers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	typo := strings.Replace(strings.Replace(string(cfg), "    every: 5m", "    evry: 5m", 1), "password_file: /run/secrets/erp-password", "password: erpsync", 1)
	if err := os.WriteFile(filepath.Join(dir, "typo1.yaml"), []byte(typo), 0o600); err != nil {
		t.Fatal(err)
	}
	c := e.Cmd(context.Background(), "run", "--config", "typo1.yaml")
	c.Dir = dir
	c.Env = append(c.Env, "ERPSYNC_ERP_USERNAME=u", "ERPSYNC_ERP_PASSWORD=erpsync")
	assertExit(t, c, 2, `erpsync: typo1.yaml:18: unknown key "evry" (did you mean "every"?)`+"\n")

	nodb := strings.Replace(e.DSN, "/"+e.DBName, "/"+e.DBName+"_none", 1)
	c = e.Cmd(context.Background(), "run", testenv.DSNFlag(nodb), nodb)
	c.Env = append(c.Env, "ERPSYNC_ERP_USERNAME=u", "ERPSYNC_ERP_PASSWORD=erpsync")
	assertExit(t, c, 2, `erpsync: database "`+e.DBName+`_none" does not exist: run erpsync migrate`+"\n")

	// In a value (the ERP URL's path), the secret is masked.
	closed := "http://" + proctest.FreeAddr(t) + "/erpsync/api"
	c = e.Cmd(context.Background(), "run", "--erp-url", closed)
	c.Env = append(c.Env, "ERPSYNC_ERP_USERNAME=u", "ERPSYNC_ERP_PASSWORD=erpsync")
	out := assertExit(t, c, 2, "")
	if !strings.HasPrefix(out, "erpsync: ") || strings.Contains(out, "/erpsync/api") || !strings.Contains(out, "/***/api") {
		t.Errorf("the secret in the ERP URL: %q, want it masked (/***/api) and the line to start erpsync: ", out)
	}
}

// assertExit runs c and fails the test unless it exits code with stderr
// equal to want (any stderr when want is ""); it returns stderr.
func assertExit(t *testing.T, c *exec.Cmd, code int, want string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	got := 0
	if ee, ok := err.(*exec.ExitError); ok {
		got = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", c.Args, err)
	}
	if got != code || (want != "" && stderr.String() != want) {
		t.Errorf("%v: exit %d, stderr:\n%s\nwant exit %d, stderr:\n%s", c.Args[1:], got, stderr.String(), code, want)
	}
	return stderr.String()
}

// interruptMidway starts erpsync with args against a feed of 3,000
// records, lets it write some, makes every further ERP answer take a
// minute and sends sig: the process is then surely in the middle.
func interruptMidway(t *testing.T, e *env, sig syscall.Signal, args ...string) proctest.Result {
	t.Helper()
	p := e.Start(args...)
	e.WaitRows(50)
	e.Mock.SetFaults(erpmock.Faults{Latency: time.Minute})
	if err := p.Signal(sig); err != nil {
		t.Fatal(err)
	}
	r := p.Wait()
	e.Mock.SetFaults(erpmock.Faults{})
	t.Logf("%v on %v: exit %d: %s", args, sig, r.Code, lastLine(r.Stdout))
	return r
}

// interruptPaging starts erpsync with args, sends it sig once it has made
// five ERP requests (a command that pages without writing rows), and
// returns how it ended, the ERP made to hang meanwhile.
func interruptPaging(t *testing.T, e *env, sig syscall.Signal, args ...string) proctest.Result {
	t.Helper()
	before := e.Mock.Requests()
	p := e.Start(args...)
	if !proctest.Eventually(time.Minute, func() bool { return e.Mock.Requests() >= before+5 }) {
		t.Fatalf("%v never paged", args)
	}
	e.Mock.SetFaults(erpmock.Faults{Latency: time.Minute})
	if err := p.Signal(sig); err != nil {
		t.Fatal(err)
	}
	r := p.Wait()
	e.Mock.SetFaults(erpmock.Faults{})
	return r
}

// lastLine is the last non-empty line of out.
func lastLine(out string) string {
	lines := proctest.Lines(out)
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}

// Ctrl-C (SIGINT) stops a backfill with exit 130 and SIGTERM a run with
// 143, each with one line that says what was done and how to resume; the
// same command then resumes and ends with the truth.
func TestInterruptedRunsExit130And143AndSayHowToResume(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 3000, Seed: 7})
	r := interruptMidway(t, e, syscall.SIGINT, "backfill", "--since", "2020-01-01T00:00:00Z", "--page-size", "50")
	want := regexp.MustCompile(`^erpsync: interrupted by SIGINT: \d+ records done, the window's checkpoint is at \S+; run the same command again to resume from there$`)
	if r.Code != 130 || !want.MatchString(lastLine(r.Stdout)) {
		t.Errorf("backfill on SIGINT: exit %d, last line %q; want 130 and a line matching %s", r.Code, lastLine(r.Stdout), want)
	}
	dir := t.TempDir()
	e.MustRun("backfill", "--since", "2020-01-01T00:00:00Z", "--page-size", "50", "--report", filepath.Join(dir, "b.json"))
	if e.report(filepath.Join(dir, "b.json"))["resumed_from"] == nil {
		t.Errorf("the backfill run again did not resume")
	}
	e.assertTruth()

	e = setup(t, erpmock.Options{Records: 3000, Seed: 8})
	r = interruptMidway(t, e, syscall.SIGTERM, "run", "--page-size", "50")
	want = regexp.MustCompile(`^erpsync: interrupted by SIGTERM: \d+ records done(, the job's checkpoint is at \S+; the next run continues from there|; the next run starts from the job's last checkpoint)$`)
	if r.Code != 143 || !want.MatchString(lastLine(r.Stdout)) {
		t.Errorf("run on SIGTERM: exit %d, last line %q; want 143 and a line matching %s", r.Code, lastLine(r.Stdout), want)
	}
	e.MustRun("run")
	e.assertTruth()
}

// A backfill whose --since is in the future (a mistyped year) is bad
// usage: exit 2, one line that names the flag.
func TestBackfillSinceInTheFutureIsBadUsage(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 10, Seed: 1})
	c := e.Cmd(context.Background(), "backfill", "--since", "2030-01-01T00:00:00Z")
	out := assertExit(t, c, 2, "")
	want := regexp.MustCompile(`^erpsync: --since 2030-01-01T00:00:00Z is in the future \(now \S+\): the window holds no record yet\n$`)
	if !want.MatchString(out) {
		t.Errorf("stderr %q, want a line matching %s", out, want)
	}
}

// Ctrl-C stops verify with exit 130 (not 1, a mismatch), saying to run it
// again.
func TestInterruptedVerifyExits130(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 3000, Seed: 9})
	r := interruptPaging(t, e, syscall.SIGINT, "verify", "--page-size", "10")
	const want = "erpsync: interrupted by SIGINT: verify compared part of the feed; run it again (it starts over)"
	if r.Code != 130 || lastLine(r.Stdout) != want {
		t.Errorf("verify on SIGINT: exit %d, last line %q; want 130 and %q\n%s", r.Code, lastLine(r.Stdout), want, r.Stdout)
	}
}

// SIGTERM stops a reconcile while it scans the source with exit 143 (not
// 1, failed), saying that what it changed stays and to run it again; its
// run row says interrupted. It exited 1 with "reconcile failed: page the
// feed: ... context canceled".
func TestInterruptedReconcileExits143(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 3000, Seed: 10})
	e.MustRun("run")
	r := interruptPaging(t, e, syscall.SIGTERM, "reconcile", "--page-size", "10")
	const want = "erpsync: interrupted by SIGTERM: what reconcile changed stays; run it again to finish (it scans the source again)"
	if r.Code != 143 || lastLine(r.Stdout) != want {
		t.Errorf("reconcile on SIGTERM: exit %d, last line %q; want 143 and %q\n%s", r.Code, lastLine(r.Stdout), want, r.Stdout)
	}
	var status string
	if err := testenv.SQLDB(t, e.DSN).QueryRow("SELECT status FROM sync_runs WHERE mode = 'reconcile'").Scan(&status); err != nil || status != "interrupted" {
		t.Errorf("the reconcile's run row: status %q (%v), want interrupted", status, err)
	}
	e.MustRun("reconcile")
	e.assertTruth()
}

// customersConfig writes examples/customers.yaml with its erp.url set to
// url and no credentials, and returns its path.
func customersConfig(t *testing.T, url string) string {
	t.Helper()
	b, err := os.ReadFile("../../examples/customers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(l, "  url: "):
			l = "  url: " + url
		case strings.HasPrefix(l, "  username: "), strings.HasPrefix(l, "  password_file: "):
			continue
		}
		out = append(out, l)
	}
	p := filepath.Join(t.TempDir(), "customers.yaml")
	if err := os.WriteFile(p, []byte(strings.Join(out, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The ERP's errors at start say what is wrong: a wrong service path is a
// 404 from the URL asked, without the server's HTML; a closed port names
// the request, not the built-in memberships; an entity set's URL given
// for the service root is named as such.
func TestERPErrorsAtStartSayWhatIsWrong(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 10, Seed: 1})
	srv := captest.Start(t, captest.Options{Records: 10, Seed: 3})
	base := strings.TrimSuffix(srv.SalesURL, "/odata/v4/sales/")
	e.MustRun("migrate", "--config", customersConfig(t, srv.SalesURL))
	run := func(url string) *exec.Cmd {
		// ERPSYNC_ERP_URL (the Env's erpmock) would win over the file.
		return e.Cmd(context.Background(), "run", "--config", customersConfig(t, url), "--erp-url", url, "--entity", "customers", "--erp-retries", "0")
	}

	wrong := base + "/odata/v4/salez/"
	out := assertExit(t, run(wrong), 2, "erpsync: erp at "+wrong+": 404 Not Found from "+wrong+"Customers/$count?$filter=CompanyCode%20eq%20%271000%27: check the service path "+
		"(--erp-url or the config's erp.url is the OData service root, like https://host/odata/v4/sales/; the sources name its entity sets) (entity customers, source Customers)\n")
	if strings.Contains(out, "<") {
		t.Errorf("HTML in the line: %q", out)
	}

	closed := "http://" + proctest.FreeAddr(t) + "/odata/v4/sales/"
	out = assertExit(t, run(closed), 2, "")
	want := "erpsync: erp unreachable at " + closed + " (entity customers, source Customers): "
	if !strings.HasPrefix(out, want) || strings.Contains(out, "memberships") {
		t.Errorf("closed port: %q, want it to start %q and not to name memberships", out, want)
	}

	// A REST entity of another name: the request, not memberships.
	b, err := os.ReadFile("../../examples/rest-invoices.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rest := filepath.Join(t.TempDir(), "invoices.yaml")
	cfg := strings.Replace(strings.Replace(string(b), "  token_file: /run/secrets/erp-token\n", "", 1), "  secret_file: /run/secrets/hook\n", "  secret: s3cret-hook\n", 1)
	if err := os.WriteFile(rest, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	e.MustRun("migrate", "--config", rest)
	closed = "http://" + proctest.FreeAddr(t)
	out = assertExit(t, e.Cmd(context.Background(), "run", "--config", rest, "--erp-url", closed, "--erp-retries", "0"), 2, "")
	want = "erpsync: erp unreachable at " + closed + " (entity invoices, source invoices): erp: page request: giving up after 1 attempts: "
	if !strings.HasPrefix(out, want) || strings.Contains(out, "memberships") {
		t.Errorf("closed port: %q, want it to start %q and not to name memberships", out, want)
	}

	assertExit(t, run(srv.SalesURL+"Customers"), 2, "erpsync: erp url "+srv.SalesURL+"Customers ends in the entity set Customers: give the service root, "+srv.SalesURL+" (the sources name the entity sets)\n")
}

// On a fresh install, migrate --plan plans the database too: CREATE
// DATABASE, then every table (a config file's entities' included), and
// creates nothing; migrate then does it, and the plan is empty.
func TestMigratePlanBeforeTheDatabaseExists(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 10, Seed: 1})
	fresh, dsn := e.freshDatabase("_fresh")
	flag := testenv.DSNFlag(dsn)
	cfg := customersConfig(t, "http://127.0.0.1:4004/odata/v4/sales/")

	r := e.Run(context.Background(), "migrate", "--plan", flag, dsn, "--config", cfg)
	lines := proctest.Lines(r.Stdout)
	if r.Code != 0 || len(lines) < 3 {
		t.Fatalf("migrate --plan on a fresh install: exit %d:\n%s", r.Code, r.Out())
	}
	createsDatabase := lines[0] == "CREATE DATABASE IF NOT EXISTS `"+fresh+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;"
	createsTable := strings.HasPrefix(lines[len(lines)-1], "CREATE TABLE IF NOT EXISTS `customers` (")
	if e.Postgres {
		// PostgreSQL's CREATE DATABASE has no IF NOT EXISTS and no
		// character set of MySQL's; a table's indexes follow it.
		createsDatabase = strings.HasPrefix(lines[0], `CREATE DATABASE "`+fresh+`"`) && !strings.ContainsAny(r.Stdout, "`") && !strings.Contains(r.Stdout, "utf8mb4")
		createsTable = slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, `CREATE TABLE IF NOT EXISTS "customers" (`) })
	}
	if !createsDatabase || !createsTable {
		t.Fatalf("migrate --plan on a fresh install: exit %d:\n%s", r.Code, r.Out())
	}
	if testenv.DatabaseExists(t, dsn) {
		t.Fatal("migrate --plan created the database")
	}
	e.MustRun("migrate", flag, dsn, "--config", cfg)
	r = e.MustRun("migrate", "--plan", flag, dsn, "--config", cfg)
	if r.Stdout != "nothing to migrate: the database matches\n" {
		t.Errorf("the plan after migrate: %q", r.Stdout)
	}
}

// The demo's result is not buried: its quarantine warnings are one line,
// and its log has colours only on a terminal without NO_COLOR.
func TestDemoLogIsOneLineWithoutColoursOffATerminal(t *testing.T) {
	t.Parallel()
	demo := func() *exec.Cmd {
		c := exec.Command(bin, "demo", "--records", "600")
		c.Env = append(os.Environ(), "NO_COLOR=")
		return c
	}
	out := assertExit(t, demo(), 0, "")
	want := regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3} WRN invalid records quarantined \(erpmock serves some on purpose\): the invalid column below counts them per instance warnings=\d+\n$`)
	if !want.MatchString(out) {
		t.Errorf("demo's stderr in a pipe:\n%q\nwant one line matching %s", out, want)
	}

	code, _, screen := runOnTerminal(t, demo())
	if code != 0 || !strings.Contains(screen, "\x1b[33mWRN\x1b[0m") {
		t.Errorf("demo on a terminal: exit %d, want 0 and a coloured WRN: %q", code, screen)
	}
	c := demo()
	c.Env = append(c.Env, "NO_COLOR=1")
	code, _, screen = runOnTerminal(t, c)
	if code != 0 || strings.Contains(screen, "\x1b[") || !strings.Contains(screen, " WRN invalid records quarantined") {
		t.Errorf("demo on a terminal with NO_COLOR: exit %d, want 0 and no colour: %q", code, screen)
	}
}

// A run most of whose items are invalid is not a success, however small:
// --max-invalid's floor of 10 no longer lets 2 invalid of 3 through.
func TestMostlyInvalidSmallRunFails(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 3, Seed: 5})
	truth := e.Mock.Truth()
	if err := e.Mock.Invalidate([]string{truth[0].ErpID, truth[1].ErpID}); err != nil {
		t.Fatal(err)
	}
	out := assertExit(t, e.Cmd(context.Background(), "run"), 1, "")
	want := "erpsync: run failed: too many invalid records: 2 of 3 items fetched were invalid (66.7%), above --max-invalid 10% (1 items): "
	if !strings.HasPrefix(lastLine(out), want) {
		t.Errorf("last line %q, want it to start %q", lastLine(out), want)
	}
	// 1 of 3 stays within the allowance.
	if err := e.Mock.Revalidate([]string{truth[0].ErpID}); err != nil {
		t.Fatal(err)
	}
	assertExit(t, e.Cmd(context.Background(), "run"), 0, "")
}

// A composite key reads company=1000,customer=C0001 in the log lines, not
// "1000\u001fC0001".
func TestCompositeKeysReadableInLogs(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 1, Seed: 1})
	srv := captest.Start(t, captest.Options{Records: 1, Seed: 4})
	// 1000/C0001's name, 24 characters, does not fit string(20).
	cfg := filepath.Join(t.TempDir(), "narrow.yaml")
	if err := os.WriteFile(cfg, []byte(`erp:
  kind: odata
entities:
  - name: customers
    source: Customers
    key: [company, customer]
    updated_at: modifiedAt
    version: ChangeCounter
    columns:
      - {name: company,  from: CompanyCode,  type: string(4)}
      - {name: customer, from: Customer,     type: string(10)}
      - {name: name,     from: CustomerName, type: string(20)}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	e.MustRun("migrate", "--config", cfg)
	r := e.MustRun("run", "--config", cfg, "--erp-url", srv.SalesURL, "--max-invalid", "100%")
	var found bool
	for _, l := range proctest.Lines(r.Stderr) {
		if strings.Contains(l, "invalid records quarantined") {
			found = true
			if !strings.Contains(l, `"erp_id":"company=1000,customer=C0001"`) {
				t.Errorf("the key is not readable: %s", l)
			}
		}
	}
	if !found {
		t.Fatalf("no quarantine line:\n%s", r.Stderr)
	}
}

// The smaller lines of the first hour: run started shows no zero until,
// runs names the jobs that have runs, relay --once says how many events
// it delivered.
func TestFirstHourLinesSayWhatHappened(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 10, Seed: 2})
	r := e.MustRun("run", "--log-level", "info")
	for _, l := range proctest.Lines(r.Stderr) {
		if strings.Contains(l, `"message":"run started"`) && strings.Contains(l, `"until"`) {
			t.Errorf("run started shows an until: %s", l)
		}
	}

	r = e.MustRun("runs", "--job", "nightly")
	want := "(no runs of job nightly yet; jobs with runs: " + e.Job + "; --job, --config or --all-jobs shows them)\n"
	if !strings.HasSuffix(r.Stdout, want) {
		t.Errorf("runs of a job without runs:\n%s\nwant it to end %q", r.Stdout, want)
	}

	re, _ := relayEnv(t, []string{"K1", "K2"}, 3)
	_, srv := recordingHook(t)
	r = re.MustRun("relay", "--once", "--events-sink", "webhook", "--events-url", srv.URL, "--events-unsigned", "--http-addr", "")
	if r.Stdout != "relay: delivered 6 events; none left pending\n" {
		t.Errorf("relay --once stdout %q", r.Stdout)
	}
}

// An unquoted decimal(15,2) in a {...} map is cut by its comma: the line
// says so and how to quote it, not `unknown key "2)"`.
func TestUnquotedDecimalSaysToQuoteIt(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../examples/customers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := strings.Replace(strings.Replace(string(b), `type: "decimal(15,2)"`, `type: decimal(15,2)`, 1), "password_file: /run/secrets/erp-password", "password: x", 1)
	if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c := exec.Command(bin, "config", "check", "--config", "c.yaml")
	c.Dir = dir
	assertExit(t, c, 2, `erpsync: c.yaml:23: type: decimal(15,2): the comma in a {...} map ends the value; quote it: type: "decimal(15,2)"`+"\n")
}

// bin/erpsync is built without the demo's embedded servers (-tags nodemo,
// 39 MB instead of 97 MB); its demo command runs the full build,
// erpsync-demo, from beside it, or says how to get it.
func TestSmallBinaryRunsTheDemoBesideIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	build := exec.Command("go", "build", "-tags", "nodemo", "-o", filepath.Join(dir, "erpsync"), "./cmd/erpsync")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags nodemo: %v\n%s", err, out)
	}
	small := filepath.Join(dir, "erpsync")
	assertExit(t, exec.Command(small, "demo"), 2, "erpsync: demo: this build of erpsync leaves the demo's embedded servers out (-tags nodemo) and finds no erpsync-demo beside it; run make demo, or make build, which writes bin/erpsync-demo\n")

	if err := os.Symlink(bin, filepath.Join(dir, "erpsync-demo")); err != nil {
		t.Fatal(err)
	}
	c := exec.Command(small, "demo", "--records", "300")
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Run(); err != nil || !strings.Contains(out.String(), "OK: the database holds exactly the ERP's latest version") {
		t.Errorf("demo through erpsync-demo: %v\n%s", err, out.String())
	}
	smallSize, fullSize := size(t, small), size(t, bin)
	t.Logf("erpsync -tags nodemo: %d bytes; with the demo: %d bytes", smallSize, fullSize)
	if smallSize >= fullSize {
		t.Errorf("the nodemo build (%d bytes) is not smaller than the full one (%d)", smallSize, fullSize)
	}
}

func size(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// runs --status is one line per entity; erpsync state shows a job's
// checkpoint; state reset --yes moves it back
// under the job lock, so that the next run reads the whole feed: a full
// refresh without SQL.
func TestStateShowAndReset(t *testing.T) {
	t.Parallel()
	e := setup(t, erpmock.Options{Records: 40, Seed: 3})
	e.MustRun("run")
	r := e.MustRun("runs", "--status")
	want := regexp.MustCompile(`^memberships +` + e.Job + ` +succeeded \S+ +\S+ +\d+h\d+m\d+s +0 +0$`)
	if lines := proctest.Lines(r.Stdout); len(lines) != 2 || !strings.HasPrefix(lines[0], "ENTITY") || !want.MatchString(lines[1]) {
		t.Errorf("runs --status:\n%s\nwant a header and a line matching %s", r.Stdout, want)
	}
	r = e.MustRun("state")
	lines := proctest.Lines(r.Stdout)
	if len(lines) != 2 || !strings.HasPrefix(lines[1], e.Job+"  2025-") {
		t.Fatalf("state after a run:\n%s", r.Stdout)
	}
	assertExit(t, e.Cmd(context.Background(), "state", "reset"), 2,
		"erpsync: state reset moves the checkpoint of job ["+e.Job+"] back to the start: its next run reads the whole feed again (a full refresh; rows are rewritten only where they differ); add --yes to do it\n")
	if r = e.MustRun("state", "reset", "--yes"); r.Stdout != "job "+e.Job+": checkpoint reset; the next run reads the whole feed\n" {
		t.Errorf("state reset --yes: %q", r.Stdout)
	}
	if r = e.MustRun("state"); !strings.Contains(r.Stdout, e.Job+"  none: the next run reads the whole feed") {
		t.Errorf("state after the reset:\n%s", r.Stdout)
	}
	report := filepath.Join(t.TempDir(), "r.json")
	e.MustRun("run", "--overlap", "0", "--report", report)
	if got := e.report(report)["fetched"]; got != 40.0 {
		t.Errorf("the run after the reset fetched %v, want the whole feed, 40", got)
	}
}
