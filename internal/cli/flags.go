package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// checkedValue is a flag whose value has a range: parse checks it once,
// after the flags and the environment are read, and names where the value
// came from.
type checkedValue struct {
	flag.Value
	want func() string // what the value must be; "" when it is
}

// String is the value's; "" for the zero checkedValue flag.PrintDefaults
// makes.
func (c *checkedValue) String() string {
	if c == nil || c.Value == nil {
		return ""
	}
	return c.Value.String()
}

// Get is the value's, for messages and -h.
func (c *checkedValue) Get() any { return c.Value.(flag.Getter).Get() }

// checked defines name in fs through define (fs.IntVar and the like, on a
// scratch set), then wraps its value with want.
func checked(fs *flag.FlagSet, name string, define func(*flag.FlagSet), want func() string) {
	scratch := flag.NewFlagSet("", flag.ContinueOnError)
	define(scratch)
	f := scratch.Lookup(name)
	fs.Var(&checkedValue{Value: f.Value, want: want}, name, f.Usage)
}

// intVar defines an int flag of lo..hi (hi math.MaxInt: no upper bound).
func intVar(fs *flag.FlagSet, p *int, name string, value, lo, hi int, usage string) {
	checked(fs, name, func(s *flag.FlagSet) { s.IntVar(p, name, value, usage) }, func() string {
		switch {
		case *p >= lo && *p <= hi:
			return ""
		case hi == math.MaxInt:
			return fmt.Sprintf("want at least %d", lo)
		}
		return fmt.Sprintf("want %d..%d", lo, hi)
	})
}

// durationVar defines a duration flag of at least lo; lo 0 says what 0
// means in the message, none.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value, lo time.Duration, none, usage string) {
	checked(fs, name, func(s *flag.FlagSet) { s.DurationVar(p, name, value, usage) }, func() string {
		switch {
		case *p >= lo:
			return ""
		case lo == 0:
			return "must not be negative (0: " + none + ")"
		}
		return "want at least " + lo.String()
	})
}

// nameVar defines a string flag of 1..150 characters: a name.
func nameVar(fs *flag.FlagSet, p *string, name, value, usage string) {
	checked(fs, name, func(s *flag.FlagSet) { s.StringVar(p, name, value, usage) }, func() string {
		if n := len(*p); n < 1 || n > 150 {
			return "want 1..150 characters"
		}
		return ""
	})
}

// origin is how a message names a flag's value: the flag and, when it was
// not given, the environment variable it came from.
func origin(f *flag.Flag, value string, given bool) string {
	if _, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok {
		if g, ok := f.Value.(flag.Getter); ok {
			if _, ok := g.Get().(string); ok {
				value = fmt.Sprintf("%q", value)
			}
		}
	}
	s := "--" + f.Name + " " + value
	if !given {
		s += " (from " + envName(f.Name) + ")"
	}
	return s
}

// wantOf says what a value of f's type looks like.
func wantOf(f *flag.Flag) string {
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case int, int64, uint, uint64:
			return "want an integer"
		case time.Duration:
			return "want a duration, like 30s or 5m"
		case bool:
			return "want true or false"
		case float64:
			return "want a number"
		}
	}
	return "bad value"
}

// helpRequest is -h: Main prints the help of fs to stdout, exit 0.
type helpRequest struct {
	fs    *flag.FlagSet
	usage func() // the flag set's own Usage, if it had one
}

func (h helpRequest) Error() string     { return "help requested" }
func (h helpRequest) Is(err error) bool { return err == flag.ErrHelp }

// parseArgs parses args into fs. An unknown flag is one line with the
// nearest flag; a bad value names the flag and what it wants.
func parseArgs(fs *flag.FlagSet, args []string) error {
	usage := fs.Usage
	fs.Usage = func() {}
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return helpRequest{fs, usage}
	case err != nil:
		return usageError{flagError(fs, err)}
	case fs.NArg() > 0:
		return usageError{fmt.Errorf("unexpected argument %q (%s -h lists the flags)", fs.Arg(0), fs.Name())}
	}
	return nil
}

