package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/erpsync/erpsync/internal/store"
)

func cmdMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var s settings
	fs := newFlagSet("erpsync migrate", stderr)
	fs.StringVar(&s.MySQLDSN, "mysql-dsn", "root@tcp(127.0.0.1:3306)/erpsync?parseTime=true", "MySQL DSN (go-sql-driver format)")
	s.logFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	log, err := newLogger(&s, stderr)
	if err != nil {
		return err
	}
	if _, err := store.ParseDSN(s.MySQLDSN); err != nil {
		return usageError{fmt.Errorf("--mysql-dsn: %w", err)}
	}
	res, err := store.Migrate(ctx, s.MySQLDSN)
	if err != nil {
		if isUnavailable(err) {
			return depError{fmt.Errorf("mysql: %w", err)}
		}
		return fmt.Errorf("migrate: %w", err)
	}
	for _, m := range res.Applied {
		log.Info().Int("version", m.Version).Str("name", m.Name).Msg("migration applied")
	}
	log.Info().Str("database", res.Database).Bool("created_database", res.CreatedDatabase).
		Int("applied", len(res.Applied)).Int("version", res.Current).Msg("migrate done")
	fmt.Fprintf(stdout, "database %s at version %d (%d applied)\n", res.Database, res.Current, len(res.Applied))
	return nil
}
