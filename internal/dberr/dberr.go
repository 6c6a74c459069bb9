// Package dberr classifies the errors of MySQL and PostgreSQL that every
// layer treats alike, for the store, the syncer and the relay.
package dberr

import (
	"errors"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// Denied reports whether err is the database's refusal for privileges:
// MySQL's 1142 (a table command denied) or 1143 (a column's), or
// PostgreSQL's insufficient_privilege (42501). No retry heals it: a run
// or a relay stops on it rather than trying again.
func Denied(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1142 || me.Number == 1143
	}
	return PgCode(err) == "42501"
}

// PgCode is the SQLSTATE of a PostgreSQL error in err's chain, "" for none.
func PgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
