package store

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/erpsync/erpsync/internal/entity"
)

// This file holds every PostgreSQL text an entity's table compiles to (its
// CREATE TABLE, the clauses of its ALTER TABLE) and the reading of a live
// table back from the catalog, for PostgreSQL 14+: ddl_mysql.go's
// counterpart. The planner (entitytable.go, entityplan.go) speaks of
// columns and types only.

// pgKeyCollation is the collation of a key string on PostgreSQL: "C"
// compares byte for byte, on every server, whatever the database's
// locale.
const pgKeyCollation = "C"

// pgJSONComment marks a json column. A json column is text, as a text
// column is: PostgreSQL's json type keeps the exact text too, but refuses
// some documents the decoder takes (a \u escape of a lone surrogate), and
// jsonb rewrites the document. The comment (COMMENT ON COLUMN) is what
// tells the two apart when the table is read back; a text column without
// it reads as text, and a change of one to the other is refused as a type
// change, as on MySQL.
const pgJSONComment = "erpsync:json"

// pgMaxIdent is PostgreSQL's bound on a name (NAMEDATALEN - 1 bytes).
const pgMaxIdent = 63

// pgColumnType is the PostgreSQL type of a column.
func pgColumnType(c tableColumn) string {
	t := c.Type
	switch t.Kind {
	case entity.String:
		if c.key {
			return fmt.Sprintf(`varchar(%d) COLLATE %s`, t.Length, Postgres.ident(c.collation))
		}
		return fmt.Sprintf("varchar(%d)", t.Length)
	case entity.Text, entity.JSON:
		return "text"
	case entity.Int32:
		return "integer"
	case entity.Int64:
		return "bigint"
	case entity.Decimal:
		return fmt.Sprintf("numeric(%d,%d)", t.Precision, t.Scale)
	case entity.Bool:
		return "boolean"
	case entity.Date:
		return "date"
	case entity.DateTime:
		return fmt.Sprintf("timestamptz(%d)", t.Digits())
	}
	return fmt.Sprintf("/* unknown kind %d */", t.Kind)
}

// pgColumnDef is a column's definition in CREATE TABLE and ADD COLUMN.
func pgColumnDef(c tableColumn) string {
	null := " NOT NULL"
	if c.Nullable {
		null = " NULL"
	}
	return Postgres.ident(c.Name) + " " + pgColumnType(c) + null
}

// pgIndexName is indexName within PostgreSQL's 63 bytes. Index and
// constraint names are the schema's, not the table's: a name cut to its
// bound ends in a hash of the whole, so that two long tables do not share
// one.
func pgIndexName(prefix, table, suffix string) string {
	n := prefix + "_" + table + "_" + suffix
	if len(n) <= pgMaxIdent {
		return n
	}
	h := fnv.New32a()
	h.Write([]byte(n))
	return fmt.Sprintf("%s_%08x", n[:pgMaxIdent-9], h.Sum32())
}

// pgCreateTable is the CREATE TABLE of table d, with its UNIQUE constraint
// over the key, then for an entity's table the index on quarantined_at,
// then the comments that mark its json columns.
func pgCreateTable(d tableDef) []string {
	q := Postgres.ident
	parts := make([]string, 0, len(d.cols)+1)
	for _, c := range d.cols {
		parts = append(parts, pgColumnDef(c))
	}
	keys := make([]string, len(d.key))
	for i, k := range d.key {
		keys[i] = q(k)
	}
	parts = append(parts, fmt.Sprintf("CONSTRAINT %s UNIQUE (%s)", q(pgIndexName("uq", d.name, strings.Join(d.key, "_"))), strings.Join(keys, ", ")))
	out := []string{"CREATE TABLE IF NOT EXISTS " + q(d.name) + " (" + strings.Join(parts, ", ") + ")"}
	if d.marks {
		out = append(out, pgQuarantineIndex(d.name))
	}
	for _, c := range d.cols {
		if c.Type.Kind == entity.JSON {
			out = append(out, pgJSONCommentSQL(d.name, c.Name))
		}
	}
	return out
}

// pgQuarantineIndex creates the index on quarantined_at, for the count of
// marked rows the schedule publishes.
func pgQuarantineIndex(table string) string {
	return "CREATE INDEX IF NOT EXISTS " + Postgres.ident(pgIndexName("ix", table, "quarantined")) + " ON " + Postgres.ident(table) + ` ("quarantined_at")`
}

// pgJSONCommentSQL marks column of table a json column.
func pgJSONCommentSQL(table, column string) string {
	return "COMMENT ON COLUMN " + Postgres.ident(table) + "." + Postgres.ident(column) + " IS '" + pgJSONComment + "'"
}

// pgAddColumnClause adds a column, NOT NULL at once when the file says
// so: PostgreSQL refuses it on a table with rows rather than fill them.
func pgAddColumnClause(c tableColumn) string { return "ADD COLUMN " + pgColumnDef(c) }

