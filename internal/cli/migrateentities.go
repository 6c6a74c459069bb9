package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/store"
)

// nothingToMigrate is what migrate --plan prints when the database matches.
const nothingToMigrate = "nothing to migrate: the database matches"

// migrateEntities brings the tables of ents to what they declare (the
// numbered migrations applied before), or with plan prints what migrate
// would run and changes nothing: the pending migrations' statements, then
// the entities', one a line ending in ';', or the one line
// nothingToMigrate. A change that could lose data is a usage error (exit
// 2, one line): nothing was changed.
func migrateEntities(ctx context.Context, st *store.Store, ents []*entity.Entity, plan bool, out io.Writer) error {
	p, err := st.PlanEntities(ctx, ents)
	if err != nil {
		return entitiesError(st.Dialect(), err)
	}
	if plan {
		if p.Empty() {
			fmt.Fprintln(out, nothingToMigrate)
			return nil
		}
		printMigratePlan(out, p)
		return nil
	}
	applied, err := st.ApplyEntities(ctx, p)
	if err != nil {
		return entitiesError(st.Dialect(), err)
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name
	}
	for _, stmt := range applied.Statements {
		fmt.Fprintln(out, stmt+";")
	}
	switch n := len(applied.Statements); n {
	case 0:
		fmt.Fprintf(out, "entities %s: the tables already match their declarations\n", strings.Join(names, ", "))
	case 1:
		fmt.Fprintf(out, "entities %s: 1 statement applied; the tables match their declarations now\n", strings.Join(names, ", "))
	default:
		fmt.Fprintf(out, "entities %s: %d statements applied; the tables match their declarations now\n", strings.Join(names, ", "), n)
	}
	return nil
}

// printMigratePlan prints p's statements, one a line ending in ';': the pending
// migrations', then the entities'.
func printMigratePlan(out io.Writer, p *store.EntityPlan) {
	for _, m := range p.Pending {
		for _, stmt := range m.Statements() {
			fmt.Fprintln(out, strings.Join(strings.Fields(stmt), " ")+";")
		}
	}
	for _, stmt := range p.Statements {
		fmt.Fprintln(out, stmt+";")
	}
}

// checkEntities refuses, exit 2 and one line, a database whose entities'
// tables do not match what the entities declare: what every command that
// opens the store runs before it writes: the entities of --config, or
// the built-in one.
func checkEntities(ctx context.Context, st *store.Store, ents []*entity.Entity) error {
	if err := st.CheckEntities(ctx, ents); err != nil {
		var me *store.SchemaMismatchError
		if errors.As(err, &me) {
			return depError{err}
		}
		return dbError(st, err)
	}
	return nil
}

func entitiesError(d store.Dialect, err error) error {
	var le *store.LossyChangeError
	if errors.As(err, &le) {
		return usageError{err}
	}
	if isUnavailable(err) {
		return depError{fmt.Errorf("%s: %w", d, err)}
	}
	return fmt.Errorf("migrate entities: %w", err)
}
