package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/erpsync/erpsync/internal/discover"
	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/tlsconf"
)

// cmdDiscover reads the $metadata of the OData service at --erp-url and
// prints a config file with an entity per entity set, or writes it to -o.
func cmdDiscover(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var s settings
	var out string
	var force bool
	fs := newFlagSet("erpsync discover", stderr)
	fs.StringVar(&s.ERPURL, "erp-url", "", "the OData service root, like https://host/odata/v4/sales/ (its $metadata is read; required)")
	s.ERP.authFlags(fs)
	// A large service's $metadata (S/4HANA's run to megabytes) takes longer
	// than a page.
	s.erpRequestFlags(fs, 30*time.Second)
	fs.StringVar(&out, "o", "", "write the file here instead of stdout (an existing file only with --force)")
	fs.BoolVar(&force, "force", false, "with -o: overwrite the file")
	if err := parse(fs, args); err != nil {
		return err
	}
	root, query, cfg, err := discoverConfig(&s)
	if err != nil {
		return usageError{err}
	}
	if out != "" && !force {
		if _, err := os.Lstat(out); err == nil {
			return usageError{fmt.Errorf("-o %s: the file exists (--force overwrites it)", out)}
		}
	}
	g, err := erp.NewGetter(cfg)
	if err != nil {
		return usageError{err}
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	doc, err := readMetadata(ctx, g, root, query)
	var se *erp.StatusError
	switch {
	case errors.Is(err, erp.ErrUnauthorized):
		return fmt.Errorf("erp at %s refused the %s: %w", erpHost(s.ERPURL), s.ERP.credentials(s.ERPToken != ""), err)
	case errors.As(err, &se) && se.Code == http.StatusNotFound:
		return fmt.Errorf("erp at %s: GET %s: status 404 (not found): --erp-url is the service root, like https://host/odata/v4/sales/, not an entity set", erpHost(s.ERPURL), se.URL)
	case err != nil:
		return fmt.Errorf("erp unreachable at %s: %w", erpHost(s.ERPURL), err)
	}
	file, err := discover.Config(doc, discover.Options{URL: root + query})
	if err != nil {
		return fmt.Errorf("%s$metadata: %w", erpHost(root), err)
	}
	if out == "" {
		_, err := stdout.Write(file)
		return err
	}
	return writeNew(out, file, force)
}

// readMetadata GETs the $metadata of the service root root (ending in
// "/") with its query.
func readMetadata(ctx context.Context, g *erp.Getter, root, query string) ([]byte, error) {
	var doc []byte
	err := g.GetWith(ctx, "metadata", root+"$metadata"+query, http.Header{"Accept": {"application/xml"}}, func(_ http.Header, b []byte) error {
		doc = b
		return nil
	})
	return doc, err
}

// discoverConfig returns the service root of --erp-url (ending in "/"),
// its query ("?sap-client=100", sent with $metadata; "" for none) and the
// getter's config of s.
func discoverConfig(s *settings) (string, string, erp.Config, error) {
	if s.ERPURL == "" {
		return "", "", erp.Config{}, errors.New("--erp-url: the OData service root is required, like https://host/odata/v4/sales/")
	}
	raw, query, _ := strings.Cut(s.ERPURL, "?")
	if query != "" {
		query = "?" + query
	}
	u, err := erp.ParseURL("service root", raw)
	if err != nil {
		return "", "", erp.Config{}, fmt.Errorf("--erp-url: %w", err)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/"
	cfg := erp.Config{Token: s.ERPToken, Timeout: s.ERPTimeout, MaxRetries: s.ERPRetries}
	if s.ERPRetries == 0 {
		cfg.MaxRetries = -1 // erp.Config's 0 is its default, 6
	}
	if err := s.ERP.auth(&cfg); err != nil {
		return "", "", erp.Config{}, err
	}
	tlsCfg, err := loadTLS("--erp-tls-ca", tlsconf.Files{CA: s.ERPTLSCA})
	if err != nil {
		return "", "", erp.Config{}, err
	}
	cfg.TLS = tlsCfg
	return u.String(), query, cfg, nil
}

// writeNew writes b to path: a new file, or with force over an existing
// one (through a temporary file and a rename, so a reader never sees half
// of it).
func writeNew(path string, b []byte, force bool) error {
	if !force {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			return usageError{fmt.Errorf("-o %s: the file exists (--force overwrites it)", path)}
		}
		if err != nil {
			return usageError{fmt.Errorf("-o: %w", err)}
		}
		if _, err := f.Write(b); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
		return f.Close()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return usageError{fmt.Errorf("-o: %w", err)}
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