// pgModifyColumnClauses are PostgreSQL's forms of MySQL's MODIFY COLUMN:
// ALTER COLUMN ... TYPE where the type (or a key's collation) differs from
// the live column lc, and DROP NOT NULL where the file makes it nullable.
func pgModifyColumnClauses(c tableColumn, lc *liveColumn) []string {
	var out []string
	name := Postgres.ident(c.Name)
	if lc == nil || lc.typ != c.Type || (c.key && c.Type.Kind == entity.String && lc.collation != c.collation) {
		out = append(out, "ALTER COLUMN "+name+" TYPE "+pgColumnType(c))
	}
	if lc != nil && lc.nullable != c.Nullable {
		if c.Nullable {
			out = append(out, "ALTER COLUMN "+name+" DROP NOT NULL")
		} else {
			out = append(out, "ALTER COLUMN "+name+" SET NOT NULL")
		}
	}
	return out
}

// readTablesPostgres reads the columns and indexes of the given tables of
// the connection's current schema in one query: readTables' counterpart.
// A table that does not exist is absent from the map.
func readTablesPostgres(ctx context.Context, q querier, tables []string) (map[string]*liveTable, error) {
	out := map[string]*liveTable{}
	if len(tables) == 0 {
		return out, nil
	}
	in := strings.TrimSuffix(strings.Repeat("?,", len(tables)), ",")
	args := make([]any, 0, 2*len(tables))
	for range 2 {
		for _, t := range tables {
			args = append(args, t)
		}
	}
	query := `SELECT 'c', c.table_name::text, c.column_name::text, c.ordinal_position::int, c.data_type::text,
  format_type(a.atttypid, a.atttypmod), c.is_nullable = 'YES',
  COALESCE(c.character_maximum_length, 0)::int, COALESCE(c.numeric_precision, 0)::int, COALESCE(c.numeric_scale, 0)::int,
  COALESCE(c.datetime_precision, 0)::int, COALESCE(c.collation_name, '')::text, COALESCE(col_description(a.attrelid, a.attnum), ''), false
FROM information_schema.columns c
JOIN pg_attribute a ON a.attrelid = format('%I.%I', c.table_schema, c.table_name)::regclass AND a.attnum = c.ordinal_position
WHERE c.table_schema = current_schema() AND c.table_name IN (` + in + `)
UNION ALL
SELECT 'i', t.relname::text, a.attname::text, k.ord::int, i.relname::text, '', false, 0, 0, 0, 0, '', '', ix.indisunique
FROM pg_index ix
JOIN pg_class t ON t.oid = ix.indrelid
JOIN pg_class i ON i.oid = ix.indexrelid
CROSS JOIN LATERAL unnest(ix.indkey) WITH ORDINALITY AS k(attnum, ord)
JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
WHERE t.relnamespace = current_schema()::regnamespace AND k.ord <= ix.indnkeyatts AND t.relname IN (` + in + `)`
	rows, err := q.QueryContext(ctx, Postgres.Placeholders(query), args...)
	if err != nil {
		return nil, fmt.Errorf("read tables: %w", err)
	}
	defer rows.Close()
	var parts []indexPart
	for rows.Next() {
		var kind, table, column, dataType, raw, collation, comment string
		var nullable, unique bool
		var ord, length, prec, scale, dtPrec int
		if err := rows.Scan(&kind, &table, &column, &ord, &dataType, &raw, &nullable, &length, &prec, &scale, &dtPrec, &collation, &comment, &unique); err != nil {
			return nil, fmt.Errorf("read tables: %w", err)
		}
		t := out[table]
		if t == nil {
			t = &liveTable{name: table}
			out[table] = t
		}
		if kind == "i" {
			// dataType holds the index name here.
			parts = append(parts, indexPart{table, dataType, column, ord, unique})
			continue
		}
		c := liveColumn{name: column, ordinal: ord, nullable: nullable, raw: raw, collation: collation}
		c.typ = pgLiveType(dataType, length, prec, scale, dtPrec, comment)
		t.columns = append(t.columns, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read tables: %w", err)
	}
	addIndexes(out, parts)
	return out, nil
}

// pgLiveType is the entity type a PostgreSQL column has, from
// information_schema.columns' data_type and numbers, and its comment (a
// json column's). Kind 0: a type no entity declares (varchar without a
// length, numeric without a precision, timestamp without time zone, ...).
func pgLiveType(dataType string, length, prec, scale, dtPrec int, comment string) entity.Type {
	switch {
	case dataType == "character varying" && length > 0:
		return entity.Type{Kind: entity.String, Length: length}
	case dataType == "text" && comment == pgJSONComment:
		return entity.Type{Kind: entity.JSON}
	case dataType == "text":
		return entity.Type{Kind: entity.Text}
	case dataType == "integer":
		return entity.Type{Kind: entity.Int32}
	case dataType == "bigint":
		return entity.Type{Kind: entity.Int64}
	case dataType == "numeric" && prec > 0:
		return entity.Type{Kind: entity.Decimal, Precision: prec, Scale: scale}
	case dataType == "boolean":
		return entity.Type{Kind: entity.Bool}
	case dataType == "date":
		return entity.Type{Kind: entity.Date}
	case dataType == "timestamp with time zone" && dtPrec >= 0 && dtPrec <= entity.MaxDigits:
		return entity.DateTimeOf(dtPrec)
	}
	return entity.Type{}
}
