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

// LoginRefused reports whether err is the server's refusal of a login:
// MySQL's 1045 (a wrong user or password), 1044 (a user without rights on
// the database) or MariaDB's 1698 (a user its plugin refuses), or
// PostgreSQL's invalid authorization (28000: an unknown role, a
// pg_hba.conf that rejects it), invalid password (28P01) or a role without
// CONNECT on the database (42501 at the connection's start).
func LoginRefused(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1044 || me.Number == 1045 || me.Number == 1698
	}
	switch PgCode(err) {
	case "28000", "28P01", "42501":
		return true
	}
	return false
}

// PgCode is the SQLSTATE of a PostgreSQL error in err's chain, "" for none.
func PgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
