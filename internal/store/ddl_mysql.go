package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/erpsync/erpsync/internal/entity"
)

// This file holds every MySQL text an entity's table compiles to (its
// CREATE TABLE, the clauses of its ALTER TABLE) and the reading of a live
// table back from information_schema, for MySQL 8 and MariaDB 10.5+. The
// planner (entitytable.go) speaks of columns and types only;
// ddl_postgres.go holds PostgreSQL's.

// quoteIdent quotes a table, column or index name. Names of the config file
// are [a-z][a-z0-9_]*, but one may be a reserved word (order, key).
func quoteIdent(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// The character sets and collations of text columns. A key string compares
// byte for byte: a key that differs in case, accents or by a trailing space
// is another record. utf8mb4_bin does not do that: it is a PAD SPACE
// collation, 'A' = 'A ' under its UNIQUE index. The NO PAD binary
// collations do (noPadCollations: MariaDB 10.2+ has utf8mb4_nopad_bin,
// MySQL 8 and go-mysql-server utf8mb4_0900_bin); a server with neither
// gets binCollation, and a write that its index would merge into another
// key's row is refused (Store.KeyTaken). Other text sorts like the table
// default; a json column compares as binary, which nothing reads.
const (
	textCharset    = "utf8mb4"
	binCollation   = "utf8mb4_bin"
	tableCollation = "utf8mb4_unicode_ci"
	// migrationKeyCollation is the key collation the numbered migrations
	// write; dialectSQL puts the server's in its place.
	migrationKeyCollation = "utf8mb4_nopad_bin"
)

// noPadCollations are the utf8mb4 collations that compare byte for byte,
// trailing spaces included, in the order a key column takes the first the
// server has.
var noPadCollations = []string{"utf8mb4_nopad_bin", "utf8mb4_0900_bin"}

// keyCollationOf returns the collation the key columns take on the server
// q is connected to: on MySQL the first of noPadCollations it has, else
// binCollation; on PostgreSQL "C" (pgKeyCollation), which every server
// has.
func keyCollationOf(ctx context.Context, d Dialect, q querier) (string, error) {
	if d == Postgres {
		return pgKeyCollation, nil
	}
	rows, err := q.QueryContext(ctx, "SELECT COLLATION_NAME FROM information_schema.COLLATIONS WHERE COLLATION_NAME IN ('"+strings.Join(noPadCollations, "', '")+"')")
	if err != nil {
		return "", fmt.Errorf("read collations: %w", err)
	}
	defer rows.Close()
	have := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return "", fmt.Errorf("read collations: %w", err)
		}
		have[strings.ToLower(name)] = true
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("read collations: %w", err)
	}
	for _, c := range noPadCollations {
		if have[c] {
			return c, nil
		}
	}
	return binCollation, nil
}

// dialectSQL is a numbered migration's statement for a server whose key
// columns take keyColl.
func dialectSQL(stmt, keyColl string) string {
	return strings.ReplaceAll(stmt, migrationKeyCollation, keyColl)
}

// columnType is the MySQL type of a column.
//
// json is LONGTEXT (utf8mb4, binary collation), not JSON: MariaDB's JSON is
// an alias of LONGTEXT that information_schema reports as longtext, while
// MySQL 8's JSON is a binary format that rewrites the document (key order,
// spacing, number forms) so that the text read back is not the text the
// ERP sent. LONGTEXT keeps the exact text on both and reads back the same
// on both; the decoder checks that the value is JSON.
func columnType(c tableColumn) string {
	t := c.Type
	switch t.Kind {
	case entity.String:
		coll := tableCollation
		if c.key {
			coll = c.collation
		}
		return fmt.Sprintf("VARCHAR(%d) CHARACTER SET %s COLLATE %s", t.Length, textCharset, coll)
	case entity.Text:
		return "TEXT CHARACTER SET " + textCharset + " COLLATE " + tableCollation
	case entity.Int32:
		return "INT"
	case entity.Int64:
		return "BIGINT"
	case entity.Decimal:
		return fmt.Sprintf("DECIMAL(%d,%d)", t.Precision, t.Scale)
	case entity.Bool:
		return "BOOLEAN"
	case entity.Date:
		return "DATE"
	case entity.DateTime:
		return fmt.Sprintf("DATETIME(%d)", t.Digits())
	case entity.JSON:
		return "LONGTEXT CHARACTER SET " + textCharset + " COLLATE " + binCollation
	}
	return fmt.Sprintf("/* unknown kind %d */", t.Kind)
}

