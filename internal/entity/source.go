package entity

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Job returns the job of src, one of e's sources, when base is the
// entity's job (its name; the built-in memberships entity's is --job):
// base itself for an entity of one source, else base followed by the
// values src sets, in key order, each after a "/" and escaped by
// JobPart, so that sources that set different values have different
// jobs (customers/1000, customers/A%2FB).
func (e *Entity) Job(base string, src Source) string {
	if len(e.Sources) < 2 {
		return base
	}
	if len(src.Set) == 0 {
		return base + "/" + JobPart(src.Name)
	}
	var b strings.Builder
	b.WriteString(base)
	for _, k := range e.Key { // in key order: stable whatever the map's order
		if v, ok := src.Set[k]; ok {
			b.WriteByte('/')
			b.WriteString(JobPart(v))
		}
	}
	return b.String()
}

// JobPart escapes v as one part of a job name: "%" as %25, "/" (the
// separator of the parts) as %2F, a control character and a space that
// ends v (which the database ignores at the end of a name) as %XX. Any
// other text, the values of most sources, stays as it is: the job names
// of those sources are the ones they always had.
func JobPart(v string) string {
	end := len(strings.TrimRight(v, " "))
	if end == len(v) && !strings.ContainsFunc(v, func(r rune) bool { return r == '%' || r == '/' || r < ' ' || r == 0x7f }) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '%' || c == '/' || c < ' ' || c == 0x7f || i >= end:
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// MaxJob is the longest job name, in bytes, that erpsync keeps (in the
// checkpoint, the run history and the quarantine).
const MaxJob = 150

// RESTPath returns the records path that src is read at over REST: the
// entity's rest.path when it gives one, else the source's name, a bare
// name being a resource of the erpsync ERP API (/api/v1/NAME).
func (e *Entity) RESTPath(src Source) string {
	if e.REST != nil && e.REST.Path != "" {
		return e.REST.Path
	}
	if strings.HasPrefix(src.Name, "/") {
		return src.Name
	}
	return "/api/v1/" + src.Name
}

// checkSources refuses an entity whose sources would read the same
// records or share a job: each source must read only its own records (its
// own records path or entity set, its own REST params, or, over OData, a
// $filter on its constants that the service checks online), and each
// source's job (its checkpoint, lock and history) must be its own also
// where the database compares names without case.
func (d *decoder) checkSources(e *Entity, f *File) {
	if !d.ok() || len(e.Sources) == 0 {
		return
	}
	odata := f.ERP.Kind == KindOData
	jobs := map[string]int{}
	for j, b := range e.Sources {
		at := &yaml.Node{Line: b.Line}
		if odata && b.Params != nil {
			d.fail(at, "source %s: params: only for erp.kind rest: an OData source that shares its entity set with another is filtered on the constants it sets", b.Name)
			return
		}
		job := e.Job(e.Name, b)
		if len(job) > MaxJob {
			d.fail(at, "source %s: its job %s is %d bytes, over the %d a job name may have: shorten the values it sets", b.Name, job, len(job), MaxJob)
			return
		}
		fold := strings.ToLower(job)
		if i, dup := jobs[fold]; dup {
			d.fail(at, "source %s: its job %s and the job %s of the source on line %d differ only in case, and the database keeps one checkpoint for both: read them as entities of their own tables",
				b.Name, job, e.Job(e.Name, e.Sources[i]), e.Sources[i].Line)
			return
		}
		jobs[fold] = j
		if odata {
			continue // the same entity set twice is filtered online on the constants
		}
		for _, a := range e.Sources[:j] {
			if e.RESTPath(a) == e.RESTPath(b) && maps.Equal(a.Params, b.Params) {
				d.fail(at, "sources %s (line %d) and %s (line %d) would read the same records: both read %s with %s: give each its own path, or params: {name: value} that select its own records",
					a.Name, a.Line, b.Name, b.Line, e.RESTPath(a), paramsText(b.Params))
				return
			}
		}
	}
}

// paramsText is params for messages: "the params k=v, ..." or "no params".
func paramsText(params map[string]string) string {
	if len(params) == 0 {
		return "no params"
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		kv = append(kv, k+"="+params[k])
	}
	return "the params " + strings.Join(kv, ", ")
}
