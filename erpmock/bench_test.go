package erpmock_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
)

// BenchmarkNew builds a mock of a million records and reports the heap it
// holds.
func BenchmarkNew(b *testing.B) {
	var m *erpmock.Mock
	for b.Loop() {
		m = erpmock.New(erpmock.Options{Records: 1_000_000, Seed: 1, Faults: erpmock.Faults{InvalidRate: 0.01}})
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heapMiB")
	runtime.KeepAlive(m)
}

// BenchmarkServePage serves 500-record pages deep in a million records
// that keep changing.
func BenchmarkServePage(b *testing.B) {
	m := erpmock.New(erpmock.Options{Records: 1_000_000, Seed: 1})
	req := httptest.NewRequest(http.MethodGet, "/api/v1/memberships?updated_since=2025-01-01T00:02:00Z&limit=500", nil)
	for b.Loop() {
		m.Change(1)
		w := httptest.NewRecorder()
		m.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}
