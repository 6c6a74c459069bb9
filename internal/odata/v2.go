package odata

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/erpsync/erpsync/internal/entity"
	"github.com/erpsync/erpsync/internal/erp"
)

// detect returns whether the source reads OData V2: Version2 always,
// Version4 never, VersionAuto as the service's $metadata declares (read
// once; a service without $metadata is V4). Under V2 the types $metadata
// declares are kept for the literals and values of the reader. A read of
// $metadata that fails otherwise than with 404 everywhere fails the call
// and is tried again by the next.
func (s *Source) detect(ctx context.Context) (bool, error) {
	if s.version == Version4 {
		return false, nil
	}
	s.mu.Lock()
	done, v2 := s.meta != nil || s.detectedV4, s.meta != nil
	s.mu.Unlock()
	if done {
		return v2, nil
	}
	var doc edmxV2
	_, err := s.readMetadata(ctx, &doc)
	switch {
	case err == nil:
		v2 = s.version == Version2 || doc.isV2()
	case errors.Is(err, erp.ErrUnauthorized):
		return false, err // said as a page's refusal is
	case notFound(err) || errors.Is(err, errNotCSDL):
		// No $metadata anywhere (or a proxy's page in its place, which
		// the first page's request then names with what answered): V4
		// unless the configuration says V2, then read with the types of
		// the values alone.
		v2 = s.version == Version2
	default:
		return false, fmt.Errorf("odata: read $metadata to learn the OData version (give the version to skip it): %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v2 {
		s.meta = s.metaV2(&doc)
	} else {
		s.detectedV4 = true
	}
	return v2, nil
}

// v2 reports whether the source reads V2, once detect has said so.
func (s *Source) v2() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.meta != nil
}

// edmType returns the Edm type $metadata declares for the top-level
// property prop of the entity set under V2; "" when not known.
func (s *Source) edmType(prop string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.meta == nil {
		return ""
	}
	return s.meta.props[prop].Type
}

// timeLit is the $filter literal of t for updated_at: V4's bare
// Edm.DateTimeOffset, or under V2 datetimeoffset'...' (datetime'...',
// without a zone, when the property is an Edm.DateTime: UTC by SAP's
// convention).
func (s *Source) timeLit(t time.Time) string {
	if !s.v2() {
		return timeLiteral(t)
	}
	return v2TimeLiteral(s.edmType(s.modified), t)
}

func v2TimeLiteral(edm string, t time.Time) string {
	if edm == "Edm.DateTime" {
		return "datetime'" + t.UTC().Format("2006-01-02T15:04:05.999999999") + "'"
	}
	return "datetimeoffset'" + timeLiteral(t) + "'"
}

// literalV2 writes the key text v of a key property of kind as a V2
// $filter literal: guid'...' for an Edm.Guid, 12L for an Edm.Int64, 1.5M
// for an Edm.Decimal, datetime'...' for a date, datetimeoffset'...' (or
// datetime'...') for a date-time, strings quoted, the rest bare.
func (s *Source) literalV2(prop string, kind entity.Kind, v string) string {
	edm := s.edmType(prop)
	switch {
	case edm == "Edm.Guid":
		return "guid'" + v + "'"
	case kind == entity.String:
		return stringLiteral(v)
	case kind == entity.Int64:
		return v + "L"
	case kind == entity.Decimal:
		return v + "M"
	case kind == entity.Date:
		return "datetime'" + v + "T00:00:00'"
	case kind == entity.DateTime:
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return v2TimeLiteral(edm, t)
		}
	}
	return v
}

// queryV2 returns the $select and $expand of a V2 page: the lines'
// properties are selected as Nav/Property, the navigation properties
// expanded.
func (s *Source) queryV2() (sel, expand string) {
	sel = s.selected
	var navs []string
	if s.schema != nil {
		for _, ch := range s.schema.Children() {
			if len(ch.From) != 1 {
				continue
			}
			navs = append(navs, ch.From[0])
			for _, p := range ch.Properties {
				sel += "," + ch.From[0] + "/" + p
			}
		}
	}
	return sel, strings.Join(navs, ",")
}

// kindsOf returns the column kinds of the values the V2 reader converts,
// by their property path ('/'-separated): those of the entity, and of
// each child by its navigation property.
func kindsOf(sc *erp.Schema, m *erp.Mapping) (map[string]entity.Kind, map[string]map[string]entity.Kind) {
	top, children := map[string]entity.Kind{}, map[string]map[string]entity.Kind{}
	if sc == nil {
		for _, f := range []string{"starts_at", "ends_at", "updated_at"} {
			if p, ok := m.Property(f); ok {
				top[p] = entity.DateTime
			}
		}
		if p, ok := m.Property("version"); ok {
			top[p] = entity.Int64
		}
		return top, children
	}
	add := func(to map[string]entity.Kind, cols []entity.Column) {
		for _, c := range cols {
			from := c.From
			if len(from) == 0 {
				from = []string{c.Name}
			}
			to[strings.Join(from, "/")] = c.Type.Kind
		}
	}
	e := sc.Entity()
	add(top, e.Columns)
	if len(e.UpdatedAt) > 0 {
		top[strings.Join(e.UpdatedAt, "/")] = entity.DateTime
	}
	for _, ch := range e.Children {
		from := ch.From
		if len(from) == 0 {
			from = []string{ch.Name}
		}
		k := map[string]entity.Kind{}
		add(k, ch.Columns)
		children[strings.Join(from, "/")] = k
	}
	return top, children
}

