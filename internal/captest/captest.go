package captest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/testenv"
)

// Options configures the server Start runs.
type Options struct {
	// Records is the number of Memberships seeded (see Seed). Defaults to
	// 0, an empty entity set.
	Records int
	// VersionedRecords is the number of VersionedMemberships seeded (see
	// SeedVersioned). Defaults to 0.
	VersionedRecords int
	// Orders is the number of OrdersService SalesOrders seeded, each with
	// its lines (see SeedOrders). Defaults to 0.
	Orders int
	// Customers is the number of Customers seeded beside the project's
	// own, by CompanyCode: Customer(code, i) for i from 0 to n-1, changed
	// at CustomerSeedStart and every millisecond after. Seeding them spares
	// CAP the POSTs that would create them (one cost it about 7.6 ms of
	// CPU). Defaults to none.
	Customers map[string]int
	// Seed selects the seeded records. Defaults to 0.
	Seed int64
	// PageLimit is the most rows one response carries (CAP's
	// cds.query.limit, default and max): a longer result ends with an
	// @odata.nextLink. Defaults to 1000.
	PageLimit int
	// Auth turns on basic authentication: every request needs User and
	// Password of the Server (a random password), else 401. Defaults to
	// false: no authentication.
	Auth bool
	// Token, when non-empty, turns on bearer authentication instead: every
	// request needs "Authorization: Bearer <Token>", else 401. Defaults to
	// empty.
	Token string
	// ReliablePaging makes CAP's nextLink token key-based (the last row's
	// $orderby values) instead of an offset, so a row changed during a
	// paged read is not skipped. Defaults to false, CAP's default.
	ReliablePaging bool
	// Project is the CAP project to serve, with its node_modules. Defaults
	// to ProjectDir().
	Project string
	// StartTimeout bounds the server's start. Defaults to 2 minutes (a
	// loaded machine starts node slowly).
	StartTimeout time.Duration
}

// Server is a running CAP server. Its methods are safe for concurrent use
// and may be called from any goroutine.
type Server struct {
	// ServiceURL is the OData service root, ending in "/odata/v4/erp/".
	ServiceURL string
	// URL is the Memberships entity set URL, Memberships.URL.
	URL string
	// User and Password are the basic-auth credentials; both empty when
	// Options.Auth is false.
	User, Password string
	// Token is Options.Token.
	Token string
	// Memberships is the entity set without an integer version.
	Memberships *EntitySet
	// Versioned is VersionedMemberships, whose ChangeCounter every update
	// increments.
	Versioned *EntitySet
	// SalesURL is the root of SalesService, the typed entities, ending in
	// "/odata/v4/sales/".
	SalesURL string
	// Customers (key CompanyCode and Customer; Decimal, Int64, Boolean,
	// Date, a structured Address, ChangeCounter) and SalesOrders (key
	// OrderID, with a composition of Items) are SalesService's entity sets,
	// seeded from cap/db/data/sales-*.csv. Both are managed: modifiedAt is
	// stamped on every change.
	Customers, SalesOrders *TypedSet
	// OrdersURL is the root of OrdersService, the documents, ending in
	// "/odata/v4/orders/".
	OrdersURL string
	// Orders is OrdersService's SalesOrders (key OrderNo, a composition
	// of Items, ChangedAt and ChangeCounter stamped on every change),
	// seeded with SeedOrders.
	Orders *OrderSet

	client  *http.Client
	logPath string
}

