package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/store"
)

// TestMigrateProperty migrates random sequences of definitions of one
// entity, each a few random changes (columns added and dropped, strings
// and decimals widened and narrowed, types changed, nullability turned,
// the key changed) away from the last accepted one, with rows written
// between steps that fill every column to its limit. After each step: a
// change the rules allow was applied and the live table is the new
// definition (an independent reading of information_schema, nothing left
// to plan, CheckEntities passing); a change they forbid was refused with
// a LossyChangeError and changed nothing, neither the table nor the
// recorded definition nor a row. ERPSYNC_PROPERTY_SEED replays a seed.
func TestMigrateProperty(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("ERPSYNC_PROPERTY_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	steps := 100
	if testing.Short() {
		steps = 25
	}
	t.Logf("seed %d (ERPSYNC_PROPERTY_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	s := setup(t)
	ctx := context.Background()

	accepted := &entity.Entity{Name: "things", Key: []string{"k"}, UpdatedAt: []string{"u"},
		Columns: []entity.Column{{Name: "k", Type: entity.Type{Kind: entity.String, Length: 12}}}}
	migrateEntities(t, s, accepted)
	rows := 0
	var nAccepted, nRefused int
	for step := range steps {
		next := clone(accepted)
		for range 1 + rng.IntN(3)/2 {
			mutate(rng, next)
		}
		want := allowed(accepted, next, rows > 0)
		before := schemaOf(t, s, "things")
		sum := rowsSum(t, s, accepted)
		p, err := s.PlanEntities(ctx, []*entity.Entity{next})
		if err == nil {
			_, err = s.ApplyEntities(ctx, p)
		}
		var le *store.LossyChangeError
		switch {
		case want == "" && err != nil:
			t.Fatalf("step %d: %s -> %s: allowed, got %v", step, describeEntity(accepted), describeEntity(next), err)
		case want != "" && !errors.As(err, &le):
			t.Fatalf("step %d: %s -> %s: want refused (%s), got %v (plan %q)", step, describeEntity(accepted), describeEntity(next), want, err, p.Statements)
		case want != "":
			nRefused++
			if after := schemaOf(t, s, "things"); after != before {
				t.Fatalf("step %d: refused (%v) but the schema changed:\n%s\n---\n%s", step, err, before, after)
			}
			if after := rowsSum(t, s, accepted); after != sum {
				t.Fatalf("step %d: refused (%v) but the rows changed", step, err)
			}
			continue
		}
		nAccepted++
		assertMatches(t, s, next)
		assertTable(t, s, next)
		if after := rowsSum(t, s, accepted); after != sum {
			t.Fatalf("step %d: %s -> %s changed the rows' values:\n%s\n---\n%s", step, describeEntity(accepted), describeEntity(next), sum, after)
		}
		accepted = next
		if rng.IntN(3) == 0 {
			insertFull(t, s, accepted, rows)
			rows++
		}
	}
	t.Logf("%d steps accepted, %d refused, %d rows", nAccepted, nRefused, rows)
	if nAccepted == 0 || nRefused == 0 {
		t.Fatalf("the steps tried one verdict only: %d accepted, %d refused", nAccepted, nRefused)
	}
}

var propertyTypes = []string{"string(%d)", "text", "int32", "int64", "decimal(%d,%d)", "bool", "date", "datetime", "json"}

func randomType(rng *rand.Rand) entity.Type {
	f := propertyTypes[rng.IntN(len(propertyTypes))]
	var s string
	switch {
	case strings.HasPrefix(f, "string"):
		s = fmt.Sprintf(f, 1+rng.IntN(300))
	case strings.HasPrefix(f, "decimal"):
		p := 1 + rng.IntN(30)
		s = fmt.Sprintf(f, p, rng.IntN(min(p, 10)+1))
	default:
		s = f
	}
	ty, _ := entity.ParseType(s)
	return ty
}

// mutate makes one random change to e: the change first, then a column
// it applies to (a string to lengthen or shorten, a decimal to widen or
// narrow), so that every kind of change comes up often.
func mutate(rng *rand.Rand, e *entity.Entity) {
	pick := func(ok func(c entity.Column) bool) *entity.Column {
		var is []int
		for i, c := range e.Columns {
			if ok(c) {
				is = append(is, i)
			}
		}
		if len(is) == 0 {
			return nil
		}
		return &e.Columns[is[rng.IntN(len(is))]]
	}
	kind := func(k entity.Kind) func(entity.Column) bool {
		return func(c entity.Column) bool { return c.Type.Kind == k }
	}
	notKey := func(c entity.Column) bool { return !slices.Contains(e.Key, c.Name) }
	switch rng.IntN(8) {
	case 0: // a new column
		name := fmt.Sprintf("c%d", rng.IntN(12))
		if e.Column(name) == nil {
			e.Columns = append(e.Columns, entity.Column{Name: name, Type: randomType(rng), Nullable: rng.IntN(3) > 0})
		}
	case 1: // a column dropped
		if c := pick(notKey); c != nil {
			e.Columns = slices.DeleteFunc(e.Columns, func(d entity.Column) bool { return d.Name == c.Name })
		}
	case 2, 3: // a string longer or shorter
		if c := pick(kind(entity.String)); c != nil {
			c.Type.Length = max(1, c.Type.Length+rng.IntN(41)-20)
		}
	case 4, 5: // a decimal wider or narrower
		if c := pick(kind(entity.Decimal)); c != nil {
			c.Type.Scale = max(0, min(10, c.Type.Scale+rng.IntN(5)-2))
			c.Type.Precision = max(c.Type.Scale, 1, min(40, c.Type.Precision+rng.IntN(7)-3))
		} else if name := fmt.Sprintf("d%d", rng.IntN(4)); e.Column(name) == nil {
			e.Columns = append(e.Columns, entity.Column{Name: name, Type: entity.Type{Kind: entity.Decimal, Precision: 10, Scale: 2}, Nullable: true})
		}
	case 6: // another type, or nullability turned
		if c := pick(notKey); c != nil && rng.IntN(2) == 0 {
			c.Type = randomType(rng)
		} else if c != nil {
			c.Nullable = !c.Nullable
		}
	case 7: // another key
		if c := pick(func(c entity.Column) bool {
			return notKey(c) && c.Type.Kind == entity.String && !c.Nullable && c.Type.Length <= 100
		}); c != nil && rng.IntN(2) == 0 {
			e.Key = append(e.Key, c.Name)
		} else if len(e.Key) > 1 {
			e.Key = e.Key[:len(e.Key)-1]
		}
	}
}

// allowed is the rule of the spec, written out on its own: "" when from
// may become to on a table that has rows or not, else why not.
func allowed(from, to *entity.Entity, rows bool) string {
	if !slices.Equal(from.Key, to.Key) {
		return "key changed"
	}
	for _, a := range from.Columns {
		if to.Column(a.Name) == nil {
			return "dropped " + a.Name
		}
	}
	for _, b := range to.Columns {
		a := from.Column(b.Name)
		switch {
		case a == nil && !b.Nullable && rows:
			return "not null column added to rows: " + b.Name
		case a == nil:
		case a.Nullable && !b.Nullable:
			return "made not null: " + b.Name
		case a.Type == b.Type:
		case a.Type.Kind == entity.String && b.Type.Kind == entity.String && b.Type.Length > a.Type.Length:
		case a.Type.Kind == entity.Decimal && b.Type.Kind == entity.Decimal &&
			b.Type.Scale >= a.Type.Scale && b.Type.Precision-b.Type.Scale >= a.Type.Precision-a.Type.Scale:
		default:
			return fmt.Sprintf("%s: %s to %s", b.Name, a.Type, b.Type)
		}
	}
	return ""
}

func describeEntity(e *entity.Entity) string {
	var cols []string
	for _, c := range e.Columns {
		n := c.Name + " " + c.Type.String()
		if c.Nullable {
			n += "?"
		}
		cols = append(cols, n)
	}
	return fmt.Sprintf("key %v {%s}", e.Key, strings.Join(cols, ", "))
}

var displayWidth = regexp.MustCompile(`^(int|bigint)\(\d+\)$`)

// assertTable reads the table's columns from information_schema (on
// PostgreSQL, pg_attribute) and compares them with e's as the database
// would write the types, on its own reading: every declared column and
// erpsync's own, nothing else.
func assertTable(t *testing.T, s *store.Store, e *entity.Entity) {
	t.Helper()
	pg := s.Dialect() == store.Postgres
	names := map[entity.Kind]string{entity.Text: "text", entity.Int32: "int", entity.Int64: "bigint", entity.Bool: "tinyint(1)",
		entity.Date: "date", entity.DateTime: "datetime(3)", entity.JSON: "longtext"}
	if pg {
		names = map[entity.Kind]string{entity.Text: "text", entity.Int32: "integer", entity.Int64: "bigint", entity.Bool: "boolean",
			entity.Date: "date", entity.JSON: "text"}
	}
	typeName := func(ty entity.Type) string {
		switch {
		case ty.Kind == entity.String && pg:
			return fmt.Sprintf("character varying(%d)", ty.Length)
		case ty.Kind == entity.String:
			return fmt.Sprintf("varchar(%d)", ty.Length)
		case ty.Kind == entity.Decimal && pg:
			return fmt.Sprintf("numeric(%d,%d)", ty.Precision, ty.Scale)
		case ty.Kind == entity.Decimal:
			return fmt.Sprintf("decimal(%d,%d)", ty.Precision, ty.Scale)
		case ty.Kind == entity.DateTime && pg:
			return fmt.Sprintf("timestamp(%d) with time zone", ty.Digits())
		}
		return names[ty.Kind]
	}
	want := map[string]string{}
	for _, c := range e.Columns {
		want[c.Name] = fmt.Sprintf("%s %v", typeName(c.Type), c.Nullable)
	}
	bigint, datetime := entity.Type{Kind: entity.Int64}, entity.Type{Kind: entity.DateTime}
	for _, own := range []entity.Column{{Name: "erp_version", Type: bigint}, {Name: "erp_updated_at", Type: datetime}, {Name: "fence_token", Type: bigint},
		{Name: "created_at", Type: datetime}, {Name: "updated_at", Type: datetime}, {Name: "deleted_at", Type: datetime, Nullable: true},
		{Name: "quarantined_at", Type: datetime, Nullable: true}, {Name: "quarantined_version", Type: bigint, Nullable: true},
		{Name: "restore_count", Type: bigint, Nullable: true}, {Name: "quarantined_updated_at", Type: datetime, Nullable: true}} {
		want[own.Name] = fmt.Sprintf("%s %v", typeName(own.Type), own.Nullable)
	}
	query := `SELECT COLUMN_NAME AS name, LOWER(COLUMN_TYPE) AS type, IS_NULLABLE AS nullable FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`
	if pg {
		query = `SELECT attname AS name, format_type(atttypid, atttypmod) AS type, CASE WHEN attnotnull THEN 'NO' ELSE 'YES' END AS nullable
FROM pg_attribute WHERE attrelid = ?::regclass AND attnum > 0 AND NOT attisdropped`
	}
	var live []struct{ Name, Type, Nullable string }
	s.DB().Raw(query, e.TableName()).Scan(&live)
	got := map[string]string{}
	for _, c := range live {
		got[c.Name] = fmt.Sprintf("%s %v", displayWidth.ReplaceAllString(c.Type, "$1"), c.Nullable == "YES")
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("table %s:\n got %v\nwant %v", e.TableName(), got, want)
	}
}

// insertFull writes row n of e's table with every column at the limit of
// its type: the longest string (of 2-byte characters), the widest decimal,
// the largest integers. A narrowing accepted by mistake then cuts a value,
// or fails.
func insertFull(t *testing.T, s *store.Store, e *entity.Entity, n int) {
	t.Helper()
	var names, values []string
	var args []any
	ident := func(name string) string { return "`" + name + "`" }
	if s.Dialect() == store.Postgres {
		ident = func(name string) string { return `"` + name + `"` }
	}
	for _, c := range e.Columns {
		names = append(names, ident(c.Name))
		values = append(values, "?")
		var v any
		switch c.Type.Kind {
		case entity.String:
			v = strings.Repeat("é", c.Type.Length)
			if c.Name == "k" || slices.Contains(e.Key, c.Name) {
				v = fmt.Sprintf("r%d", n)
			}
		case entity.Text:
			v = "some text"
		case entity.Int32:
			v = int64(2147483647)
		case entity.Int64:
			v = int64(9223372036854775807)
		case entity.Decimal:
			v = strings.Repeat("9", c.Type.Precision-c.Type.Scale)
			if c.Type.Scale > 0 {
				v = v.(string) + "." + strings.Repeat("9", c.Type.Scale)
			}
			if c.Type.Precision == c.Type.Scale {
				v = "0." + strings.Repeat("9", c.Type.Scale)
			}
		case entity.Bool:
			v = 1
			if s.Dialect() == store.Postgres {
				v = true
			}
		case entity.Date:
			v = "2024-02-29"
		case entity.DateTime:
			v = "2024-02-29 12:34:56.789"
		case entity.JSON:
			v = `{"b": [1, 2.50], "a": "x"}`
		}
		args = append(args, v)
	}
	names = append(names, "erp_version", "erp_updated_at", "fence_token", "created_at", "updated_at")
	values = append(values, "1", nowSQL(s), "1", nowSQL(s), nowSQL(s))
	q := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", ident(e.TableName()), strings.Join(names, ", "), strings.Join(values, ", "))
	if err := s.DB().Exec(q, args...).Error; err != nil {
		t.Fatalf("insert a full row into %s: %v", describeEntity(e), err)
	}
}

// rowsSum is the text of every row's values of e's columns, in key order.
func rowsSum(t *testing.T, s *store.Store, e *entity.Entity) string {
	t.Helper()
	var cols []string
	pg := s.Dialect() == store.Postgres
	for _, c := range e.Columns {
		as := "CHAR"
		if c.Type.Kind == entity.Decimal {
			as = "DECIMAL(65,30)" // a wider scale writes more zeros
		}
		if pg {
			as = "text" // CHAR would be char(1)
			if c.Type.Kind == entity.Decimal {
				as = "numeric(65,30)"
			}
			cols = append(cols, `COALESCE(CAST(CAST("`+c.Name+`" AS `+as+`) AS text), 'NULL')`)
			continue
		}
		cols = append(cols, "COALESCE(CAST(`"+c.Name+"` AS "+as+"), 'NULL')")
	}
	var out []string
	q := fmt.Sprintf("SELECT CONCAT_WS('|', %s) FROM `%s` ORDER BY `k`", strings.Join(cols, ", "), e.TableName())
	if pg {
		q = fmt.Sprintf(`SELECT CONCAT_WS('|', %s) FROM "%s" ORDER BY "k"`, strings.Join(cols, ", "), e.TableName())
	}
	if err := s.DB().Raw(q).Scan(&out).Error; err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, "\n")
}