// envelopeV2 is a V2 collection response: {"d":{"results":[...],
// "__next":"..."}}, or V1's {"d":[...]}.
type envelopeV2 struct {
	results []json.RawMessage
	next    string
}

func (env *envelopeV2) decode(body []byte) error {
	var outer struct {
		D json.RawMessage `json:"d"`
	}
	if err := json.Unmarshal(body, &outer); err != nil {
		return fmt.Errorf("decode page: %w", err)
	}
	d := bytes.TrimSpace(outer.D)
	if len(d) > 0 && d[0] == '[' {
		return json.Unmarshal(d, &env.results)
	}
	var in struct {
		Results *[]json.RawMessage `json:"results"`
		Next    string             `json:"__next"`
	}
	if len(d) == 0 || json.Unmarshal(d, &in) != nil || in.Results == nil {
		return errors.New(`decode page: no "d" with a "results" array (OData V2 JSON)`)
	}
	env.results, env.next = *in.Results, in.Next
	return nil
}

// getV2 GETs one V2 page u (with header) and returns its items, each made
// whole and in the shape the decoders read (see itemV2), its __next and
// when it was served.
func (s *Source) getV2(ctx context.Context, u string, header http.Header) (*[]json.RawMessage, string, time.Time, error) {
	var env envelopeV2
	var served time.Time
	err := s.g.GetWith(ctx, erp.EndpointPage, u, header, func(h http.Header, body []byte) error {
		served = erp.ServedAt(h)
		return env.decode(body)
	})
	if err != nil {
		return nil, "", served, err
	}
	for i, raw := range env.results {
		if env.results[i], err = s.itemV2(ctx, u, header, raw); err != nil {
			return nil, "", served, err
		}
	}
	return &env.results, env.next, served, nil
}

// itemV2 turns the V2 item raw, which request u served, into the item the
// decoders read: each child's expanded collection {"results":[...]} an
// array, its __next followed to its end (resolved against the request
// that served it, with the same client and headers); __metadata and
// unexpanded navigation properties ({"__deferred":...}) left out; values
// of date, datetime and Edm.Time properties written as V4 writes them.
// A request that fails fails the page.
func (s *Source) itemV2(ctx context.Context, u string, header http.Header, raw json.RawMessage) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return raw, nil // not an object: the decoder says so
	}
	s.mu.Lock()
	meta := s.meta
	s.mu.Unlock()
	for _, n := range s.navs {
		v := bytes.TrimSpace(obj[n.prop])
		var lines []json.RawMessage
		switch {
		case len(v) > 0 && v[0] == '[':
			if json.Unmarshal(v, &lines) != nil {
				continue
			}
		case len(v) > 0 && v[0] == '{':
			var coll struct {
				Results *[]json.RawMessage `json:"results"`
				Next    string             `json:"__next"`
			}
			if json.Unmarshal(v, &coll) != nil || coll.Results == nil {
				continue // deferred, not expanded: the decoder says what is wrong
			}
			lines = *coll.Results
			if coll.Next != "" {
				more, err := s.followV2(ctx, u, header, n.prop, coll.Next)
				if err != nil {
					return nil, err
				}
				lines = append(lines, more...)
			}
		default:
			continue
		}
		for i := range lines {
			lines[i] = normalizeV2(lines[i], s.childKinds[n.prop], meta.children[n.prop])
		}
		b, err := marshal(lines)
		if err != nil {
			return nil, fmt.Errorf("odata: join the lines of %s: %w", n.prop, err)
		}
		obj[n.prop] = b
	}
	normalizeObject(obj, "", s.kinds, meta.props)
	b, err := marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("odata: rewrite a V2 item: %w", err)
	}
	return b, nil
}

// followV2 GETs the __next link of the collection prop, which request u
// served, and the links after it, to the end: the lines they hold.
func (s *Source) followV2(ctx context.Context, u string, header http.Header, prop, link string) ([]json.RawMessage, error) {
	var lines []json.RawMessage
	for n := 0; link != ""; n++ {
		if n == maxFollows {
			return nil, fmt.Errorf("odata: %s's __next followed %d times (the last: %s): the server sends neither the lines nor their end; the pass stops",
				prop, n, truncate([]byte(link), 120))
		}
		ref, err := resolve(u, link)
		if err != nil {
			return nil, err
		}
		var env envelopeV2
		if err := s.g.GetWith(ctx, erp.EndpointPage, ref, header, func(_ http.Header, body []byte) error { return env.decode(body) }); err != nil {
			return nil, fmt.Errorf("odata: follow %s's __next: %w", prop, err)
		}
		lines = append(lines, env.results...)
		u, link = ref, env.next
	}
	return lines, nil
}

