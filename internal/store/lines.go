package store

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/erpsync/erpsync/internal/entity"
)

// A document is a row of an entity with children (entity.Entity.Children)
// and its lines, one table per child. A child table holds the parent's key
// columns, the child's columns and erp_version, the version of the parent
// its lines came with. Every write that lands a parent row at a version
// makes, in the same transaction, its lines in each child table exactly
// those of Row.Children: the lines the version no longer carries deleted,
// the others inserted or updated. A write that loses (an older version, an
// older fencing token, a replay of the row's own version) changes none of
// its lines, and neither a soft delete nor a quarantine mark touches them:
// a soft-deleted document keeps its lines until a restore writes the ones
// it comes back with.

// linesStatementBytes bounds the statements that write lines: the lines of
// a chunk's documents go in one DELETE and one INSERT per child table
// until the INSERT passes this size, then in as many more as it takes. A
// document's lines are never split, so one document with more lines than
// fit makes one larger statement.
const linesStatementBytes = 1 << 20

// lineTable is a child's table compiled once: the statements that write
// and read the lines of documents.
type lineTable struct {
	child *entity.Child
	name  string
	kinds []entity.Kind // of the child's columns, in order
	keys  []int         // indexes in the child's columns of its key, in key order
	// insert is "INSERT INTO t (parent key..., columns..., erp_version)
	// VALUES ", upsert its ON DUPLICATE KEY UPDATE tail: every column
	// outside the key, then erp_version.
	insert, upsert string
	// deleteFrom is "DELETE FROM t WHERE (parent key...) IN (", keep
	// ") AND (parent key..., child key...) NOT IN (": the DELETE of the
	// lines that the documents written no longer carry.
	deleteFrom, keep string
	// scan is "SELECT parent key..., columns... FROM t", order its ORDER
	// BY: the index's order.
	scan, order string
}

// compileLines compiles the statements of the tables of t's children.
func (t *Table) compileLines() error {
	q := t.d.ident
	parent := make([]string, len(t.ent.Key))
	for i, k := range t.ent.Key {
		parent[i] = q(k)
	}
	for _, c := range t.ent.Children {
		lt := &lineTable{child: c, name: childTable(c)}
		var cols, key, set []string
		for _, col := range c.Columns {
			lt.kinds = append(lt.kinds, col.Type.Kind)
			cols = append(cols, q(col.Name))
		}
		lt.keys = c.KeyIndexes()
		for j, k := range c.Key {
			if lt.keys[j] < 0 {
				return fmt.Errorf("compile table %s: key column %s is not declared", lt.name, k)
			}
			key = append(key, q(k))
		}
		newValue := func(col string) string { return "VALUES(" + col + ")" }
		if t.d == Postgres {
			newValue = func(col string) string { return "EXCLUDED." + col }
		}
		for i, col := range c.Columns {
			if !slices.Contains(lt.keys, i) {
				set = append(set, q(col.Name)+" = "+newValue(q(col.Name)))
			}
		}
		set = append(set, "erp_version = "+newValue("erp_version"))
		pk := strings.Join(parent, ", ")
		lt.insert = "INSERT INTO " + q(lt.name) + " (" + pk + ", " + strings.Join(cols, ", ") + ", erp_version) VALUES "
		if t.d == Postgres {
			lt.upsert = " ON CONFLICT (" + pk + ", " + strings.Join(key, ", ") + ") DO UPDATE SET " + strings.Join(set, ", ")
		} else {
			lt.upsert = " ON DUPLICATE KEY UPDATE " + strings.Join(set, ", ")
		}
		lt.deleteFrom = "DELETE FROM " + q(lt.name) + " WHERE (" + pk + ") IN ("
		lt.keep = ") AND (" + pk + ", " + strings.Join(key, ", ") + ") NOT IN ("
		lt.scan = "SELECT " + pk + ", " + strings.Join(cols, ", ") + " FROM " + q(lt.name)
		lt.order = " ORDER BY " + pk + ", " + strings.Join(key, ", ")
		t.lines = append(t.lines, lt)
	}
	return nil
}

// transactional reports whether a write of the table runs in a
// transaction of its own: to record change events, or to write a
// document's lines with it.
func (t *Table) transactional() bool { return t.ent.Events || len(t.lines) > 0 }

