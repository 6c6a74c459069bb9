package erpmock

import (
	"bufio"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/erpsync/erpsync/api"
	"github.com/erpsync/erpsync/internal/ctxtime"
)

// ServeHTTP serves the API of Options.Face: by default the one of the
// contract (api.ERPOpenAPI) under /api/v1/ and the contract itself at
// /openapi.yaml; and the admin endpoints under
// /admin/.
func (m *Mock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mux.ServeHTTP(w, r)
}

func (m *Mock) routes() {
	m.mux = http.NewServeMux()
	switch m.face {
	case FaceV2:
		m.mux.HandleFunc("GET /v2/members/changes", m.api(m.serveV2Page))
		m.mux.HandleFunc("GET /v2/members/count", m.api(m.serveV2Count))
	default:
		m.mux.HandleFunc("GET /api/v1/memberships", m.api(m.servePage))
		m.mux.HandleFunc("GET /api/v1/memberships/count", m.api(m.serveCount))
		m.mux.HandleFunc("GET "+ContractsPath, m.api(m.servePageAs(ContractsPage)))
		m.mux.HandleFunc("GET "+ContractsCountPath, m.api(m.serveCount))
		m.mux.HandleFunc("GET "+OrdersPath, m.api(m.servePageAs(m.ordersPage)))
		m.mux.HandleFunc("GET "+OrdersCountPath, m.api(m.serveCount))
		m.mux.HandleFunc("GET /openapi.yaml", serveOpenAPI)
	}
	m.mux.HandleFunc("GET /admin/faults", m.getFaults)
	m.mux.HandleFunc("PUT /admin/faults", m.putFaults)
	m.mux.HandleFunc("PATCH /admin/faults", m.putFaults)
	m.mux.HandleFunc("POST /admin/change", m.postChange)
	m.mux.HandleFunc("POST /admin/delete", m.postDelete)
	m.mux.HandleFunc("POST /admin/recreate", m.postRecreate)
	m.mux.HandleFunc("POST /admin/change-lines", m.postChangeLines)
	m.mux.HandleFunc("GET /admin/truth", m.getTruth)
	m.mux.HandleFunc("GET /admin/stats", m.getStats)
}

// endpoint answers an API request that passed the faults with a status and
// a JSON body.
type endpoint func(r *http.Request, f Faults) (int, []byte)

// api wraps an endpoint with authentication and the request faults.
func (m *Mock) api(h endpoint) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		m.requests.Add(1)
		f := m.Faults()
		ctx := r.Context()
		if f.Latency > 0 && ctxtime.Sleep(ctx, f.Latency) != nil {
			drop(w)
			return
		}
		if ok, wait := m.admit(f.MaxRate, time.Now()); !ok {
			m.tooMany(w, http.StatusTooManyRequests, int(math.Ceil(wait.Seconds())), "rate limit exceeded")
			return
		}
		if m.token != "" && !m.authorized(r) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			m.write(w, http.StatusUnauthorized, errorBody("missing or wrong bearer token"))
			return
		}
		if f.stalls(r) || m.hit(f.HangRate) {
			m.hung.Add(1)
			if ctxtime.Sleep(ctx, f.hang()) != nil {
				drop(w)
				return
			}
		}
		if m.hit(f.ErrorRate) {
			code := [...]int{500, 502, 503, 504}[m.intN(4)]
			if code == http.StatusServiceUnavailable {
				m.tooMany(w, code, f.retryAfter(), "injected fault")
				return
			}
			m.write(w, code, errorBody("injected fault"))
			return
		}
		if m.hit(f.RateLimitRate) {
			m.tooMany(w, http.StatusTooManyRequests, f.retryAfter(), "injected rate limit")
			return
		}
		code, body := h(r, f)
		if code == http.StatusOK && m.hit(f.TruncateRate) {
			m.truncate(w, body)
			return
		}
		m.write(w, code, body)
	}
}

