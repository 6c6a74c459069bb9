package store_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/store"
	"github.com/erpsync/erpsync/internal/testenv"
)

// BenchmarkWriteDocuments writes chunks of 200 orders through InsertRows
// (new keys) and UpsertRows (a higher version of the same keys), flat (no
// children) and as documents of 10 items and 2 texts each, one item
// replaced and one changed each version: what lines cost a chunk, per
// document (ns/doc).
func BenchmarkWriteDocuments(b *testing.B) {
	const chunk = 200
	for _, docs := range []bool{false, true} {
		for _, path := range []string{"insert", "upsert"} {
			b.Run(fmt.Sprintf("%s/lines=%v", path, docs), func(b *testing.B) {
				s, _ := testenv.MigratedStore(b)
				e := orders(b)
				if !docs {
					e.Children = nil
				}
				st := entityStore(b, s, e)
				ctx := context.Background()
				at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
				rows := func(first, version int64) []store.Row {
					out := make([]store.Row, chunk)
					for i := range out {
						no := first + int64(i)
						out[i] = store.Row{Key: "1000" + entity.KeySeparator + strconv.FormatInt(no, 10),
							Vals:    []entity.Value{{S: "1000"}, {I: no}, {S: "OPEN"}, {S: strconv.FormatInt(version, 10) + ".50"}},
							Version: version, Fence: 1, UpdatedAt: at}
						if docs {
							var items entity.Lines
							for n := range int64(10) {
								items = append(items, []entity.Value{{I: version + n}, {S: "MAT-" + strconv.FormatInt(n, 10)}, {S: strconv.FormatInt(version, 10) + ".000"}, {Null: true}})
							}
							texts := entity.Lines{{{S: "de"}, {I: 0}, {S: "Lieferung"}}, {{S: "en"}, {I: 0}, {S: "Delivery"}}}
							out[i].Children = []entity.Lines{items, texts}
						}
					}
					return out
				}
				if path == "upsert" {
					if err := st.InsertRows(ctx, rows(0, 1)); err != nil {
						b.Fatal(err)
					}
				}
				n := int64(0)
				for b.Loop() {
					n++
					var err error
					if path == "insert" {
						err = st.InsertRows(ctx, rows(n*chunk, 1))
					} else {
						err = st.UpsertRows(ctx, rows(0, n+1))
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*chunk), "ns/doc")
			})
		}
	}
}