// columnDef is a column's definition in CREATE TABLE and ALTER TABLE.
func columnDef(c tableColumn) string {
	null := " NOT NULL"
	if c.Nullable {
		null = " NULL"
	}
	return quoteIdent(c.Name) + " " + columnType(c) + null
}

// indexName is the name of an index of table: prefix_table_suffix, as the
// migrations name memberships' (uq_memberships_erp_id), or prefix_suffix
// when that passes MySQL's 64 characters.
func indexName(prefix, table, suffix string) string {
	if n := prefix + "_" + table + "_" + suffix; len(n) <= 64 {
		return n
	}
	return prefix + "_" + suffix
}

// createTableSQL is the CREATE TABLE of table d: its columns, the UNIQUE
// index over its key and, for an entity's table, the index on
// quarantined_at.
func createTableSQL(d tableDef) string {
	parts := make([]string, 0, len(d.cols)+2)
	for _, c := range d.cols {
		parts = append(parts, columnDef(c))
	}
	keys := make([]string, len(d.key))
	for i, k := range d.key {
		keys[i] = quoteIdent(k)
	}
	parts = append(parts, fmt.Sprintf("UNIQUE KEY %s (%s)", quoteIdent(indexName("uq", d.name, strings.Join(d.key, "_"))), strings.Join(keys, ", ")))
	if d.marks {
		parts = append(parts, quarantineIndex(d.name))
	}
	return "CREATE TABLE IF NOT EXISTS " + quoteIdent(d.name) + " (" + strings.Join(parts, ", ") +
		") ENGINE=InnoDB DEFAULT CHARSET=" + textCharset + " COLLATE=" + tableCollation
}

// quarantineIndex is the index on quarantined_at, for the count of marked
// rows the schedule publishes.
func quarantineIndex(table string) string {
	return "INDEX " + quoteIdent(indexName("ix", table, "quarantined")) + " (`quarantined_at`)"
}

// The clauses of an ALTER TABLE. A column is added at the end: ADD COLUMN
// there is instant on MariaDB 10.3+ and MySQL 8.0.12+.
func addColumnClause(c tableColumn) string    { return "ADD COLUMN " + columnDef(c) }
func modifyColumnClause(c tableColumn) string { return "MODIFY COLUMN " + columnDef(c) }
func addIndexClause(table string) string      { return "ADD " + quarantineIndex(table) }

// alterTableSQL is one ALTER TABLE of table with clauses, in dialect d.
func alterTableSQL(d Dialect, table string, clauses []string) string {
	return "ALTER TABLE " + d.ident(table) + " " + strings.Join(clauses, ", ")
}

// hasRowsSQL asks whether table holds a row, in dialect d.
func hasRowsSQL(d Dialect, table string) string {
	return "SELECT EXISTS (SELECT 1 FROM " + d.ident(table) + ")"
}

// strictSessionSQL makes the session refuse, not coerce, a NULL that a
// MODIFY ... NOT NULL meets (ADD COLUMN NULL, then MODIFY NOT NULL: rows
// that arrived in between stop the MODIFY instead of getting an empty
// string or a zero).
// restoreSessionSQL puts the saved sql_mode back.
const (
	saveSessionSQL    = "SELECT @@SESSION.sql_mode"
	strictSessionSQL  = "SET SESSION sql_mode = CONCAT_WS(',', @@SESSION.sql_mode, 'STRICT_ALL_TABLES')"
	restoreSessionSQL = "SET SESSION sql_mode = ?"
)

