package odata

import (
	"context"
	"encoding/xml"
	"net/http"
	"regexp"
	"strings"
)

// guidShape is how an Edm.Guid value is written in JSON.
var guidShape = regexp.MustCompile(`^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$`)

// keyLiteral writes k as a $filter literal of the key property: unquoted
// when the property is an Edm.Guid, else a quoted string. Only a key that
// looks like a GUID makes the source read $metadata, once.
func (s *Source) keyLiteral(ctx context.Context, k string) string {
	if !guidShape.MatchString(k) {
		return stringLiteral(k)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keyType == "" {
		s.keyType = s.propertyType(ctx, s.key)
	}
	if s.keyType == "Edm.Guid" {
		return k
	}
	return stringLiteral(k)
}

// edmx is the part of a CSDL XML document ($metadata) the source reads.
type edmx struct {
	Schemas []struct {
		Namespace string `xml:",attr"`
		Alias     string `xml:",attr"`
		Types     []struct {
			Name     string `xml:",attr"`
			BaseType string `xml:",attr"`
			Props    []struct {
				Name string `xml:",attr"`
				Type string `xml:",attr"`
			} `xml:"Property"`
		} `xml:"EntityType"`
		Sets []struct {
			Name       string `xml:",attr"`
			EntityType string `xml:",attr"`
		} `xml:"EntityContainer>EntitySet"`
	} `xml:"DataServices>Schema"`
}

// propertyType returns the Edm type of prop in the entity set's type, from
// the service's $metadata: the document at the nearest path above the
// entity set URL that serves one. When the entity set is not found (a
// navigation path such as companies(...)/customers), the type every entity
// type with such a property agrees on. "unknown" when it cannot tell.
func (s *Source) propertyType(ctx context.Context, prop string) string {
	set := s.url[strings.LastIndexByte(s.url, '/')+1:]
	path := s.url
	for range 6 {
		i := strings.LastIndexByte(path, '/')
		if i <= len("https://") {
			break
		}
		path = path[:i]
		var doc edmx
		err := s.g.GetWith(ctx, "metadata", path+"/$metadata", http.Header{"Accept": {"application/xml"}}, func(_ http.Header, b []byte) error {
			return xml.Unmarshal(b, &doc)
		})
		if err != nil {
			continue
		}
		if t := doc.propertyType(set, prop); t != "" {
			return t
		}
		return "unknown"
	}
	return "unknown"
}

func (d *edmx) propertyType(set, prop string) string {
	type ref struct{ schema, typ int }
	refs := map[string]ref{}
	for si, sc := range d.Schemas {
		for ti, t := range sc.Types {
			refs[sc.Namespace+"."+t.Name] = ref{si, ti}
			if sc.Alias != "" {
				refs[sc.Alias+"."+t.Name] = ref{si, ti}
			}
		}
	}
	// The entity set's type, and its base types.
	for _, sc := range d.Schemas {
		for _, es := range sc.Sets {
			if es.Name != set {
				continue
			}
			for name, depth := es.EntityType, 0; name != "" && depth < 8; depth++ {
				r, ok := refs[name]
				if !ok {
					break
				}
				t := d.Schemas[r.schema].Types[r.typ]
				for _, p := range t.Props {
					if p.Name == prop {
						return p.Type
					}
				}
				name = t.BaseType
			}
		}
	}
	// Not an entity set: what every type with the property agrees on.
	found := ""
	for _, sc := range d.Schemas {
		for _, t := range sc.Types {
			for _, p := range t.Props {
				if p.Name == prop {
					if found != "" && found != p.Type {
						return ""
					}
					found = p.Type
				}
			}
		}
	}
	return found
}