// flagError rewrites the flag package's parse errors.
func flagError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		name = strings.TrimLeft(name, "-")
		if near := nearest(fs, name); near != "" {
			return fmt.Errorf("unknown flag --%s; did you mean --%s? (%s -h lists the flags)", name, near, fs.Name())
		}
		return fmt.Errorf("unknown flag --%s (%s -h lists the flags)", name, fs.Name())
	}
	var value, name string
	if n, _ := fmt.Sscanf(msg, "invalid value %q for flag -%s", &value, &name); n == 2 {
		name = strings.TrimSuffix(name, ":")
		if f := fs.Lookup(name); f != nil {
			return fmt.Errorf("%s: %s", origin(f, value, true), wantOf(f))
		}
	}
	return err
}

// nearest is the flag of fs closest to name, within two edits; "" when none.
func nearest(fs *flag.FlagSet, name string) string {
	best, bestD := "", 3
	fs.VisitAll(func(f *flag.Flag) {
		if d := editDistance(name, f.Name); d < bestD {
			best, bestD = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance of a and b, a transposition
// counting one.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// parse parses args, then fills every flag not given from its environment
// variable, then checks every value's range once. A bad value names the
// flag and the variable it came from. Errors are usage errors, except a
// helpRequest for -h.
func parse(fs *flag.FlagSet, args []string) error {
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s", origin(f, v, false), wantOf(f)))
			}
		}
	})
	if len(errs) == 0 {
		errs = checkRanges(fs, given)
	}
	if len(errs) > 0 {
		_ = resolveSecrets(fs) // the redactor learns the secrets all the same
		return usageError{errors.Join(errs...)}
	}
	if err := resolveSecrets(fs); err != nil {
		return err
	}
	if errs := checkExclusive(fs, given); len(errs) > 0 {
		return usageError{errors.Join(errs...)}
	}
	return nil
}

// ParseFlags parses the flags of a command outside this package (loadtest,
// demo): no environment, the same messages and range checks.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { given[f.Name] = true })
	if errs := checkRanges(fs, given); len(errs) > 0 {
		return usageError{errors.Join(errs...)}
	}
	return nil
}

// IntVar defines an int flag of lo..hi for ParseFlags.
func IntVar(fs *flag.FlagSet, p *int, name string, value, lo, hi int, usage string) {
	intVar(fs, p, name, value, lo, hi, usage)
}

func checkRanges(fs *flag.FlagSet, given map[string]bool) []error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if c, ok := f.Value.(*checkedValue); ok {
			if want := c.want(); want != "" {
				errs = append(errs, fmt.Errorf("%s: %s", origin(f, f.Value.String(), given[f.Name]), want))
			}
		}
	})
	return errs
}

// about is what each command does: the paragraph that starts its -h.
var about = map[string]string{
	"erpsync migrate": `Applies the embedded SQL migrations, creating the database when it is
missing, then creates the entities' tables and applies additive changes to
them (refusing, exit 2, a change that could lose data). Idempotent, and safe
when several instances start at once; run it before the other commands after
every upgrade. --plan prints the statements and changes nothing.`,
	"erpsync run": `One incremental pass from the job checkpoint, under the job lock: reads the
ERP's records changed since the checkpoint (less --overlap), writes each new
or changed one to the database under its record lock, then moves the
checkpoint. When another instance holds the job lock it records a skipped run
and exits 0. Exit 1 when the run failed (too many invalid records, a feed
whose paging does not advance, records that failed after their retries); exit
2, nothing written, on bad flags or a dependency that does not answer at
start.`,
	"erpsync backfill": `Syncs one bounded window (--since, --until, --shard) without the job lock and
without moving the checkpoint; started again, it resumes where it stopped.
Exit codes as for run.`,
	"erpsync schedule": `Runs ` + "`run`" + ` on every tick (--every or --cron) until SIGTERM, and serves
/metrics, /healthz and /readyz. Replicas take turns through the job lock.`,
	"erpsync verify": `Pages the whole ERP feed and compares it with the table (missing, stale,
unknown, ahead rows); exit 1 on any difference.`,
	"erpsync reconcile": `Soft-deletes the rows whose records the ERP no longer has, restores the ones
that came back and repairs what verify finds, within the deletion guard.`,
	"erpsync relay": `Delivers the outbox's change events (erpsync_events) to the sink of
--events-sink or the --config file's events: block, in order, at least once,
and marks what the sink acknowledged, under the relay lock. Runs until
SIGTERM (the batch in hand finished within --grace, exit 0), or one pass
with --once; a second relay skips while one holds the lock. A webhook's
4xx other than 408 and 429 stops it with one line, exit 1, the events left
pending. Serves /metrics, /healthz and /readyz.`,
	"erpsync events":   "Prints the outbox per entity: pending and delivered events, and how long the\noldest pending one has waited.",
	"erpsync runs":     "Prints the run history, newest first, skipped runs included.",
	"erpsync discover": "Reads the $metadata of the OData service at --erp-url and prints a config file\nwith an entity per entity set: keys, typed columns, updated_at and version\nguessed (each guess with a comment to check). No credential goes in the file.",
}

