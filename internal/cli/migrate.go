package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/erpsync/erpsync/internal/store"
)

func cmdMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var s settings
	fs := newFlagSet("erpsync migrate", stderr)
	s.databaseFlags(fs)
	secretVar(fs, &s.MigrateDSN, "migrate-dsn", "", "DSN of a user allowed to create and alter the tables, of the database's form (default: --mysql-dsn or --postgres-dsn); run and the others need only SELECT, INSERT, UPDATE")
	var plan bool
	fs.BoolVar(&plan, "plan", false, "print the statements migrate would run (one a line) and change nothing")
	s.entityFlags(fs)
	s.logFlags(fs)
	if err := s.parseEntities(fs, args); err != nil {
		return err
	}
	log, err := newLogger(&s, stderr)
	if err != nil {
		return err
	}
	d := s.dialect()
	dsn, flagName := s.MigrateDSN, "--migrate-dsn"
	if dsn == "" {
		if dsn, flagName, err = s.database(); err != nil {
			return err
		}
	} else {
		// --migrate-dsn alone names the database too: its form tells
		// which, as --mysql-dsn's and --postgres-dsn's do.
		if s.PostgresDSN == "" && !isSet(fs, "mysql-dsn") {
			d = store.DialectOf(dsn)
		}
		if err := checkDSN(dsn, flagName, d); err != nil {
			return err
		}
	}
	opt, err := s.storeOptions(d)
	if err != nil {
		return err
	}
	ents := s.entityList()
	if plan {
		st, err := store.Open(ctx, dsn, opt)
		if errors.Is(err, store.ErrNoDatabase) {
			// A fresh install: migrate would create the database, then
			// everything in it.
			p, err := store.PlanNewDatabase(ctx, dsn, opt, ents)
			if err != nil {
				return entitiesError(d, err)
			}
			fmt.Fprintln(stdout, store.CreateDatabaseSQLFor(d, databaseName(dsn))+";")
			printMigratePlan(stdout, p)
			return nil
		}
		if err != nil {
			return dbUnavailable(err, d, flagName)
		}
		defer st.Close()
		return migrateEntities(ctx, st, ents, true, stdout)
	}
	res, err := store.MigrateWith(ctx, dsn, opt, ents)
	if err != nil {
		if isUnavailable(err) {
			return dbUnavailable(err, d, flagName)
		}
		return fmt.Errorf("migrate: %w", err)
	}
	for _, m := range res.Applied {
		log.Info().Int("version", m.Version).Str("name", m.Name).Msg("migration applied")
	}
	log.Info().Str("database", res.Database).Bool("created_database", res.CreatedDatabase).
		Int("applied", len(res.Applied)).Int("version", res.Current).Msg("migrate done")
	fmt.Fprintf(stdout, "database %s at version %d (%d applied)\n", res.Database, res.Current, len(res.Applied))
	st, err := store.Open(ctx, dsn, opt)
	if err != nil {
		return dbUnavailable(err, d, flagName)
	}
	defer st.Close()
	return migrateEntities(ctx, st, ents, false, stdout)
}