func (m *Mock) servePage(r *http.Request, f Faults) (int, []byte) {
	q, err := parsePageQuery(r.URL.Query())
	if err != nil {
		return http.StatusBadRequest, errorBody(err.Error())
	}
	m.tenantOf(&q.window, r.URL.Query())
	items, next := m.pageItems(q, f)
	if c := r.URL.Query().Get("cursor"); f.StuckCursor && c != "" {
		next = c
	}
	return http.StatusOK, m.appendPage(make([]byte, 0, 64+220*len(items)), items, next)
}

// pageItems reads the page q asks for, with the page faults of f: records
// changed first, a duplicate and a stale copy appended. next is the cursor
// after the page, "" on the last.
func (m *Mock) pageItems(q pageQuery, f Faults) (items []served, next string) {
	if f.ChangeRate > 0 {
		m.Change(f.ChangeRate)
	}
	if f.DeleteRate > 0 {
		m.Delete(f.DeleteRate)
	}
	items, more := m.page(q)
	if more {
		last := items[len(items)-1]
		next = m.encodeCursor(entry{ua: last.r.ua, idx: last.idx})
	}
	if len(items) > 0 && m.hit(f.DuplicateRate) {
		items = append(items, items[m.intN(len(items))])
		m.duplicates.Add(1)
	}
	if len(items) > 0 && m.hit(f.StaleRate) {
		// Try from a random record onwards: some have no older version.
		start := m.intN(len(items))
		for k := range items {
			if s, ok := m.staleCopy(items[(start+k)%len(items)]); ok {
				items = append(items, s)
				m.staled.Add(1)
				break
			}
		}
	}
	return items, next
}

func (m *Mock) serveCount(r *http.Request, _ Faults) (int, []byte) {
	w, err := parseWindow(r.URL.Query())
	if err != nil {
		return http.StatusBadRequest, errorBody(err.Error())
	}
	m.tenantOf(&w, r.URL.Query())
	return http.StatusOK, fmt.Appendf(nil, "{\"count\":%d}\n", m.count(w))
}

// serveOpenAPI serves the contract the API follows. Like /admin, it is
// subject neither to faults nor to the token.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Content-Length", strconv.Itoa(len(api.ERPOpenAPI)))
	_, _ = w.Write(api.ERPOpenAPI)
}

