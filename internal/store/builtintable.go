package store

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// builtinStatement matches a statement of a numbered migration that
// creates or alters the built-in entity's table, memberships, or (on
// PostgreSQL, where an index is a statement of its own) indexes it.
var builtinStatement = regexp.MustCompile(`^(?:(?:CREATE TABLE IF NOT EXISTS|ALTER TABLE)\s+|CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?\S+\s+ON\s+)` + MembershipsTable + `\s`)

// numberedSteps are the numbered migrations ms as Migrate runs them on a
// database that has applied those in applied. wantBuiltin says whether the
// entities migrated for include the memberships table, exists whether the
// database has it:
//
//   - the table exists: the pending migrations, whole (its ALTERs too);
//   - neither wanted nor there: the pending migrations without their
//     statements on memberships, so that a database migrated for a config
//     file's entities alone gets no table it does not use;
//   - wanted and not there: also the statements on memberships of the
//     migrations applied without them, in order, so that the table is the
//     one the numbered migrations make on a new database.
//
// A step of an applied migration has only statements on memberships; a
// pending one may have none left.
func numberedSteps(ms []Migration, applied map[int]bool, wantBuiltin, exists bool) []Migration {
	var out []Migration
	for _, m := range ms {
		switch {
		case !applied[m.Version] && (wantBuiltin || exists):
			out = append(out, m)
		case !applied[m.Version]:
			m.SQL = builtinOnly(m.SQL, false)
			out = append(out, m)
		case wantBuiltin && !exists:
			if m.SQL = builtinOnly(m.SQL, true); m.SQL != "" {
				out = append(out, m)
			}
		}
	}
	return out
}

// builtinOnly is the statements of sql on memberships (on: true) or on
// any other table (false), one a line, each with its semicolon.
func builtinOnly(sql string, on bool) string {
	var b strings.Builder
	for _, stmt := range statements(sql) {
		if builtinStatement.MatchString(strings.TrimSpace(stmt)) == on {
			b.WriteString(stmt + ";\n")
		}
	}
	return b.String()
}

// wantsBuiltin reports whether tables, the tables of the entities
// migrated for, include memberships.
func wantsBuiltin(tables []string) bool { return slices.Contains(tables, MembershipsTable) }

// hasTable reports whether the database of q (of dialect d) has the table
// name: in its current schema, on PostgreSQL.
func hasTable(ctx context.Context, d Dialect, q querier, name string) (bool, error) {
	query := "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?"
	if d == Postgres {
		query = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1"
	}
	var n int
	err := q.QueryRowContext(ctx, query, name).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("look up table %s: %w", name, err)
	}
	return n > 0, nil
}
