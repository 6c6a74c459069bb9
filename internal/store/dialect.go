package store

import (
	"net"
	"strconv"
	"strings"
)

// Dialect is the SQL a database speaks: MySQL (MySQL 8 and MariaDB 10.5+)
// or PostgreSQL (14+). A Store has one, and every statement it runs is
// written in it: the texts that differ live in this package's *_mysql.go
// and *_postgres.go files, and the guard rules that decide which write
// wins are declared once (guard.go) and rendered in each.
//
// The dialects are one package, not a driver package each as River does:
// a Table compiles an entity's statements once, and the dialect is a
// renderer of those statements, not a second implementation of the store.
type Dialect uint8

const (
	// MySQL is MySQL 8 and MariaDB 10.5+, through go-sql-driver/mysql.
	MySQL Dialect = iota
	// Postgres is PostgreSQL 14+, through pgx v5.
	Postgres
)

// String names the dialect as a user names the database.
func (d Dialect) String() string {
	if d == Postgres {
		return "postgresql"
	}
	return "mysql"
}

// DialectOf tells the database a DSN is written for by its form: a
// postgres:// or postgresql:// URL, or a libpq key=value string
// ("host=... dbname=..."), is PostgreSQL's; anything else is taken for
// go-sql-driver's user:pass@tcp(host:port)/db.
func DialectOf(dsn string) Dialect {
	s := strings.TrimSpace(dsn)
	lower := strings.ToLower(s)
	if strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://") {
		return Postgres
	}
	if strings.Contains(s, "@tcp(") || strings.Contains(s, "@unix(") || strings.Contains(s, "://") {
		return MySQL
	}
	// libpq's keyword form: space-separated key=value pairs, the first a
	// keyword. A go-sql-driver DSN has its first '=' after '?'.
	key, _, ok := strings.Cut(s, "=")
	if !ok || strings.ContainsAny(key, "?/@(") {
		return MySQL
	}
	return Postgres
}

// ident quotes a table, column or index name. Names of the config file are
// [a-z][a-z0-9_]*, but one may be a reserved word (order, key).
func (d Dialect) ident(name string) string {
	if d == Postgres {
		return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
	}
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// now is the database's clock in UTC, to the millisecond, as the rows'
// created_at and updated_at take it.
func (d Dialect) now() string {
	if d == Postgres {
		return "CURRENT_TIMESTAMP(3)"
	}
	return "UTC_TIMESTAMP(3)"
}

// Placeholders rewrites a statement's '?' placeholders outside quotes
// into the dialect's: PostgreSQL numbers them ($1, $2, ...); MySQL's
// stay.
func (d Dialect) Placeholders(query string) string {
	if d != Postgres || !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	n := 0
	var quote byte
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			quote = c
		case c == '?':
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Target is the server (host:port) and the database a DSN of either
// dialect names.
func Target(dsn string) (addr, database string, err error) {
	if DialectOf(dsn) == Postgres {
		pc, err := ParsePostgresDSN(dsn)
		if err != nil {
			return "", "", err
		}
		return net.JoinHostPort(pc.Host, strconv.Itoa(int(pc.Port))), pc.Database, nil
	}
	mc, err := ParseDSN(dsn)
	if err != nil {
		return "", "", err
	}
	return mc.Addr, mc.DBName, nil
}
