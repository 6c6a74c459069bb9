package syncer

import (
	"math/rand/v2"
	"testing"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/erp"
)

// chunkLen cuts records into chunks of at most size records and at most
// size rows (a record and each of its lines one), one record at least,
// each as long as those bounds allow: on random documents (0 to 30 lines
// in up to two children) and sizes, the chunks cover the records in order
// and none could take its next record.
func TestChunksHoldAtMostSizeRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		recs := make([]erp.Record, rng.IntN(60))
		for i := range recs {
			for range rng.IntN(3) {
				recs[i].Children = append(recs[i].Children, make(entity.Lines, rng.IntN(31)))
			}
		}
		size := 1 + rng.IntN(40)
		for rest := recs; len(rest) > 0; {
			n := chunkLen(rest, size)
			rows := rowsOf(rest[:n])
			switch {
			case n < 1 || n > size:
				t.Fatalf("size %d: a chunk of %d records", size, n)
			case n > 1 && rows > int64(size):
				t.Fatalf("size %d: %d records fill %d rows", size, n, rows)
			case n < len(rest) && n < size && rowsOf(rest[:n+1]) <= int64(size):
				t.Fatalf("size %d: a chunk of %d records (%d rows) left out the next, which fits", size, n, rows)
			}
			rest = rest[n:]
		}
	}
	// Records without lines: chunks of size records, as before.
	if n := chunkLen(make([]erp.Record, 1200), 500); n != 500 {
		t.Fatalf("1,200 records without lines: a chunk of %d, want 500", n)
	}
}