func (m *Mock) authorized(r *http.Request) bool {
	want := "Bearer " + m.token
	got := r.Header.Get("Authorization")
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// write sends a JSON answer and counts its status.
func (m *Mock) write(w http.ResponseWriter, code int, body []byte) {
	m.byStatus[code].Add(1)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// tooMany answers code (429 or 503) with Retry-After.
func (m *Mock) tooMany(w http.ResponseWriter, code, retryAfter int, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(max(retryAfter, 1)))
	m.write(w, code, errorBody(msg))
}

// truncate answers 200 declaring the whole body, sends half of it and
// closes the connection.
func (m *Mock) truncate(w http.ResponseWriter, body []byte) {
	m.truncated.Add(1)
	m.byStatus[http.StatusOK].Add(1)
	half := body[:len(body)/2]
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (HTTP/2). Writing less than the declared
		// Content-Length makes net/http drop the connection or stream.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(half)
		return
	}
	defer conn.Close()
	fmt.Fprintf(rw, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", len(body))
	_, _ = rw.Write(half)
	_ = rw.Flush()
}

// drop closes the connection of a request whose context ended (the client
// gave up, or the server is shutting down) without an answer: returning
// from the handler would send an empty 200.
func drop(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
}

func errorBody(msg string) []byte {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return append(b, '\n')
}

func (m *Mock) getFaults(w http.ResponseWriter, _ *http.Request) {
	writeAdmin(w, http.StatusOK, m.Faults())
}

// putFaults replaces the faults (PUT) or changes only the fields given
// (PATCH).
func (m *Mock) putFaults(w http.ResponseWriter, r *http.Request) {
	var f Faults
	if r.Method == http.MethodPatch {
		f = m.Faults()
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&f); err != nil {
		writeAdmin(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	f.InvalidRate = m.invalidRate
	if err := f.Validate(); err != nil {
		writeAdmin(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	m.SetFaults(f)
	writeAdmin(w, http.StatusOK, m.Faults())
}

func (m *Mock) postChange(w http.ResponseWriter, r *http.Request) {
	postRandom(w, r, "changed", m.Change)
}

// postRandom runs do on ?n=K random records (default 1) and answers
// {key: [erp_ids]}.
func postRandom(w http.ResponseWriter, r *http.Request, key string, do func(n int) []string) {
	n := 1
	if s := r.URL.Query().Get("n"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			writeAdmin(w, http.StatusBadRequest, map[string]string{"error": "n: want an integer >= 0"})
			return
		}
		n = v
	}
	ids := do(n)
	if ids == nil {
		ids = []string{}
	}
	writeAdmin(w, http.StatusOK, map[string][]string{key: ids})
}

// postDelete deletes the records ?id=...&id=... or, without ids, ?n=K
// random ones (default 1), and answers {"deleted": [erp_ids]}.
func (m *Mock) postDelete(w http.ResponseWriter, r *http.Request) {
	ids := r.URL.Query()["id"]
	if len(ids) > 0 {
		if err := m.DeleteIDs(ids); err != nil {
			writeAdmin(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		writeAdmin(w, http.StatusOK, map[string][]string{"deleted": ids})
		return
	}
	postRandom(w, r, "deleted", m.Delete)
}

// postRecreate brings the deleted records ?id=...&id=... back, and
// answers {"recreated": [erp_ids]}: one version higher (Recreate), with
// as=new at version 1 (RecreateNew), with as=was unchanged (Restore).
func (m *Mock) postRecreate(w http.ResponseWriter, r *http.Request) {
	ids := r.URL.Query()["id"]
	if len(ids) == 0 {
		writeAdmin(w, http.StatusBadRequest, map[string]string{"error": "id: want at least one erp_id"})
		return
	}
	how := map[string]func([]string) error{"": m.Recreate, "next": m.Recreate, "new": m.RecreateNew, "was": m.Restore}[r.URL.Query().Get("as")]
	if how == nil {
		writeAdmin(w, http.StatusBadRequest, map[string]string{"error": "as: want next (the default), new or was"})
		return
	}
	if err := how(ids); err != nil {
		writeAdmin(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	writeAdmin(w, http.StatusOK, map[string][]string{"recreated": ids})
}

// postChangeLines changes the lines of the orders ?id=...&id=... at their
// version (ChangeLines), and answers {"changed": [erp_ids]}.
func (m *Mock) postChangeLines(w http.ResponseWriter, r *http.Request) {
	ids := r.URL.Query()["id"]
	if len(ids) == 0 {
		writeAdmin(w, http.StatusBadRequest, map[string]string{"error": "id: want at least one erp_id"})
		return
	}
	if err := m.ChangeLines(ids); err != nil {
		writeAdmin(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	writeAdmin(w, http.StatusOK, map[string][]string{"changed": ids})
}

// getTruth streams Truth as a JSON array, in the API's record format.
func (m *Mock) getTruth(w http.ResponseWriter, _ *http.Request) {
	recs := m.snapshot()
	w.Header().Set("Content-Type", "application/json")
	bw := bufio.NewWriterSize(w, 64<<10)
	buf := make([]byte, 0, 512)
	sep := byte('[')
	for i := range recs {
		if recs[i].invalid != flawNone || recs[i].deleted {
			continue
		}
		buf = append(append(buf[:0], sep), '\n')
		if _, err := bw.Write(m.appendItem(buf, int32(i), recs[i])); err != nil {
			return
		}
		sep = ','
	}
	if sep == '[' {
		_, _ = bw.WriteString("[")
	}
	_, _ = bw.WriteString("\n]\n")
	_ = bw.Flush()
}

func (m *Mock) getStats(w http.ResponseWriter, _ *http.Request) {
	writeAdmin(w, http.StatusOK, m.Stats())
}

func writeAdmin(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code, b = http.StatusInternalServerError, errorBody(err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}
