package store

import (
	"context"

	"github.com/erpsync/erpsync/internal/entity"
)

// CreateDatabaseSQL is the statement that creates the MySQL database name
// when Migrate finds it missing.
func CreateDatabaseSQL(name string) string { return CreateDatabaseSQLFor(MySQL, name) }

// CreateDatabaseSQLFor is the statement that creates the database name of
// dialect d when Migrate finds it missing. PostgreSQL's has no IF NOT
// EXISTS; it copies template0, the one template whose encoding may differ
// from the new database's.
func CreateDatabaseSQLFor(d Dialect, name string) string {
	if d == Postgres {
		return "CREATE DATABASE " + d.ident(name) + " ENCODING 'UTF8' TEMPLATE template0"
	}
	return "CREATE DATABASE IF NOT EXISTS " + quoteIdent(name) + " CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
}

// PlanNewDatabase is PlanEntities for a database that does not exist
// yet: every numbered migration is pending, and each entity's tables are
// planned against the tables the migrations make (memberships, when one
// of ents has it) or none.
// On MySQL it reads only the server's key collation (keyCollationOf),
// through a connection that names no database: there is nothing else to
// read. On PostgreSQL it reads nothing.
func PlanNewDatabase(ctx context.Context, dsn string, opt *Options, ents []*entity.Entity) (*EntityPlan, error) {
	dl := DialectOf(dsn)
	keyColl := pgKeyCollation
	if dl == Postgres {
		// The key collation is "C" on every server: nothing to read.
		if _, err := ParsePostgresDSN(dsn); err != nil {
			return nil, err
		}
	} else {
		cfg, err := ParseDSN(dsn)
		if err != nil {
			return nil, err
		}
		o := Options{MaxOpenConns: 1, PingTimeout: cfg.Timeout}
		if opt != nil {
			o.TLS = opt.TLS
		}
		admin := cfg.Clone()
		admin.DBName = ""
		as, err := open(ctx, admin, o)
		if err != nil {
			return nil, err
		}
		defer as.Close()
		if keyColl, err = keyCollationOf(ctx, MySQL, as.sql); err != nil {
			return nil, err
		}
	}
	ms, err := MigrationsOf(dl)
	if err != nil {
		return nil, err
	}
	defs, tables, err := entityTables(ents, keyColl)
	if err != nil {
		return nil, err
	}
	ms = numberedSteps(ms, nil, wantsBuiltin(tables), false)
	for i := range ms {
		ms[i].SQL = dialectSQL(ms[i].SQL, keyColl)
	}
	p := &EntityPlan{Entities: ents, Pending: ms}
	builtin, err := tableDefs(entity.Memberships(), keyColl)
	if err != nil {
		return nil, err
	}
	for i := range ents {
		for _, def := range defs[i] {
			var t *liveTable
			if def.name == MembershipsTable {
				t = shippedTable(builtin[0])
			}
			stmts, err := planTable(ctx, dl, nil, def, t, false)
			if err != nil {
				return nil, err
			}
			p.Statements = append(p.Statements, stmts...)
		}
	}
	return p, nil
}