// querier is what a statement runs on: the pool, one connection of it
// (which holds the migration lock), or the transaction of a write that
// records its change events.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readTables reads the columns and indexes of the given tables of the
// connected database (of dialect d) in one query. A table that does not
// exist is absent from the map.
func readTables(ctx context.Context, d Dialect, q querier, tables []string) (map[string]*liveTable, error) {
	if d == Postgres {
		return readTablesPostgres(ctx, q, tables)
	}
	out := map[string]*liveTable{}
	if len(tables) == 0 {
		return out, nil
	}
	in := strings.TrimSuffix(strings.Repeat("?,", len(tables)), ",")
	args := make([]any, 0, 2*len(tables))
	for _, t := range tables {
		args = append(args, t)
	}
	for _, t := range tables {
		args = append(args, t)
	}
	// One UNION: a sync command runs this before it writes, for all its
	// entities at once.
	query := `SELECT 'c', TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, LOWER(DATA_TYPE), LOWER(COLUMN_TYPE), IS_NULLABLE,
  COALESCE(CHARACTER_MAXIMUM_LENGTH, 0), COALESCE(NUMERIC_PRECISION, 0), COALESCE(NUMERIC_SCALE, 0),
  COALESCE(DATETIME_PRECISION, 0), COALESCE(CHARACTER_SET_NAME, ''), COALESCE(COLLATION_NAME, ''), 0
FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN (` + in + `)
UNION ALL
SELECT 'i', TABLE_NAME, COLUMN_NAME, SEQ_IN_INDEX, INDEX_NAME, '', '', 0, 0, 0, 0, '', '', NON_UNIQUE
FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN (` + in + `)`
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read tables: %w", err)
	}
	defer rows.Close()
	var parts []indexPart
	for rows.Next() {
		var kind, table, column, dataType, colType, nullable, charset, collation string
		var ord, length, prec, scale, dtPrec, nonUnique int64
		if err := rows.Scan(&kind, &table, &column, &ord, &dataType, &colType, &nullable, &length, &prec, &scale, &dtPrec, &charset, &collation, &nonUnique); err != nil {
			return nil, fmt.Errorf("read tables: %w", err)
		}
		t := out[table]
		if t == nil {
			t = &liveTable{name: table}
			out[table] = t
		}
		if kind == "i" {
			// dataType holds the index name here.
			parts = append(parts, indexPart{table, dataType, column, int(ord), nonUnique == 0})
			continue
		}
		c := liveColumn{name: column, ordinal: int(ord), nullable: nullable == "YES", raw: colType}
		c.typ = liveType(dataType, colType, int(length), int(prec), int(scale), int(dtPrec), charset)
		c.collation = strings.ToLower(collation)
		if charset != "" && charset != textCharset {
			c.raw += " character set " + charset
		}
		t.columns = append(t.columns, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read tables: %w", err)
	}
	addIndexes(out, parts)
	return out, nil
}

// indexPart is a column of an index as the catalog lists it: the seq-th
// of index name on table.
type indexPart struct {
	table, name, column string
	seq                 int
	unique              bool
}

// addIndexes adds parts to the tables of out, and sorts each table's
// columns.
func addIndexes(out map[string]*liveTable, parts []indexPart) {
	for _, p := range parts {
		if t := out[p.table]; t != nil {
			t.addIndexColumn(p.name, p.column, p.seq, p.unique)
		}
	}
	for _, t := range out {
		t.sort()
	}
}

// liveType is the entity type a column of the database has, tolerant of
// how MySQL 8 and MariaDB each report it (int(11) or int, bigint(20) or
// bigint, tinyint(1) for BOOLEAN, longtext for MariaDB's JSON). Kind 0: a
// type no entity declares (unsigned, another precision, another character
// set).
func liveType(dataType, colType string, length, prec, scale, dtPrec int, charset string) entity.Type {
	unsigned := strings.Contains(colType, "unsigned")
	text := charset == textCharset
	switch {
	case dataType == "varchar" && text:
		return entity.Type{Kind: entity.String, Length: length}
	case dataType == "text" && text:
		return entity.Type{Kind: entity.Text}
	case dataType == "longtext" && text, dataType == "json":
		return entity.Type{Kind: entity.JSON}
	case dataType == "int" && !unsigned:
		return entity.Type{Kind: entity.Int32}
	case dataType == "bigint" && !unsigned:
		return entity.Type{Kind: entity.Int64}
	case dataType == "decimal" && !unsigned:
		return entity.Type{Kind: entity.Decimal, Precision: prec, Scale: scale}
	case dataType == "tinyint" && colType == "tinyint(1)":
		return entity.Type{Kind: entity.Bool}
	case dataType == "date":
		return entity.Type{Kind: entity.Date}
	case dataType == "datetime" && dtPrec >= 0 && dtPrec <= entity.MaxDigits:
		return entity.DateTimeOf(dtPrec)
	}
	return entity.Type{}
}
