package store

import (
	"context"

	"github.com/erpsync/erpsync/internal/entity"
)

// CreateDatabaseSQL is the statement that creates the database name when
// Migrate finds it missing.
func CreateDatabaseSQL(name string) string {
	return "CREATE DATABASE IF NOT EXISTS " + quoteIdent(name) + " CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
}

// PlanNewDatabase is PlanEntities for a database that does not exist
// yet: every numbered migration is pending, and each entity's tables are
// planned against the tables the migrations make (memberships, when one
// of ents has it) or none.
// It reads only the server's key collation (keyCollationOf), through a
// connection that names no database: there is nothing else to read.
func PlanNewDatabase(ctx context.Context, dsn string, opt *Options, ents []*entity.Entity) (*EntityPlan, error) {
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
	keyColl, err := keyCollationOf(ctx, as.sql)
	if err != nil {
		return nil, err
	}
	ms, err := Migrations()
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
		for _, d := range defs[i] {
			var t *liveTable
			if d.name == MembershipsTable {
				t = shippedTable(builtin[0])
			}
			stmts, err := planTable(ctx, nil, d, t, false)
			if err != nil {
				return nil, err
			}
			p.Statements = append(p.Statements, stmts...)
		}
	}
	return p, nil
}
