package erpmock

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// Face is the API the mock serves its records under.
type Face string

const (
	// FaceSpec is the API of the contract (api.ERPOpenAPI) under /api/v1/: the
	// default.
	FaceSpec Face = ""
	// FaceV2 is a homegrown API shaped differently, for sources configured
	// without code. GET /v2/members/changes takes changedAfter (inclusive)
	// and changedBefore (exclusive) RFC 3339 bounds, limit (1..1000,
	// default 100) and either offset (rows to skip) or page_token (the
	// next of the previous page), and answers
	//
	//	{"result":{"items":[...],"next":"..."|null,"total":N,"hasMore":bool}}
	//
	// with items {"id","customer","plan","state","from","to","rev",
	// "modified"}; state is active, paused, cancelled or expired.
	// GET /v2/members/count answers {"result":{"total":N}}. The records,
	// their order, the faults, Truth and /admin are those of FaceSpec.
	FaceV2 Face = "v2"
)

// String returns the face's name as the --face flag spells it.
func (f Face) String() string {
	if f == FaceSpec {
		return "spec"
	}
	return string(f)
}

// ParseFace reads "spec" (or "") and "v2".
func ParseFace(s string) (Face, error) {
	switch s {
	case "", "spec":
		return FaceSpec, nil
	case string(FaceV2):
		return FaceV2, nil
	}
	return FaceSpec, fmt.Errorf("face %q: want spec or v2", s)
}

// v2Statuses are the state values of FaceV2, in the order of statuses.
var v2Statuses = [...]string{"active", "paused", "cancelled", "expired"}

// v2DefaultLimit is the page size of FaceV2 without a limit.
const v2DefaultLimit = 100

// parseV2Window reads changedAfter and changedBefore.
func parseV2Window(v url.Values) (window, error) {
	return parseBounds(v, "changedAfter", "changedBefore")
}

// parseV2PageQuery reads the query of GET /v2/members/changes.
func parseV2PageQuery(v url.Values) (pageQuery, error) {
	w, err := parseV2Window(v)
	if err != nil {
		return pageQuery{}, err
	}
	q := pageQuery{window: w, limit: v2DefaultLimit}
	if q.limit, err = parseLimit(v, v2DefaultLimit); err != nil {
		return q, err
	}
	tok, hasTok, err := single(v, "page_token")
	if err != nil {
		return q, err
	}
	off, hasOff, err := single(v, "offset")
	if err != nil {
		return q, err
	}
	switch {
	case hasTok && hasOff:
		return q, fmt.Errorf("page_token and offset: give one")
	case hasOff:
		n, err := strconv.Atoi(off)
		if err != nil || n < 0 {
			return q, fmt.Errorf("offset %q: want an integer >= 0", off)
		}
		q.offset = n
	case hasTok && tok != "":
		e, err := decodeCursor(tok)
		if err != nil {
			return q, err
		}
		q.after = &e
	}
	return q, nil
}

func (m *Mock) serveV2Page(r *http.Request, f Faults) (int, []byte) {
	q, err := parseV2PageQuery(r.URL.Query())
	if err != nil {
		return http.StatusBadRequest, errorBody(err.Error())
	}
	items, next := m.pageItems(q, f)
	total := m.count(q.window)
	format := &v2Format
	if m.noRev {
		format = &v2NoRevFormat
	}
	b := m.appendItems(append(make([]byte, 0, 96+200*len(items)), `{"result":{"items":[`...), format, items)
	b = appendStringOrNull(append(b, `],"next":`...), next)
	b = append(b, `,"total":`...)
	b = strconv.AppendInt(b, total, 10)
	b = append(b, `,"hasMore":`...)
	b = strconv.AppendBool(b, next != "")
	return http.StatusOK, append(b, "}}\n"...)
}

func (m *Mock) serveV2Count(r *http.Request, _ Faults) (int, []byte) {
	w, err := parseV2Window(r.URL.Query())
	if err != nil {
		return http.StatusBadRequest, errorBody(err.Error())
	}
	return http.StatusOK, fmt.Appendf(nil, "{\"result\":{\"total\":%d}}\n", m.count(w))
}

// v2Format is the item format of FaceV2, with rev.
var v2Format = itemFormat{
	open: `{"id":"`, member: `,"customer":"`, product: `,"plan":"`, status: `","state":"`,
	starts: `","from":"`, ends: `","to":`, version: `,"rev":`, updated: `,"modified":"`,
	statuses: &v2Statuses, pending: "pending",
}

// v2NoRevFormat is v2Format without rev.
var v2NoRevFormat = func() itemFormat { f := v2Format; f.version = ""; return f }()
