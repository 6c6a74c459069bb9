// Command erpmock serves the mock ERP membership feed of package erpmock.
//
//	erpmock --addr 127.0.0.1:8090 --records N --seed S [--token T] [--face spec|v2 [--no-rev]] [fault flags]
//
// Every flag has an environment variable: ERPMOCK_ and the flag's name in
// upper case with '-' as '_' (ERPMOCK_ERROR_RATE for --error-rate). The flag
// wins. Faults can be switched at runtime through /admin/faults. The API
// follows api/erp-api.yaml, which it serves at /openapi.yaml.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/erpsync/erpsync/erpmock"
)

func main() {
	os.Exit(run(os.Args[1:], os.LookupEnv))
}

// run returns the exit code: 0 after a clean shutdown, 1 when serving
// failed, 2 on bad usage or when the address cannot be bound.
func run(args []string, lookupEnv func(string) (string, bool)) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	addr, opt, err := parse(args, lookupEnv)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2 // the flag package has printed the problem and the usage
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("listen", "err", err)
		return 2
	}
	// Cancelling the requests' base context ends latency and hung
	// responses at once on shutdown; the others finish.
	base, abort := context.WithCancel(context.Background())
	defer abort()
	srv := &http.Server{
		Handler:           erpmock.New(opt),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	log.Info("erpmock listening", "addr", ln.Addr().String(), "url", "http://"+ln.Addr().String(),
		"records", opt.Records, "seed", opt.Seed, "token", opt.Token != "", "face", opt.Face.String(), "no_rev", opt.NoRev, "tenants", len(opt.Tenants))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		log.Error("serve", "err", err)
		return 1
	case <-ctx.Done():
	}
	log.Info("erpmock shutting down")
	abort()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	return 0
}

// errUsage is a flag error that the flag package has reported.
var errUsage = errors.New("erpmock: bad usage")

// parse reads the flags, with defaults from the environment.
func parse(args []string, lookupEnv func(string) (string, bool)) (string, erpmock.Options, error) {
	fs := flag.NewFlagSet("erpmock", flag.ContinueOnError)
	var opt erpmock.Options
	addr := fs.String("addr", "127.0.0.1:8090", "listen `address`")
	fs.IntVar(&opt.Records, "records", 10000, "number of records")
	fs.Int64Var(&opt.Seed, "seed", 1, "seed of the records and of the fault decisions")
	fs.StringVar(&opt.Token, "token", "", "bearer `token` the API requires (empty: none)")
	fs.Func("face", "API the records are served under: spec (/api/v1/memberships, the default) or v2 (/v2/members/changes, a homegrown shape)", func(s string) (err error) {
		opt.Face, err = erpmock.ParseFace(s)
		return err
	})
	fs.BoolVar(&opt.NoRev, "no-rev", false, "--face v2: leave rev out of the items (a source takes the version from modified)")
	fs.Func("tenants", "spread the records over these `tenants`, comma-separated (each item carries \"tenant\"; ?tenant=T serves T's records only)", func(s string) error {
		opt.Tenants = nil
		for _, t := range strings.Split(s, ",") {
			if t = strings.TrimSpace(t); t != "" {
				opt.Tenants = append(opt.Tenants, t)
			}
		}
		return nil
	})
	opt.Faults.Flags(fs, "")

	var envErr error
	fs.VisitAll(func(fl *flag.Flag) {
		name := "ERPMOCK_" + strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
		if v, ok := lookupEnv(name); ok && envErr == nil {
			if err := fl.Value.Set(v); err != nil {
				envErr = fmt.Errorf("erpmock: %s=%q: %w", name, v, err)
			}
		}
	})
	if envErr != nil {
		return "", opt, envErr
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return "", opt, err
	} else if err != nil {
		return "", opt, errUsage
	}
	if fs.NArg() > 0 {
		return "", opt, fmt.Errorf("erpmock: unexpected arguments: %q", fs.Args())
	}
	if opt.Records < 0 {
		return "", opt, errors.New("erpmock: --records must be >= 0")
	}
	return *addr, opt, opt.Faults.Validate()
}
