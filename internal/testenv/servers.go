package testenv

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/erpsync/erpsync/internal/freeport"
	"github.com/erpsync/erpsync/internal/store"
)

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago,
// outside the ephemeral range (see internal/freeport).
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := freeport.TCP()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Binary returns the path of the named server binary, looked up in PATH and
// then in /usr/sbin and /usr/local/sbin; the test fails when it is missing.
func Binary(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin"} {
		if p := filepath.Join(dir, name); isExecutable(p) {
			return p
		}
	}
	t.Fatalf("%s not found in PATH, /usr/sbin or /usr/local/sbin: this test starts its own server (Debian: apt-get install redis-server mariadb-server)", name)
	return ""
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// server is a child process stopped at cleanup, with its output kept for
// failure messages.
type server struct {
	cmd *exec.Cmd
	out bytes.Buffer
	err chan error
}

func startServer(t testing.TB, bin string, args ...string) *server {
	t.Helper()
	s := &server{cmd: exec.Command(bin, args...), err: make(chan error, 1)}
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() { s.err <- s.cmd.Wait() }()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-s.err
	})
	return s
}

// waitUp calls ready until it returns nil, the process exits or two minutes
// pass (a loaded machine starts servers slowly); the test fails unless
// ready succeeded.
func (s *server) waitUp(t testing.TB, what string, logFile string, ready func() error) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := ready()
		if err == nil {
			return
		}
		select {
		case werr := <-s.err:
			s.err <- werr
			t.Fatalf("%s exited (%v) before it answered: %v\n%s%s", what, werr, err, s.out.String(), readLog(logFile))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer within 2 minutes: %v\n%s%s", what, err, s.out.String(), readLog(logFile))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func readLog(path string) string {
	if path == "" {
		return ""
	}
	b, _ := os.ReadFile(path)
	return string(b)
}

// TLSRedis is a redis-server that a test started with TLS only: no plain
// port, the default user off, one ACL user with a password.
type TLSRedis struct {
	Addr     string // 127.0.0.1:port, TLS
	User     string
	Password string
}

// StartTLSRedis starts redis-server on a free port with a certificate from
// ca, the ACL user user with password and the ACL rules given (default:
// every key, channel and command, "~* &* +@all"), and no persistence. It is
// stopped when the test ends.
func StartTLSRedis(t testing.TB, ca *CA, user, password string, rules ...string) *TLSRedis {
	t.Helper()
	bin := Binary(t, "redis-server")
	cert, key := ca.Issue(t, RandomName("redis-"))
	port := strconv.Itoa(FreePort(t))
	args := []string{
		"--port", "0", "--tls-port", port, "--bind", "127.0.0.1",
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca.File,
		"--tls-auth-clients", "no",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir(),
		"--user", "default", "off",
	}
	if len(rules) == 0 {
		rules = []string{"~*", "&*", "+@all"}
	}
	args = append(append(args, "--user", user, "on", ">"+password), rules...)
	s := startServer(t, bin, args...)
	r := &TLSRedis{Addr: "127.0.0.1:" + port, User: user, Password: password}
	tc := ca.ClientTLS()
	tc.ServerName = "127.0.0.1"
	s.waitUp(t, "redis-server (TLS)", "", func() error {
		rdb := redis.NewClient(&redis.Options{Addr: r.Addr, Username: user, Password: password, TLSConfig: tc, MaxRetries: -1})
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return rdb.Ping(ctx).Err()
	})
	return r
}

// TLSMariaDB is a mariadbd that a test started in its own data directory,
// with TLS on (not required: users decide with REQUIRE SSL).
type TLSMariaDB struct {
	Addr string // 127.0.0.1:port
	// RootDSN names no database; root has no password and may connect in
	// plain text, to create users and databases.
	RootDSN string
}

// StartTLSMariaDB initialises a data directory with mariadb-install-db and
// starts mariadbd on a free port with a certificate from ca. It is stopped
// when the test ends. It takes a few seconds.
func StartTLSMariaDB(t testing.TB, ca *CA) *TLSMariaDB {
	t.Helper()
	install := Binary(t, "mariadb-install-db")
	bin := Binary(t, "mariadbd")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	small := []string{"--innodb-log-file-size=4M", "--innodb-buffer-pool-size=16M"}
	args := append([]string{"--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=normal", "--skip-test-db"}, small...)
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, install, args...).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	cert, key := ca.Issue(t, RandomName("mariadb-"))
	port := strconv.Itoa(FreePort(t))
	logFile := filepath.Join(dir, "error.log")
	args = append([]string{"--no-defaults", "--datadir=" + data, "--socket=" + filepath.Join(dir, "sock"),
		"--port=" + port, "--bind-address=127.0.0.1", "--skip-log-bin", "--skip-name-resolve",
		"--pid-file=" + filepath.Join(dir, "pid"), "--log-error=" + logFile,
		"--ssl-ca=" + ca.File, "--ssl-cert=" + cert, "--ssl-key=" + key}, small...)
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	s := startServer(t, bin, args...)
	m := &TLSMariaDB{Addr: "127.0.0.1:" + port}
	m.RootDSN = "root@tcp(" + m.Addr + ")/"
	s.waitUp(t, "mariadbd (TLS)", logFile, func() error {
		st, err := store.Open(context.Background(), m.RootDSN+"mysql", &store.Options{MaxOpenConns: 1, PingTimeout: 2 * time.Second})
		if err != nil {
			return err
		}
		return st.Close()
	})
	return m
}

// ExecSQL runs statements, in order, through a connection to dsn.
func ExecSQL(t testing.TB, dsn string, stmts ...string) {
	t.Helper()
	st, err := store.Open(context.Background(), dsn, &store.Options{MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, q := range stmts {
		if err := st.DB().Exec(q).Error; err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
