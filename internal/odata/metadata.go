package odata

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/erpsync/erpsync/internal/erp"
)

// guidShape is how an Edm.Guid value is written in JSON.
var guidShape = regexp.MustCompile(`^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$`)

// keyLiteral writes k as a $filter literal of the key property: unquoted
// when the property is an Edm.Guid, else a quoted string. Only a key that
// looks like a GUID needs the property's type: the source reads $metadata
// then, and keeps the type once a document has declared it. A read that
// fails (network, 5xx, a document it cannot read) is kept for nothing: the
// error is returned, and the next call reads $metadata again. No literal
// is guessed meanwhile: a GUID quoted, or a string bare, is a 400 from a
// server that knows the type.
func (s *Source) keyLiteral(ctx context.Context, prop, k string) (string, error) {
	if !guidShape.MatchString(k) {
		return stringLiteral(k), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keyTypes[prop] == "" {
		t, err := s.propertyType(ctx, prop)
		if err != nil {
			return "", err
		}
		s.keyTypes[prop] = t
	}
	if s.keyTypes[prop] == "Edm.Guid" {
		return k, nil
	}
	return stringLiteral(k), nil
}

// errNoProperty is a $metadata document that declares no such property.
var errNoProperty = errors.New("no such property")

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
// type with such a property agrees on. An error, naming $metadata, when no
// path served a document or the document does not tell.
func (s *Source) propertyType(ctx context.Context, prop string) (string, error) {
	set := s.url[strings.LastIndexByte(s.url, '/')+1:]
	var doc edmx
	path, err := s.readMetadata(ctx, &doc)
	if err != nil {
		return "", s.untyped(prop, err)
	}
	if t := doc.propertyType(set, prop); t != "" {
		return t, nil
	}
	return "", s.untyped(prop, fmt.Errorf("%s/$metadata declares no type of %s for %s: %w", path, prop, set, errNoProperty))
}

func notFound(err error) bool {
	var se *erp.StatusError
	return errors.As(err, &se) && se.Code == http.StatusNotFound
}

// untyped is the error of a page whose key literal waits for the key
// property's type.
func (s *Source) untyped(prop string, err error) error {
	return fmt.Errorf("odata: cannot tell whether %s is an Edm.Guid (written unquoted in $filter) or a string (quoted): %w; the next page reads $metadata again", prop, err)
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
