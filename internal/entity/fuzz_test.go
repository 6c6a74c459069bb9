package entity_test

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/entity"
)

// FuzzParse: Parse never panics, and either returns a file whose every
// entity holds up to a re-check (and that the JSON Schema accepts), or
// one *FileError with a line.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	for _, path := range examples(f) {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, c := range badCases(f) {
		f.Add([]byte(c.file))
	}
	f.Add([]byte(strings.Replace(good, `"decimal(15,2)"`, `"datetime(6)"`, 1)))
	f.Add([]byte(strings.Replace(strings.Replace(good, "entities:", "events: {sink: nats, url: \"nats://x:4222\"}\nentities:", 1), "    columns:", "    events: true\n    columns:", 1)))
	f.Add([]byte("database:\n  kind: postgres\n  dsn_file: /run/secrets/dsn\n" + good))
	s := compileSchema(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := entity.Parse("f.yaml", data)
		if err != nil {
			var fe *entity.FileError
			if !errors.As(err, &fe) || fe.Line < 0 || fe.Path != "f.yaml" || fe.Msg == "" || file != nil {
				t.Fatalf("err %v (%T), file %v", err, err, file)
			}
			return
		}
		if len(file.Entities) == 0 {
			t.Fatal("a file without entities")
		}
		tables := map[string]bool{}
		for _, e := range file.Entities {
			recheck(t, e.Name, e.TableName(), e.Key, e.Columns, nil, tables)
			if len(e.Sources) == 0 || len(e.UpdatedAt) == 0 {
				t.Fatalf("entity %s: sources %v, updated_at %v", e.Name, e.Sources, e.UpdatedAt)
			}
			if e.Events && entity.EventKeyBytes(e) > entity.MaxEventKeyBytes {
				t.Fatalf("entity %s: events of keys up to %d bytes", e.Name, entity.EventKeyBytes(e))
			}
			for _, src := range e.Sources {
				for k, v := range src.Set {
					c := e.Column(k)
					if c == nil || !slices.Contains(e.Key, k) || entity.Fits(c.Type, v) != nil {
						t.Fatalf("entity %s: set %s=%q", e.Name, k, v)
					}
				}
			}
			var parentKey []entity.Column
			for _, i := range e.KeyIndexes() {
				parentKey = append(parentKey, e.Columns[i])
			}
			for _, c := range e.Children {
				recheck(t, c.Name, c.Table, c.Key, c.Columns, parentKey, tables)
			}
		}
		if err := s.Validate(asJSON(t, data)); err != nil {
			t.Fatalf("Parse takes a file the JSON Schema refuses: %v", err)
		}
	})
}

var name = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// recheck checks on its own what Parse promises of an entity or a child.
func recheck(t *testing.T, n, table string, key []string, cols, parentKey []entity.Column, tables map[string]bool) {
	t.Helper()
	if !name.MatchString(n) || !name.MatchString(table) || tables[table] || slices.Contains(entity.OwnTables, table) {
		t.Fatalf("%s: name or table %q", n, table)
	}
	tables[table] = true
	if len(cols) == 0 || len(key) == 0 {
		t.Fatalf("%s: %d columns, key %v", n, len(cols), key)
	}
	seen := map[string]bool{}
	for _, c := range append(slices.Clone(parentKey), cols...) {
		if !name.MatchString(c.Name) || seen[c.Name] || slices.Contains(entity.Reserved, c.Name) || len(c.From) == 0 {
			t.Fatalf("%s: column %+v", n, c)
		}
		seen[c.Name] = true
		if back, err := entity.ParseType(c.Type.String()); err != nil || back != c.Type {
			t.Fatalf("%s: column %s: type %v", n, c.Name, c.Type)
		}
		for src, v := range c.Values {
			if entity.Fits(c.Type, v) != nil {
				t.Fatalf("%s: column %s: value %q -> %q", n, c.Name, src, v)
			}
		}
	}
	bytes := 0
	for _, c := range parentKey {
		bytes += entity.IndexBytes(c.Type)
	}
	for _, k := range key {
		i := slices.IndexFunc(cols, func(c entity.Column) bool { return c.Name == k })
		if i < 0 || cols[i].Nullable || cols[i].Type.Kind == entity.Text || cols[i].Type.Kind == entity.JSON || cols[i].Type.Kind == entity.DateTime {
			t.Fatalf("%s: key column %q", n, k)
		}
		bytes += entity.IndexBytes(cols[i].Type)
	}
	if bytes > entity.MaxIndexBytes {
		t.Fatalf("%s: key of %d bytes", n, bytes)
	}
}

func BenchmarkParse(b *testing.B) {
	data, err := os.ReadFile("../../examples/customers.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := entity.Parse("customers.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}