// writeLines makes, on db (the transaction of the parents' write), each
// child table hold exactly the lines of rows[i].Children for every i that
// landed says landed (nil: all). For the rows that clear says (nil: none),
// documents that may hold lines already, it first deletes the lines they
// no longer carry; a document inserted has none to delete.
func (t *Table) writeLines(ctx context.Context, db querier, rows []Row, landed, clear []bool) error {
	if len(t.lines) == 0 {
		return nil
	}
	for i := range rows {
		if (landed == nil || landed[i]) && len(rows[i].Children) != len(t.lines) {
			return fmt.Errorf("key %q: %d collections of lines for %d children", rows[i].Key, len(rows[i].Children), len(t.lines))
		}
	}
	for c, lt := range t.lines {
		if err := lt.write(ctx, db, t, c, rows, landed, clear); err != nil {
			return fmt.Errorf("write lines of %s: %w", lt.name, err)
		}
	}
	return nil
}

// lineBatch is the statements of the lines of a group of documents: the
// parent keys and line keys of the DELETE, the values of the INSERT.
type lineBatch struct {
	parents, kept, values *literal
	cleared, lines        int
}

// write writes the lines of child c of the rows that landed (writeLines),
// one DELETE and one INSERT per group of documents.
func (lt *lineTable) write(ctx context.Context, db querier, t *Table, c int, rows []Row, landed, clear []bool) error {
	b := lineBatch{parents: t.lit(), kept: t.lit(), values: t.lit()}
	pk := t.lit()
	defer func() {
		b.parents.free()
		b.kept.free()
		b.values.free()
		pk.free()
	}()
	for i := range rows {
		if landed != nil && !landed[i] {
			continue
		}
		r := &rows[i]
		pk.b = pk.b[:0]
		for j, k := range t.keys {
			if j > 0 {
				pk.sql(",")
			}
			if err := pk.value(t.kinds[k], r.Vals[k]); err != nil {
				return fmt.Errorf("key %q: %w", r.Key, err)
			}
		}
		cleared := clear != nil && clear[i]
		if cleared {
			if b.cleared > 0 {
				b.parents.sql(",")
			}
			b.parents.sql("(")
			b.parents.b = append(b.parents.b, pk.b...)
			b.parents.sql(")")
			b.cleared++
		}
		var shadowed []bool
		if t.d == Postgres {
			shadowed = lt.shadowed(r.Children[c])
		}
		for n, line := range r.Children[c] {
			if len(line) != len(lt.kinds) {
				return fmt.Errorf("key %q: line %d: %d values for %d columns", r.Key, n+1, len(line), len(lt.kinds))
			}
			if shadowed != nil && shadowed[n] {
				continue
			}
			if b.lines > 0 {
				b.values.sql(",")
			}
			b.values.sql("(")
			b.values.b = append(b.values.b, pk.b...)
			for j, v := range line {
				b.values.sql(",")
				if err := b.values.value(lt.kinds[j], v); err != nil {
					return fmt.Errorf("key %q: line %d: %s: %w", r.Key, n+1, lt.child.Columns[j].Name, err)
				}
			}
			b.values.sql(",")
			b.values.int(r.Version)
			b.values.sql(")")
			if cleared {
				if len(b.kept.b) > 0 {
					b.kept.sql(",")
				}
				b.kept.sql("(")
				b.kept.b = append(b.kept.b, pk.b...)
				for _, k := range lt.keys {
					b.kept.sql(",")
					if err := b.kept.value(lt.kinds[k], line[k]); err != nil {
						return fmt.Errorf("key %q: line %d: %w", r.Key, n+1, err)
					}
				}
				b.kept.sql(")")
			}
			b.lines++
		}
		if len(b.values.b) >= linesStatementBytes {
			if err := lt.flush(ctx, db, &b); err != nil {
				return err
			}
		}
	}
	return lt.flush(ctx, db, &b)
}

// flush runs the statements of b and empties it.
func (lt *lineTable) flush(ctx context.Context, db querier, b *lineBatch) error {
	if b.cleared > 0 {
		q := lt.deleteFrom + string(b.parents.b)
		if len(b.kept.b) > 0 {
			q += lt.keep + string(b.kept.b)
		}
		if _, err := db.ExecContext(ctx, q+")"); err != nil {
			return err
		}
	}
	if b.lines > 0 {
		if _, err := db.ExecContext(ctx, lt.insert+string(b.values.b)+lt.upsert); err != nil {
			return err
		}
	}
	b.parents.b, b.kept.b, b.values.b = b.parents.b[:0], b.kept.b[:0], b.values.b[:0]
	b.cleared, b.lines = 0, 0
	return nil
}

