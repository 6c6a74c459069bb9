package cli

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/erpsync/erpsync/internal/erp"
)

// restSettings shape the REST source: where a homegrown API keeps what the
// spec's API serves (see docs/connect-rest.md).
type restSettings struct {
	Path        string
	CountPath   string
	Params      string
	Paging      string
	RecordsPath string
	CursorPath  string
	CountField  string
}

func (r *restSettings) flags(fs *flag.FlagSet) {
	d := erp.DefaultShape()
	fs.StringVar(&r.Path, "erp-path", d.Path, "REST: path of the records endpoint")
	fs.StringVar(&r.CountPath, "erp-count-path", d.CountPath, "REST: path of the count endpoint (empty: none, progress without a total)")
	fs.StringVar(&r.Params, "erp-param", "", "REST: query parameter names, like since=changedAfter,until=changedBefore,cursor=page_token,limit=limit,offset=offset (default: updated_since, updated_until, cursor, limit, offset)")
	fs.StringVar(&r.Paging, "erp-rest-paging", d.Paging.String(), "REST: cursor (the cursor each page returns) or offset (offset+limit until a short page; skips a record whenever an earlier one changes mid-sync)")
	fs.StringVar(&r.RecordsPath, "erp-records-path", d.Records.String(), "REST: JSON path of a page's records array, like result.items (. for the body itself)")
	fs.StringVar(&r.CursorPath, "erp-cursor-path", d.Cursor.String(), "REST: JSON path of a page's next cursor, like result.next (cursor paging)")
	fs.StringVar(&r.CountField, "erp-count-field", d.Count.String(), "REST: JSON path of the count in the count endpoint's body")
}

// value returns the setting of the flag name.
func (r *restSettings) value(name string) string {
	return map[string]string{
		"erp-path": r.Path, "erp-count-path": r.CountPath, "erp-param": r.Params, "erp-rest-paging": r.Paging,
		"erp-records-path": r.RecordsPath, "erp-cursor-path": r.CursorPath, "erp-count-field": r.CountField,
	}[name]
}

// shape is the erp.Shape the settings describe; nil when every setting
// is its default. A bad value, or a setting changed for a source kind
// other than rest, is a usage error naming its flag and variable.
func (r *restSettings) shape(kind string) (*erp.Shape, error) {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	var def restSettings
	def.flags(fs)
	if *r == def {
		return nil, nil
	}
	if kind != kindREST {
		var msg error
		fs.VisitAll(func(f *flag.Flag) {
			if v := r.value(f.Name); msg == nil && v != f.DefValue {
				msg = fmt.Errorf("--%s (%s) %q: only for --erp-kind %s", f.Name, envName(f.Name), v, kindREST)
			}
		})
		return nil, usageError{msg}
	}
	var (
		s        erp.Shape
		firstErr error // one line: the first bad setting
	)
	bad := func(name, value string, err error) {
		if firstErr == nil {
			firstErr = usageError{fmt.Errorf("--%s (%s) %q: %w", name, envName(name), value, err)}
		}
	}
	endpoint := func(name, value string, empty bool) string {
		switch {
		case value == "" && empty:
		case !strings.HasPrefix(value, "/") || strings.ContainsAny(value, "?# "):
			bad(name, value, errors.New("want a path like /v2/members/changes, without a query"))
		}
		return value
	}
	path := func(name, value string) erp.JSONPath {
		p, err := erp.ParseJSONPath(value)
		if err != nil {
			bad(name, value, err)
		}
		return p
	}
	var err error
	s.Path = endpoint("erp-path", r.Path, false)
	s.CountPath = endpoint("erp-count-path", r.CountPath, true)
	if s.Params, err = erp.ParseParams(r.Params); err != nil {
		bad("erp-param", r.Params, err)
	}
	if s.Paging, err = erp.ParsePaging(r.Paging); err != nil {
		bad("erp-rest-paging", r.Paging, err)
	}
	s.Records = path("erp-records-path", r.RecordsPath)
	s.Cursor = path("erp-cursor-path", r.CursorPath)
	s.Count = path("erp-count-field", r.CountField)
	if firstErr == nil && s.Paging == erp.PagingCursor && s.Records != nil && s.Cursor != nil {
		if s.Records.Overlaps(s.Cursor) {
			bad("erp-cursor-path", r.CursorPath, fmt.Errorf("inside or around --erp-records-path %s", s.Records))
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return &s, nil
}