// flagGroups are the groups of a command's -h after its own flags, in
// order, each listing its flags in the order -h prints them; a name ending
// in * is a prefix. A flag is in the first group, Advanced first, that
// names it; a flag of none is the command's own.
var flagGroups = []struct{ title, names string }{
	{"Sync", "job workers fetchers page-size lock-ttl overlap max-invalid max-attempts chunk-size db-writers grace max-duration take-table"},
	{"Database", "mysql-dsn postgres-dsn migrate-dsn"},
	{"Redis and locks", "redis-addr redis-username redis-password redis-db redis-tls lock-prefix"},
	{"ERP", "erp-url erp-kind erp-token erp-username erp-password erp-oauth-* erp-map erp-status-map erp-paging erp-timeout erp-retries erp-rate erp-*"},
	{"Output", "log-* report json"},
	{advanced, "mysql-tls-* redis-tls-* redis-addrs redis-cluster erp-tls-ca erp-rate-key erp-path erp-param erp-records-path erp-cursor-path erp-count-path erp-count-field erp-rest-paging"},
}

// advanced is the last group of -h: the flags few setups need.
const advanced = "Advanced (TLS files, Redlock and Cluster, REST API shape, rate key)"

// matches reports whether pattern (a name, or a prefix ending in *)
// names the flag name.
func matches(pattern, name string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, p)
	}
	return pattern == name
}

// groupOf is the title of name's group; "" for a command's own flag.
func groupOf(name string) string {
	in := func(names string) bool {
		return slices.ContainsFunc(strings.Fields(names), func(p string) bool { return matches(p, name) })
	}
	if in(flagGroups[len(flagGroups)-1].names) {
		return advanced
	}
	for _, g := range flagGroups {
		if in(g.names) {
			return g.title
		}
	}
	return ""
}

// printHelp writes fs's -h: what the command does, then its own flags,
// then the others by group, the rarely needed ones last. A secret's
// --x-file is named on the line of --x.
func printHelp(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s [flags]\n\n%s\n", fs.Name(), about[fs.Name()])
	shown := map[string]bool{}
	section := func(group, title, patterns string) {
		var b strings.Builder
		for _, p := range strings.Fields(patterns) {
			fs.VisitAll(func(f *flag.Flag) {
				name, isFile := strings.CutSuffix(f.Name, "-file")
				if shown[f.Name] || !matches(p, f.Name) || groupOf(f.Name) != group || isFile && fs.Lookup(name) != nil {
					return
				}
				shown[f.Name] = true
				writeFlag(&b, fs, f)
			})
		}
		if b.Len() > 0 {
			fmt.Fprintf(w, "\n%s:\n%s", title, b.String())
		}
	}
	section("", "Flags of "+strings.TrimPrefix(fs.Name(), "erpsync "), "*")
	for _, g := range flagGroups {
		section(g.title, g.title, g.names)
	}
	fmt.Fprintf(w, "\nEvery flag is also an environment variable: --lock-ttl is %s.\n", envName("lock-ttl"))
	fmt.Fprintln(w, "docs/configuration.md describes every flag; docs/troubleshooting.md each error line.")
}

// writeFlag writes f's two lines of -h.
func writeFlag(b *strings.Builder, fs *flag.FlagSet, f *flag.Flag) {
	typ, usage := flag.UnquoteUsage(f)
	if typ == "value" {
		typ = typeName(f)
	}
	fmt.Fprintf(b, "  --%s %s\n    \t%s", f.Name, typ, usage)
	if fs.Lookup(f.Name+"-file") != nil {
		fmt.Fprintf(b, " (or --%s-file FILE)", f.Name)
	}
	if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" {
		fmt.Fprintf(b, " (default %s)", f.DefValue)
	}
	b.WriteString("\n")
}

// typeName is the -h placeholder of f's value.
func typeName(f *flag.Flag) string {
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case int:
			return "int"
		case time.Duration:
			return "duration"
		case string:
			return "string"
		}
	}
	return "value"
}
