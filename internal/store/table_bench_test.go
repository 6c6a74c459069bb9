package store

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
)

// benchEntity is a 12-column entity like the bench's typed one
// (internal/bench): a composite key, decimals, a date, a nullable
// date-time, int64s, a bool and strings.
func benchEntity() *entity.Entity {
	str := func(n int) entity.Type { return entity.Type{Kind: entity.String, Length: n} }
	dec := func(p, s int) entity.Type { return entity.Type{Kind: entity.Decimal, Precision: p, Scale: s} }
	return &entity.Entity{Name: "orders", Key: []string{"company", "order_no"}, UpdatedAt: []string{"changed_at"}, Version: []string{"version"},
		Columns: []entity.Column{
			{Name: "company", Type: str(4)}, {Name: "order_no", Type: entity.Type{Kind: entity.Int64}},
			{Name: "customer", Type: str(10)}, {Name: "status", Type: str(9)},
			{Name: "amount", Type: dec(15, 2)}, {Name: "quantity", Type: dec(13, 3)},
			{Name: "ordered_on", Type: entity.Type{Kind: entity.Date}}, {Name: "shipped_at", Type: entity.Type{Kind: entity.DateTime}, Nullable: true},
			{Name: "weight_mg", Type: entity.Type{Kind: entity.Int64}}, {Name: "paid", Type: entity.Type{Kind: entity.Bool}},
			{Name: "note", Type: str(80)}, {Name: "currency", Type: str(3)},
		}}
}

// benchRows returns n rows of benchEntity, one in four with a note that is
// not ASCII (written in hex) and one in five without shipped_at.
func benchRows(n int) []Row {
	at := time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)
	rows := make([]Row, n)
	vals := make([]entity.Value, 12*n)
	notes := []string{"deliver to the back door", "call before delivery", "Lieferung an Frau Müller", "customer's own carrier"}
	for i := range rows {
		v := vals[12*i : 12*(i+1)]
		company := strconv.Itoa(1000 + i%4)
		no := int64(9_007_199_254_740_993 + i)
		v[0], v[1], v[2], v[3] = entity.Value{S: company}, entity.Value{I: no}, entity.Value{S: fmt.Sprintf("C%07d", i)}, entity.Value{S: "SHIPPED"}
		v[4], v[5], v[6] = entity.Value{S: fmt.Sprintf("%d.%02d", i*79, i%100)}, entity.Value{S: fmt.Sprintf("%d.%03d", i, i%1000)}, entity.Value{S: "2024-05-17"}
		v[7] = entity.Value{T: at.Add(-time.Duration(i) * time.Minute)}
		if i%5 == 0 {
			v[7] = entity.Value{Null: true}
		}
		v[8], v[9], v[10], v[11] = entity.Value{I: int64(i) * 1_000_003}, entity.Value{I: int64(i % 2)}, entity.Value{S: notes[i%4]}, entity.Value{S: "EUR"}
		rows[i] = Row{Key: company + entity.KeySeparator + strconv.FormatInt(no, 10), Vals: v, Version: 1 + int64(i%7),
			UpdatedAt: at.Add(time.Duration(i) * time.Millisecond), Fence: 1}
	}
	return rows
}

// BenchmarkTableValues writes the VALUES list of a 500-row INSERT: of a
// 12-column typed entity, and of memberships (6 columns) from their
// fields, as the write path converts them (membershipRows). allocs/op
// over 500 is the allocations a row.
func BenchmarkTableValues(b *testing.B) {
	const n = 500
	typed := mustCompile(benchEntity())
	rows := benchRows(n)
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := make([]Membership, n)
	for i := range ms {
		ends := at.Add(time.Duration(i) * time.Hour)
		ms[i] = Membership{ErpID: fmt.Sprintf("M%09d", i), MemberID: fmt.Sprintf("U%09d", i/2), ProductCode: "GOLD", Status: "ACTIVE",
			StartsAt: at, EndsAt: &ends, Version: 3, UpdatedAt: at.Add(time.Duration(i) * time.Millisecond), Fence: 1}
	}
	for _, c := range []struct {
		name string
		t    *Table
		rows func() []Row
	}{
		{"typed-12-columns", typed, func() []Row { return rows }},
		{"memberships-6-columns", memberships, func() []Row { return membershipRows(ms) }},
	} {
		b.Run(fmt.Sprintf("%s/%d", c.name, n), func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for b.Loop() {
				l := newLiteral(MySQL)
				if err := c.t.values(l, c.rows()); err != nil {
					b.Fatal(err)
				}
				size = len(l.b)
				l.free()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
			b.ReportMetric(float64(size)/n, "bytes/row")
		})
	}
}
