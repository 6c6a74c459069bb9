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

	"github.com/erpsync/erpsync/internal/entity"
)

// configHelp is the -h of erpsync config and of its subcommands.
const configHelp = `Usage: erpsync config check --config FILE
       erpsync config schema

Checks a config file (its ERP connection, entities and events), or prints
its JSON Schema for an editor (docs/entities.md).

Commands:
  check      load the file and print one line per entity: its table, sources, key and columns;
             exit 2 with one line (FILE:LINE: what to fix) when the file cannot be used
  schema     print the JSON Schema (draft 2020-12) of the file on stdout

Flags of check:
  --config string
    	the config file (ERPSYNC_CONFIG)

Every flag is also an environment variable: --config is ERPSYNC_CONFIG.
`

// cmdConfig runs erpsync config: check or schema.
func cmdConfig(_ context.Context, args []string, stdout, stderr io.Writer) error {
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
		return configCheck(fs, rest, stdout)
	}
	return usageError{fmt.Errorf("config: unknown command %q: want check or schema (erpsync config -h)", sub)}
}

// configCheck loads the --config file and prints one line per entity.
func configCheck(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	var path string
	fs.StringVar(&path, "config", "", "the config file")
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
	for _, e := range f.Entities {
		fmt.Fprintln(stdout, entityLine(e))
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