// Start runs the CAP project with opt and returns it once it answers; it is
// stopped when the test ends. It fails the test when node or the project's
// node_modules is missing, or when the server does not start.
func Start(t testing.TB, opt Options) *Server {
	t.Helper()
	if opt.PageLimit <= 0 {
		opt.PageLimit = 1000
	}
	if opt.StartTimeout <= 0 {
		opt.StartTimeout = 2 * time.Minute
	}
	if opt.Project == "" {
		opt.Project = ProjectDir()
	}
	project := opt.Project
	serve := filepath.Join(project, "node_modules", ".bin", "cds-serve")
	if _, err := os.Stat(serve); err != nil {
		t.Fatalf("captest: %s is missing: run `make cap-deps` (npm ci in internal/captest/cap) first", serve)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("captest: node is not in PATH: install Node.js 20 or later (Debian: apt-get install nodejs npm)")
	}

	dir := t.TempDir()
	if err := copyProject(dir, project); err != nil {
		t.Fatalf("captest: copy project: %v", err)
	}
	if err := writeSeed(dir, opt); err != nil {
		t.Fatalf("captest: write seed data: %v", err)
	}
	if err := appendCustomers(filepath.Join(dir, "db", "data", "sales-Customers.csv"), opt.Customers); err != nil {
		t.Fatalf("captest: write seed customers: %v", err)
	}

	s := &Server{client: &http.Client{Timeout: 30 * time.Second}, logPath: filepath.Join(dir, "cds-serve.log")}
	if opt.Auth {
		s.User, s.Password = "erpsync", testenv.RandomName("pw-")
	}
	s.Token = opt.Token
	config, err := s.cdsConfig(opt)
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(filepath.Join(dir, "node_modules", ".bin", "cds-serve"), "--port", "0")
	cmd.Dir = dir
	cmd.Env = append(environ("CDS_CONFIG", "CDS_ENV", "NODE_ENV", "PORT", "HOST"),
		"CDS_CONFIG="+string(config), "HOST=127.0.0.1", "NO_COLOR=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logFile, err := os.Create(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("captest: start cds-serve: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})

	deadline := time.Now().Add(opt.StartTimeout)
	for s.ServiceURL == "" {
		if m := listening.FindStringSubmatch(s.Logs()); m != nil {
			s.ServiceURL = "http://" + m[1] + "/odata/v4/erp/"
			break
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("captest: cds-serve exited (%v) before it listened:\n%s", err, s.Logs())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("captest: cds-serve did not listen within %v:\n%s", opt.StartTimeout, s.Logs())
		}
	}
	s.Memberships = &EntitySet{URL: s.ServiceURL + "Memberships", srv: s}
	s.Versioned = &EntitySet{URL: s.ServiceURL + "VersionedMemberships", srv: s}
	s.URL = s.Memberships.URL
	s.SalesURL = strings.TrimSuffix(s.ServiceURL, "/odata/v4/erp/") + "/odata/v4/sales/"
	s.Customers = &TypedSet{URL: s.SalesURL + "Customers", srv: s}
	s.SalesOrders = &TypedSet{URL: s.SalesURL + "SalesOrders", srv: s}
	s.OrdersURL = strings.TrimSuffix(s.ServiceURL, "/odata/v4/erp/") + "/odata/v4/orders/"
	s.Orders = &OrderSet{&TypedSet{URL: s.OrdersURL + "SalesOrders", srv: s}}

	ctx, cancel := context.WithTimeout(context.Background(), opt.StartTimeout)
	defer cancel()
	if _, err := s.do(ctx, http.MethodGet, s.ServiceURL+"$metadata", nil); err != nil {
		t.Fatalf("captest: cds-serve does not answer: %v\n%s", err, s.Logs())
	}
	return s
}

// cdsConfig returns the CDS_CONFIG of opt: the page limit, the paging
// and s's credentials.
func (s *Server) cdsConfig(opt Options) ([]byte, error) {
	auth := map[string]any{"kind": "dummy"}
	switch {
	case opt.Auth && opt.Token != "":
		return nil, errors.New("captest: Options.Auth and Options.Token are exclusive")
	case opt.Auth:
		auth = map[string]any{"kind": "basic", "users": map[string]any{s.User: map[string]any{"password": s.Password}}}
	case opt.Token != "":
		auth = map[string]any{"impl": "srv/bearer-auth.js", "token": opt.Token}
	}
	return json.Marshal(map[string]any{
		"requires": map[string]any{"auth": auth},
		"query": map[string]any{"limit": map[string]any{
			"default": opt.PageLimit, "max": opt.PageLimit, "reliablePaging": opt.ReliablePaging,
		}},
	})
}

// listening matches the line the project's server.js prints once it
// listens.
var listening = regexp.MustCompile(`(?m)^erp-cap listening on (\S+:\d+)\n`)

// ProjectDir returns the directory of the CAP project (internal/captest/cap
// in the source tree).
func ProjectDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "cap")
}

// Logs returns what the server wrote so far, for failure messages.
func (s *Server) Logs() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

// copyProject copies the CAP project in src to dst, without the seed files
// that writeSeed writes, and links dst/node_modules to src's.
func copyProject(dst, src string) error {
	written := map[string]bool{}
	for _, f := range seedFiles(Options{}) {
		written[filepath.Join("db", "data", f.name)] = true
	}
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		switch {
		case rel == "node_modules":
			return filepath.SkipDir
		case written[rel]:
			return nil
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		return err
	}
	return os.Symlink(filepath.Join(src, "node_modules"), filepath.Join(dst, "node_modules"))
}

// writeSeed writes the CSV seed files of opt into the project copy dir.
func writeSeed(dir string, opt Options) error {
	data := filepath.Join(dir, "db", "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	for _, f := range seedFiles(opt) {
		b, err := f.csv()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(data, f.name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// environ returns the process environment without the named variables.
func environ(drop ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !contains(drop, name) {
			env = append(env, kv)
		}
	}
	return env
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// HTTPError is a response with a status other than 2xx.
type HTTPError struct {
	Method, URL string
	Status      int
	Body        string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("captest: %s %s: %d %s: %s", e.Method, e.URL, e.Status, http.StatusText(e.Status), e.Body)
}

// do sends one request with the server's credentials and returns the body
// of a 2xx response; any other status is an *HTTPError.
func (s *Server) do(ctx context.Context, method, url string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	switch {
	case s.User != "":
		req.SetBasicAuth(s.User, s.Password)
	case s.Token != "":
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, &HTTPError{Method: method, URL: url, Status: resp.StatusCode, Body: string(b)}
	}
	return b, nil
}