// normalizeV2 is normalizeObject of one JSON object; anything else is
// returned as it is.
func normalizeV2(raw json.RawMessage, kinds map[string]entity.Kind, props map[string]propertyV2) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return raw
	}
	normalizeObject(obj, "", kinds, props)
	if b, err := marshal(obj); err == nil {
		return b
	}
	return raw
}

// normalizeObject rewrites the V2 object obj at path prefix in place:
// __metadata and {"__deferred":...} members left out, the values of the
// properties kinds names converted (convertV2), nested objects on the
// way to one rewritten the same.
func normalizeObject(obj map[string]json.RawMessage, prefix string, kinds map[string]entity.Kind, props map[string]propertyV2) {
	delete(obj, "__metadata")
	for name, v := range obj {
		path := prefix + name
		if kind, ok := kinds[path]; ok {
			obj[name] = convertV2(v, kind, props[path])
			continue
		}
		if len(v) == 0 || v[0] != '{' {
			continue
		}
		if deferred(v) {
			delete(obj, name)
			continue
		}
		for k := range kinds {
			if strings.HasPrefix(k, path+"/") {
				obj[name] = normalizeV2(v, subKinds(kinds, path+"/"), nil)
				break
			}
		}
	}
}

// subKinds returns the kinds under prefix, without it.
func subKinds(kinds map[string]entity.Kind, prefix string) map[string]entity.Kind {
	out := map[string]entity.Kind{}
	for k, v := range kinds {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			out[rest] = v
		}
	}
	return out
}

var (
	// v2Date is the JSON text of a V2 Edm.DateTime or Edm.DateTimeOffset:
	// milliseconds since 1970 in UTC, and an offset in minutes (+0000)
	// that does not move the instant.
	v2Date = regexp.MustCompile(`^/Date\((-?[0-9]{1,15})([+-][0-9]{4})?\)/$`)
	// isoNoZone is an ISO date-time without a zone: an Edm.DateTime some
	// servers write so, UTC by SAP's convention.
	isoNoZone = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?$`)
	// v2Integer is an integer as JSON writes one.
	v2Integer = regexp.MustCompile(`^-?(0|[1-9][0-9]{0,18})$`)
	// v2Time is an Edm.Time: an XML duration of a time of day.
	v2Time = regexp.MustCompile(`^PT(?:([0-9]{1,2})H)?(?:([0-9]{1,2})M)?(?:([0-9]{1,2})(\.[0-9]+)?S)?$`)
)

// convertV2 writes the V2 value v of a column of kind (of the property p
// as $metadata declares it; zero when not known) as V4 writes it: a
// /Date(ms)/ as an RFC 3339 date-time in UTC, or a date (V4's Edm.Date)
// when the instant is a midnight and the column is a date or the
// property is one (sap:display-format="Date"); an ISO date-time without a
// zone with Z; an Edm.Time PT12H30M15S as 12:30:15; an integer in a
// string (Edm.Int64) bare. Anything else is
// returned as it is, for the decoder to judge.
func convertV2(v json.RawMessage, kind entity.Kind, p propertyV2) json.RawMessage {
	if len(v) == 0 || v[0] != '"' {
		return v
	}
	var str string
	if json.Unmarshal(v, &str) != nil {
		return v
	}
	out := str
	switch kind {
	case entity.Date, entity.DateTime:
		var t time.Time
		if m := v2Date.FindStringSubmatch(str); m != nil {
			ms, err := strconv.ParseInt(m[1], 10, 64)
			if err != nil {
				return v
			}
			t = time.UnixMilli(ms).UTC()
		} else if isoNoZone.MatchString(str) {
			layout := "2006-01-02T15:04"
			if len(str) > len(layout) {
				layout = "2006-01-02T15:04:05.999999999"
			}
			var err error
			if t, err = time.Parse(layout, str); err != nil {
				return v
			}
		} else {
			return v
		}
		out = t.Format(time.RFC3339Nano)
		if (kind == entity.Date || strings.EqualFold(p.DisplayFormat, "Date")) && t.Equal(t.Truncate(24*time.Hour)) {
			out = t.Format(time.DateOnly)
		}
	case entity.Int32, entity.Int64:
		// An Edm.Int64 comes as a string: written bare, exactly, for the
		// membership's version, which wants a JSON integer.
		if !v2Integer.MatchString(str) {
			return v
		}
		return json.RawMessage(str)
	case entity.String, entity.Text:
		m := v2Time.FindStringSubmatch(str)
		if p.Type != "Edm.Time" || m == nil {
			return v
		}
		out = pad2(m[1]) + ":" + pad2(m[2]) + ":" + pad2(m[3]) + m[4]
	default:
		return v
	}
	b, err := marshal(out)
	if err != nil {
		return v
	}
	return b
}

// pad2 writes one or two digits as two ("" as 00).
func pad2(s string) string { return strings.Repeat("0", 2-len(s)) + s }

// deferred reports whether v is a navigation property not expanded:
// {"__deferred":{"uri":...}}.
func deferred(v json.RawMessage) bool {
	var obj map[string]json.RawMessage
	return json.Unmarshal(v, &obj) == nil && len(obj) == 1 && obj["__deferred"] != nil
}