// ScanLines calls fn with the lines of the store's entity's child number
// child (its index in entity.Entity.Children), one document at a time:
// of every document in the store's scope (Scoped) when keys is nil, else
// of the documents with the given parent keys (entity.KeyText; none when
// keys is empty). parent is the document's key text, and each line holds
// the child's column values in column order, as Row.Children does.
//
// Documents come in the order of the child table's index, by parent key
// columns (numbers in numeric order, strings in binary order: not the
// order of the key texts), and a document's lines by line key: the order
// the source served them in is not kept. A document without lines is not
// passed, nor is a document's row read: a soft-deleted document's lines
// are passed like any other. fn may keep lines.
func (s *Store) ScanLines(ctx context.Context, child int, keys []string, fn func(parent string, lines entity.Lines) error) error {
	if child < 0 || child >= len(s.t.lines) {
		return fmt.Errorf("read lines: entity %s has no child %d", s.t.ent.Name, child)
	}
	return s.scanLines(ctx, s.sql, child, keys, fn)
}

// scanLines is ScanLines on db.
func (s *Store) scanLines(ctx context.Context, db querier, child int, keys []string, fn func(parent string, lines entity.Lines) error) error {
	t, lt := s.t, s.t.lines[child]
	if keys != nil && len(keys) == 0 {
		return nil
	}
	l := t.lit()
	l.sql(lt.scan)
	rows, err := s.queryWhere(ctx, db, l, keys, lt.order)
	if err != nil {
		return fmt.Errorf("read %s: %w", lt.name, err)
	}
	defer rows.Close()
	pk := t.keyCells()
	cs := make([]cell, len(lt.kinds))
	dest := make([]any, 0, len(pk)+len(cs))
	for i := range pk {
		dest = append(dest, pk[i].dest())
	}
	for i := range cs {
		cs[i].k = lt.kinds[i]
		dest = append(dest, cs[i].dest())
	}
	var parent string
	var lines entity.Lines
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("read %s: %w", lt.name, err)
		}
		if key := keyOf(pk); key != parent || lines == nil {
			if lines != nil {
				if err := fn(parent, lines); err != nil {
					return err
				}
			}
			parent, lines = key, entity.Lines{}
		}
		line := make([]entity.Value, len(cs))
		for i := range cs {
			line[i] = cs[i].value()
		}
		lines = append(lines, line)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read %s: %w", lt.name, err)
	}
	if lines != nil {
		return fn(parent, lines)
	}
	return nil
}

// linesOf reads, on db, the lines of every child of the documents with
// the given keys, by key: what a delete event carries.
func (s *Store) linesOf(ctx context.Context, db querier, keys []string) (map[string][]entity.Lines, error) {
	if len(s.t.lines) == 0 {
		return nil, nil
	}
	out := make(map[string][]entity.Lines, len(keys))
	for _, k := range keys {
		out[k] = make([]entity.Lines, len(s.t.lines))
	}
	for c := range s.t.lines {
		err := s.scanLines(ctx, db, c, keys, func(parent string, lines entity.Lines) error {
			if ls, ok := out[parent]; ok {
				ls[c] = lines
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// keyText is the text of a line's key.
func (lt *lineTable) keyText(line []entity.Value) string {
	parts := make([]string, len(lt.keys))
	for j, k := range lt.keys {
		parts[j] = line[k].Text(lt.kinds[k])
	}
	return entity.KeyText(parts)
}

// shadowed marks each line that a later line of the same key replaces
// (nil when none does). On PostgreSQL one INSERT ... ON CONFLICT cannot
// change a row twice, so the earlier of two lines of one key is left out:
// the later one's values land, as MySQL's upsert makes them.
func (lt *lineTable) shadowed(lines entity.Lines) []bool {
	if len(lines) < 2 {
		return nil
	}
	seen := make(map[string]bool, len(lines))
	var out []bool
	for i := len(lines) - 1; i >= 0; i-- {
		if len(lines[i]) != len(lt.kinds) {
			continue // the write refuses it
		}
		k := lt.keyText(lines[i])
		if seen[k] {
			if out == nil {
				out = make([]bool, len(lines))
			}
			out[i] = true
		}
		seen[k] = true
	}
	return out
}
