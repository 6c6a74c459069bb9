// Command erpsync-bench measures erpsync's backfill against the ceiling of
// the database and the naive seed pipeline, the same backfill with its
// locks on a Redlock of five masters and on a Redis Cluster of three (each
// started by the bench), its re-run and its memory, and the backfill of a
// 12-column entity of a config file against the raw insert of its rows,
// that backfill with change events on against off and `erpsync relay
// --once` delivering its outbox to a webhook and to NATS JetStream, the
// backfills of memberships, of the typed entity and of documents on
// PostgreSQL against its raw bulk inserts (with --postgres-dsn), and
// prints markdown tables (see package internal/bench). `make bench`
// runs it.
//
//	erpsync-bench [--records 200000] [--big 1000000] [--quick] [--repeat N] [--only backfill,rerun] [--nats-url nats://127.0.0.1:4222] [--postgres-dsn postgres://...]
//	              [--workers W] [--chunk-size C] [--page-size P] [--child-args "..."] [--database-cpus 0]
//	              [--cpuprofile FILE [--rerun] [--profile-locks redis|redlock|cluster] [--profile-entity memberships|typed|typed-events]] [--stages]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/erpsync/erpsync/internal/bench"
	"github.com/erpsync/erpsync/internal/syncer"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	var cfg bench.Config
	var quick, rerun, stages bool
	var only, childArgs, jsonOut, cpuProfile, profileLocks, profileEntity, databaseCPUs string
	var workers, chunk, page int
	fs := flag.NewFlagSet("erpsync-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Bin, "erpsync-bin", "bin/erpsync", "erpsync binary of the backfills")
	fs.StringVar(&cfg.MySQLDSN, "mysql-dsn", bench.DefaultMySQLDSN, "MySQL DSN; the database (its name must contain \"bench\") is created, migrated and emptied")
	fs.StringVar(&cfg.PostgresDSN, "postgres-dsn", "", "PostgreSQL DSN of the PostgreSQL rows (pg-backfill, pg-typed, pg-documents), e.g. "+bench.DefaultPostgresDSN+"; the database (its name must contain \"bench\") is created, migrated and emptied (default none: no PostgreSQL rows)")
	fs.StringVar(&cfg.RedisAddr, "redis-addr", bench.DefaultRedisAddr, "Redis address")
	fs.IntVar(&cfg.Records, "records", bench.DefaultRecords, "records of the ceiling, seed, backfill and re-run")
	fs.IntVar(&cfg.SeedRecords, "seed-records", 0, "records the seed pipeline writes (default --records)")
	fs.IntVar(&cfg.Small, "small", bench.DefaultSmall, "records of the small backfill of the memory comparison")
	fs.IntVar(&cfg.Big, "big", bench.DefaultBig, "records of the big backfill of the memory comparison (0: skip it)")
	fs.BoolVar(&quick, "quick", false, "a small smoke run: 5,000 records, memory 2,000 vs 20,000, one round")
	fs.IntVar(&cfg.Repeat, "repeat", 3, "rounds of the ceiling, backfill and re-run, interleaved; each keeps its best (a machine shared with other work varies by 2-3x from run to run)")
	fs.StringVar(&only, "only", "", "comma-separated measurements: ceiling, seed, backfill, typed, documents, slow, redlock, cluster, rerun, memory, events, relay, pg-backfill, pg-typed, pg-documents (default all, the pg- ones with --postgres-dsn; pg-backfill is the memberships backfill on PostgreSQL against the faster of a multi-row INSERT ... ON CONFLICT DO NOTHING and a COPY into a temporary table then INSERT ... SELECT ... ON CONFLICT, pg-typed and pg-documents the typed and documents backfills on PostgreSQL against their raw inserts; slow is the backfill and the verify of an ERP of 40 ms a page at --fetchers 1 against 8; typed is the backfill of a 12-column entity of a config file and the raw insert of its rows, and is compared with backfill; documents is the backfill of headers with 5-20 lines each against the raw insert of the same rows, in lines/s; events is the typed backfill with change events on against off; relay is erpsync relay --once delivering its outbox to a webhook and to NATS JetStream; redlock and cluster start their own redis-servers, and need redis-server and redis-cli in PATH)")
	fs.StringVar(&cfg.NATSURL, "nats-url", bench.DefaultNATSURL, "NATS JetStream server of the relay measurement (it makes and deletes a stream of its own)")
	fs.IntVar(&workers, "workers", 0, "--workers of the backfills (0: erpsync's default)")
	fs.IntVar(&chunk, "chunk-size", 0, "--chunk-size of the backfills (0: erpsync's default)")
	fs.IntVar(&page, "page-size", 0, "--page-size of the backfills (0: erpsync's default)")
	fs.StringVar(&childArgs, "child-args", "", "more flags for the backfill processes, space-separated")
	fs.StringVar(&databaseCPUs, "database-cpus", "", "CPUs to run the database servers on, alone, for the whole run (e.g. 0, or 0-1 of 4): the bench, its erpsync processes and Redis run on the others, as with a database on a host of its own; the affinities are put back at the end (default: all share every CPU)")
	fs.IntVar(&cfg.SlowFetchers, "slow-fetchers", bench.SlowFetchers, "the --fetchers of the slow ERP's row, against --fetchers 1 (2 to 256)")
	fs.StringVar(&jsonOut, "json", "", "also write the results as JSON to this file")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "instead: run one backfill of --records in this process and write its CPU profile here (on PostgreSQL with --postgres-dsn)")
	fs.StringVar(&profileLocks, "profile-locks", "redis", "with --cpuprofile: where the record locks live: redis (--redis-addr), redlock (5 redis-servers of its own) or cluster (a 3-master Redis Cluster of its own)")
	fs.StringVar(&profileEntity, "profile-entity", "memberships", "with --cpuprofile: the entity of the backfill: memberships (erpmock's feed), typed (the 12-column "+bench.TypedEntity+" of the typed row) or typed-events (the same with change events on, as the events row's)")
	fs.BoolVar(&rerun, "rerun", false, "with --cpuprofile: profile the re-run over unchanged rows instead")
	fs.BoolVar(&stages, "stages", false, "instead: time each stage of the write path alone, in this process, with --workers, --chunk-size and --page-size")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "erpsync-bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if quick {
		if !given["records"] {
			cfg.Records = 5000
		}
		if !given["small"] {
			cfg.Small = 2000
		}
		if !given["big"] {
			cfg.Big = 20000
		}
		if !given["repeat"] {
			cfg.Repeat = 1
		}
	}
	if only != "" {
		cfg.Only = strings.Split(only, ",")
	}
	if databaseCPUs != "" {
		cpus, err := bench.ParseCPUs(databaseCPUs)
		if err != nil {
			fmt.Fprintf(stderr, "erpsync-bench: --database-cpus: %v\n", err)
			return 2
		}
		cfg.DatabaseCPUs = cpus
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"--workers", workers}, {"--chunk-size", chunk}, {"--page-size", page}} {
		if f.v > 0 {
			cfg.ChildArgs = append(cfg.ChildArgs, f.name, strconv.Itoa(f.v))
		}
	}
	cfg.ChildArgs = append(cfg.ChildArgs, strings.Fields(childArgs)...)
	cfg.Log = stderr

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	if stages {
		rs, err := bench.Stages(ctx, cfg, workers, chunk, page)
		(&bench.Results{Stages: rs}).Markdown(stdout)
		if err != nil {
			fmt.Fprintf(stderr, "erpsync-bench: %v\n", err)
			return 1
		}
		return 0
	}
	if cpuProfile != "" {
		sc := syncer.Config{Workers: workers, ChunkSize: chunk, PageSize: page}
		switch profileEntity {
		case "memberships":
		case "typed", "typed-events":
			sc.Entity = bench.TypedEntity
		default:
			fmt.Fprintf(stderr, "erpsync-bench: --profile-entity %q: want memberships, typed or typed-events\n", profileEntity)
			return 2
		}
		r, err := bench.Profile(ctx, cfg, sc, rerun, profileEntity == "typed-events", cpuProfile, profileLocks)
		if err != nil {
			fmt.Fprintf(stderr, "erpsync-bench: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s: %d records in %.2f s, %.0f records/s (%s); CPU profile in %s\n", r.Name, r.Records, r.Seconds, r.PerSecond, r.Note, cpuProfile)
		return 0
	}

	res, err := bench.Run(ctx, cfg)
	if res != nil {
		fmt.Fprintln(stdout)
		res.Markdown(stdout)
		if jsonOut != "" {
			b, _ := json.MarshalIndent(struct {
				*bench.Results
				Goals  []bench.Goal  `json:"goals"`
				Bounds []bench.Bound `json:"bounds,omitempty"`
			}{res, res.Goals(), res.Bounds()}, "", "  ")
			if werr := os.WriteFile(jsonOut, append(b, '\n'), 0o644); werr != nil {
				fmt.Fprintf(stderr, "erpsync-bench: %v\n", werr)
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "erpsync-bench: %v\n", err)
		return 1
	}
	return 0
}
