package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/erpsync/erpsync/internal/discover"
	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/erp"
)

// configHelp is the -h of erpsync config and of its subcommands.
const configHelp = `Usage: erpsync config check --config FILE [--online]
       erpsync config schema

Checks a config file (its ERP connection, database, entities and events), or prints
its JSON Schema for an editor (docs/entities.md).

Commands:
  check      load the file and print one line per entity: its table, sources, key and columns;
             exit 2 with one line (FILE:LINE: what to fix) when the file cannot be used
  schema     print the JSON Schema (draft 2020-12) of the file on stdout

Flags of check:
  --config string
    	the config file (ERPSYNC_CONFIG)
  --online
    	also read the OData service's $metadata (V4 or V2) with the file's erp settings and print one
    	line per mistake (FILE:LINE: ...): a from that names no property, a column type that cannot
    	hold the property's values, a cursor the service cannot filter on, an entity set the service
    	lacks; exit 2 on any, or when the ERP cannot be read (ERPSYNC_ONLINE)
  --erp-url, --erp-username, --erp-password, --erp-token, --erp-oauth-*, --erp-tls-ca, --erp-timeout, --erp-retries
    	with --online: over the file's erp block, as for the other commands

Every flag is also an environment variable: --config is ERPSYNC_CONFIG.
`

// cmdConfig runs erpsync config: check or schema.
func cmdConfig(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New("config: want a command, check --config FILE or schema (erpsync config -h)")}
	}
	sub, rest := args[0], args[1:]
	fs := newFlagSet("erpsync config "+sub, stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), configHelp) }
	switch sub {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, configHelp)
		return nil
	case "schema":
		if err := parseArgs(fs, rest); err != nil {
			return err
		}
		_, err := stdout.Write(entity.JSONSchema())
		return err
	case "check":
		return configCheck(ctx, fs, rest, stdout)
	}
	return usageError{fmt.Errorf("config: unknown command %q: want check or schema (erpsync config -h)", sub)}
}

// configCheck loads the --config file and prints one line per entity;
// with --online it then checks the entities of an OData file against the
// service's $metadata (checkOnline).
func configCheck(ctx context.Context, fs *flag.FlagSet, args []string, stdout io.Writer) error {
	var path string
	var online bool
	var s settings
	fs.StringVar(&path, "config", "", "the config file")
	fs.BoolVar(&online, "online", false, "also read the OData service's $metadata with the file's erp settings and check each entity against it")
	fs.StringVar(&s.ERPURL, "erp-url", "", "with --online: the OData service root (default: the file's erp.url)")
	s.ERP.authFlags(fs)
	s.erpRequestFlags(fs, 30*time.Second)
	if err := parse(fs, args); err != nil {
		return err
	}
	if path == "" {
		return usageError{fmt.Errorf("config check: no file: want --config FILE (or %s)", envName("config"))}
	}
	f, err := entity.Load(path)
	if err != nil {
		return usageError{err}
	}
	// The database block's DSN is of its kind's form; a dsn_file is read
	// by the commands that open the database, as the erp block's
	// password_file is by --online.
	if f.Database != nil {
		if _, _, _, err := fileDSN(fs, f, false); err != nil {
			return usageError{err}
		}
	}
	for _, e := range f.Entities {
		fmt.Fprintln(stdout, entityLine(e))
	}
	if !online {
		return nil
	}
	if err := s.applyFileERP(fs, f); err != nil {
		return usageError{err}
	}
	return checkOnline(ctx, &s, f, stdout)
}

// checkOnline reads the $metadata of the file's OData service root and
// prints, for each entity and each of its entity sets, one line per
// mistake discover.Check finds (FILE:LINE: ..., a warning's as FILE:LINE:
// warning: ...). It fails with exit 2 when a mistake is an error, or when
// the $metadata cannot be read.
func checkOnline(ctx context.Context, s *settings, f *entity.File, stdout io.Writer) error {
	if f.ERP.Kind != entity.KindOData {
		return usageError{fmt.Errorf("%s: --online checks an OData service (erp.kind: odata); this file's erp.kind is %q", f.Path, f.ERP.Kind)}
	}
	root, query, cfg, err := discoverConfig(s)
	if err != nil {
		return usageError{err}
	}
	g, err := erp.NewGetter(cfg)
	if err != nil {
		return usageError{err}
	}
	doc, err := readMetadata(ctx, g, root, query)
	if err != nil {
		return usageError{fmt.Errorf("%s: cannot read the ERP's %s$metadata: %w", f.Path, erpHost(root), err)}
	}
	errs := 0
	for _, e := range f.Entities {
		seen := map[string]bool{}
		for _, src := range e.Sources {
			if seen[src.Name] {
				continue
			}
			seen[src.Name] = true
			found, err := discover.Check(doc, src.Name, e)
			if err != nil {
				return usageError{fmt.Errorf("%s: the ERP's %s$metadata: %w", f.Path, erpHost(root), err)}
			}
			for _, x := range found {
				if x.Warning {
					fmt.Fprintf(stdout, "%s:%d: warning: %s\n", f.Path, x.Line, x.Msg)
					continue
				}
				errs++
				fmt.Fprintf(stdout, "%s:%d: %s\n", f.Path, x.Line, x.Msg)
			}
		}
	}
	if errs > 0 {
		return usageError{fmt.Errorf("%s: %d mistakes against the service's $metadata", f.Path, errs)}
	}
	return nil
}

// entityLine is an entity's line of erpsync config check: its table,
// sources, key and columns.
func entityLine(e *entity.Entity) string {
	srcs := make([]string, len(e.Sources))
	for i, s := range e.Sources {
		srcs[i] = s.Name
		var set []string
		for _, k := range e.Key {
			if v, ok := s.Set[k]; ok {
				set = append(set, k+"="+v)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(s.Params)) {
			set = append(set, "param "+k+"="+s.Params[k])
		}
		if len(set) > 0 {
			srcs[i] += " (" + strings.Join(set, ", ") + ")"
		}
	}
	cols := make([]string, len(e.Columns))
	for i, c := range e.Columns {
		cols[i] = c.Name + " " + c.Type.String()
	}
	line := fmt.Sprintf("%s: table %s, sources %s, key %s, columns %s", e.Name, e.TableName(),
		strings.Join(srcs, "; "), strings.Join(e.Key, ", "), strings.Join(cols, ", "))
	for _, c := range e.Children {
		line += fmt.Sprintf("; child %s: table %s, key %s, %d columns", c.Name, c.Table, strings.Join(c.Key, ", "), len(c.Columns))
	}
	return line
}
