package erpmock

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestAppendWireTimeIsTheLayout(t *testing.T) {
	lo := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	hi := time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC).UnixMilli()
	vs := []int64{0, -1, 1, lo, hi, 951782400000 /* 2000-02-29 */, 1e12 + 7}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		vs = append(vs, lo+r.Int64N(hi-lo+1))
	}
	for _, v := range vs {
		want := ms(v).Format(wireTime)
		if got := string(appendWireTime(nil, v)); got != want {
			t.Fatalf("appendWireTime(%d) = %s, want %s", v, got, want)
		}
	}
}
