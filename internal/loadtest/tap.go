package loadtest

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// tap sits in front of the in-process erpmock. It tells the processes apart
// by a path prefix ("/p3/api/v1/..." is process 3; every other path is the
// load test's own), times each API request, counts the records each
// process was served, and remembers when each record version was first
// served to any process: the start of the serve-to-write latency.
type tap struct {
	next  http.Handler
	start time.Time
	procs []*procTap

	mu    sync.Mutex
	first map[version]time.Duration // since start; first complete 200 carrying it
}

// version is one version of one record.
type version struct {
	id string
	v  int64
}

// procTap is what the tap saw of one process.
type procTap struct {
	served   atomic.Int64 // items (valid or not) in complete 200 pages
	requests atomic.Int64

	mu      sync.Mutex
	latency []float64 // per API request, milliseconds
}

func newTap(next http.Handler, processes int) *tap {
	t := &tap{next: next, start: time.Now(), first: map[version]time.Duration{}}
	for range processes {
		t.procs = append(t.procs, &procTap{})
	}
	return t
}

// verifyPrefix is the base URL path of the load test's own verification.
const verifyPrefix = "/verify"

// withPath returns a shallow copy of r with another URL path.
func withPath(r *http.Request, path string) *http.Request {
	r2 := new(http.Request)
	*r2 = *r
	u := *r.URL
	u.Path, u.RawPath = path, ""
	r2.URL = &u
	return r2
}

// prefix returns the base URL path of process i.
func prefix(i int) string { return "/p" + strconv.Itoa(i) }

func (t *tap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	proc := -1
	if rest, ok := strings.CutPrefix(r.URL.Path, "/p"); ok {
		if num, path, ok := strings.Cut(rest, "/"); ok {
			if i, err := strconv.Atoi(num); err == nil && i >= 0 && i < len(t.procs) {
				proc = i
				r = withPath(r, "/"+path)
			}
		}
	}
	if proc < 0 {
		if rest, ok := strings.CutPrefix(r.URL.Path, verifyPrefix); ok {
			r = withPath(r, rest)
		}
		t.next.ServeHTTP(w, r)
		return
	}
	page := r.URL.Path == "/api/v1/memberships"
	cw := &captureWriter{ResponseWriter: w, capture: page}
	began := time.Now()
	t.next.ServeHTTP(cw, r)
	done := time.Now()
	p := t.procs[proc]
	if strings.HasPrefix(r.URL.Path, "/api/") {
		p.requests.Add(1)
		p.mu.Lock()
		p.latency = append(p.latency, float64(done.Sub(began))/float64(time.Millisecond))
		p.mu.Unlock()
	}
	// A truncated answer hijacks the connection and never reaches cw; an
	// answer cut short for any other reason fails the length check.
	if !page || cw.status != http.StatusOK || cw.declared < 0 || len(cw.body) != cw.declared {
		return
	}
	vs, items := scanVersions(cw.body)
	p.served.Add(int64(items))
	// The client may hold the whole page, and write its rows, before the
	// handler returns (a large Write goes straight to the socket, and this
	// goroutine may then wait for a core): the page's time is when its
	// last Write began, before which no client can have had it complete.
	at := cw.lastWrite.Sub(t.start)
	t.mu.Lock()
	for _, v := range vs {
		if _, ok := t.first[v]; !ok {
			t.first[v] = at
		}
	}
	t.mu.Unlock()
}

// firstServed returns when version v of record id was first served, since
// the tap started.
func (t *tap) firstServed(id string, v int64) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, ok := t.first[version{id, v}]
	return d, ok
}

// captureWriter keeps a copy of a page's body.
type captureWriter struct {
	http.ResponseWriter
	capture  bool
	status   int
	declared int
	body     []byte

	lastWrite time.Time // when the last Write began
}

func (c *captureWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
		c.declared = -1
		if n, err := strconv.Atoi(c.Header().Get("Content-Length")); err == nil {
			c.declared = n
		}
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *captureWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	c.lastWrite = time.Now()
	n, err := c.ResponseWriter.Write(b)
	if c.capture && c.status == http.StatusOK {
		c.body = append(c.body, b[:n]...)
	}
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (erpmock
// hijacks it to truncate a body).
func (c *captureWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

var (
	idField      = []byte(`"erp_id":"`)
	versionField = []byte(`,"version":`)
)

// scanVersions reads (erp_id, version) of each item of a page as erpmock
// writes it: every item starts with "erp_id" and has "version" after it.
// Items whose version is not a positive number (some invalid records) are
// left out of the versions, not out of the count of items.
func scanVersions(body []byte) (out []version, items int) {
	for {
		i := bytes.Index(body, idField)
		if i < 0 {
			return out, items
		}
		items++
		body = body[i+len(idField):]
		end := bytes.IndexByte(body, '"')
		if end < 0 {
			return out, items
		}
		id := string(body[:end])
		body = body[end:]
		j := bytes.Index(body, versionField)
		if j < 0 {
			return out, items
		}
		body = body[j+len(versionField):]
		k := 0
		for k < len(body) && body[k] >= '0' && body[k] <= '9' {
			k++
		}
		if v, err := strconv.ParseInt(string(body[:k]), 10, 64); err == nil && v > 0 {
			out = append(out, version{id, v})
		}
		body = body[k:]
	}
}
