package odata

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/erpsync/erpsync/internal/erp"
)

// OData versions of a Source (Config.Version).
const (
	// VersionAuto reads $metadata once to choose: an EDMX document of
	// Version="1.0" whose DataServiceVersion is 1.0 to 3.0 is V2, any other
	// document V4; a service with no $metadata at any path above the
	// entity set is read as V4. The default of the command line.
	VersionAuto = "auto"
	// Version2 reads OData V2 (SAP Gateway, S/4HANA's published APIs).
	Version2 = "v2"
	// Version4 reads OData V4 without reading $metadata first. The
	// default of a Config.
	Version4 = "v4"
)

// edmxV2 is the part of an EDMX document ($metadata) the V2 reader reads:
// its versions, and the entity types, associations and entity sets of its
// schemas with SAP's annotations.
type edmxV2 struct {
	Version      string `xml:"Version,attr"`
	DataServices struct {
		DataServiceVersion string     `xml:"DataServiceVersion,attr"`
		Schemas            []schemaV2 `xml:"Schema"`
	} `xml:"DataServices"`
}

type schemaV2 struct {
	Namespace    string          `xml:",attr"`
	Alias        string          `xml:",attr"`
	Types        []entityTypeV2  `xml:"EntityType"`
	Complex      []entityTypeV2  `xml:"ComplexType"`
	Associations []associationV2 `xml:"Association"`
	Containers   []struct {
		Sets []struct {
			Name       string `xml:",attr"`
			EntityType string `xml:",attr"`
			Label      string `xml:"label,attr"`
		} `xml:"EntitySet"`
	} `xml:"EntityContainer"`
}

// entityTypeV2 is an EntityType (or a ComplexType, without key and
// navigation properties).
type entityTypeV2 struct {
	Name     string       `xml:",attr"`
	BaseType string       `xml:",attr"`
	Label    string       `xml:"label,attr"`
	KeyRefs  []propertyV2 `xml:"Key>PropertyRef"`
	Props    []propertyV2 `xml:"Property"`
	Navs     []struct {
		Name         string `xml:",attr"`
		Relationship string `xml:",attr"`
		FromRole     string `xml:",attr"`
		ToRole       string `xml:",attr"`
	} `xml:"NavigationProperty"`
}

// propertyV2 is a Property with the facets and sap: annotations that say
// how it is read and whether it can be a cursor.
type propertyV2 struct {
	Name          string `xml:",attr"`
	Type          string `xml:",attr"`
	Nullable      string `xml:",attr"`
	MaxLength     string `xml:",attr"`
	Precision     string `xml:",attr"`
	Scale         string `xml:",attr"`
	DisplayFormat string `xml:"display-format,attr"`
	Filterable    string `xml:"filterable,attr"`
	Label         string `xml:"label,attr"`
}

type associationV2 struct {
	Name string `xml:",attr"`
	Ends []struct {
		Role         string `xml:",attr"`
		Type         string `xml:",attr"`
		Multiplicity string `xml:",attr"`
	} `xml:"End"`
}

// isV2 reports whether the document declares OData V2 (or V1, V3: their
// JSON and literals are V2's): EDMX Version="1.0" and a DataServiceVersion
// of 1.0 to 3.0, or none.
func (d *edmxV2) isV2() bool {
	switch d.DataServices.DataServiceVersion {
	case "", "1.0", "2.0", "3.0":
		return d.Version == "1.0"
	}
	return false
}

// entityType finds the entity type of the qualified name ("Namespace.Name" or
// "Alias.Name").
func (d *edmxV2) entityType(name string) *entityTypeV2 {
	for si := range d.DataServices.Schemas {
		sc := &d.DataServices.Schemas[si]
		for ti := range sc.Types {
			t := &sc.Types[ti]
			if sc.qualifies(name, t.Name) {
				return t
			}
		}
	}
	return nil
}

// qualifies reports whether name is local qualified by the schema's
// namespace or its alias.
func (sc *schemaV2) qualifies(name, local string) bool {
	return name == sc.Namespace+"."+local || sc.Alias != "" && name == sc.Alias+"."+local
}

// association finds an association by its qualified name.
func (d *edmxV2) association(name string) *associationV2 {
	for si := range d.DataServices.Schemas {
		sc := &d.DataServices.Schemas[si]
		for ai := range sc.Associations {
			a := &sc.Associations[ai]
			if sc.qualifies(name, a.Name) {
				return a
			}
		}
	}
	return nil
}

// setType returns the entity type of the entity set named set; nil when
// the document has none.
func (d *edmxV2) setType(set string) *entityTypeV2 {
	for _, sc := range d.DataServices.Schemas {
		for _, c := range sc.Containers {
			for _, es := range c.Sets {
				if es.Name == set {
					return d.entityType(es.EntityType)
				}
			}
		}
	}
	return nil
}

// props returns the properties of t and its base types, by name.
func (d *edmxV2) props(t *entityTypeV2) map[string]propertyV2 {
	out := map[string]propertyV2{}
	for depth := 0; t != nil && depth < 8; depth++ {
		for _, p := range t.Props {
			if _, ok := out[p.Name]; !ok {
				out[p.Name] = p
			}
		}
		t = d.entityType(t.BaseType)
	}
	return out
}

// navTarget returns the entity type the navigation property nav of t
// leads to, with the multiplicity of that end; nil when the document
// does not tell.
func (d *edmxV2) navTarget(t *entityTypeV2, nav string) (*entityTypeV2, string) {
	for depth := 0; t != nil && depth < 8; depth++ {
		for _, n := range t.Navs {
			if n.Name != nav {
				continue
			}
			a := d.association(n.Relationship)
			if a == nil {
				return nil, ""
			}
			for _, e := range a.Ends {
				if e.Role == n.ToRole {
					return d.entityType(e.Type), e.Multiplicity
				}
			}
			return nil, ""
		}
		t = d.entityType(t.BaseType)
	}
	return nil, ""
}

// v2Meta is what the V2 reader keeps of $metadata: the types of the
// entity set's properties and of its children's.
type v2Meta struct {
	props    map[string]propertyV2            // the entity set's properties
	children map[string]map[string]propertyV2 // by navigation property
}

// errNotCSDL is a $metadata answered 200 with something else than a CSDL
// document.
var errNotCSDL = errors.New("the answer is no CSDL document (no edmx:DataServices/Schema)")

// readMetadata reads the service's $metadata: the document at the nearest
// path above the entity set URL that serves one, parsed into doc, and
// that path. An error naming $metadata when none did; a 404 (notFound)
// only when every path answered 404; a refusal of the credentials as it
// came.
func (s *Source) readMetadata(ctx context.Context, doc any) (string, error) {
	path := s.url
	var failed error // the nearest read that failed, a 404 only when all did
	for range 6 {
		i := strings.LastIndexByte(path, '/')
		if i <= len("https://") {
			break
		}
		path = path[:i]
		u := path + "/$metadata"
		if len(s.query) > 0 {
			u += "?" + encodeQuery(s.query)
		}
		ok := false
		err := s.g.GetWith(ctx, "metadata", u, http.Header{"Accept": {"application/xml"}}, func(_ http.Header, b []byte) error {
			if err := xml.Unmarshal(b, doc); err != nil {
				return err
			}
			ok = bytes.Contains(b, []byte("DataServices")) && bytes.Contains(b, []byte("Schema"))
			return nil
		})
		if err == nil && !ok {
			// A 200 that is no CSDL document: a proxy's error page, say.
			err = errNotCSDL
		}
		if err == nil {
			return path, nil
		}
		if errors.Is(err, erp.ErrUnauthorized) {
			return "", err // refused at one path, refused at all
		}
		err = fmt.Errorf("%s/$metadata: %w", path, err)
		if ctx.Err() != nil {
			return "", err
		}
		if failed == nil || notFound(failed) && !notFound(err) {
			failed = err
		}
	}
	if failed == nil {
		failed = fmt.Errorf("%s: no path to read $metadata from", s.url)
	}
	return "", failed
}

// metaV2 returns the V2 reader's view of doc for the source's entity set.
func (s *Source) metaV2(doc *edmxV2) *v2Meta {
	m := &v2Meta{props: map[string]propertyV2{}, children: map[string]map[string]propertyV2{}}
	t := doc.setType(s.url[strings.LastIndexByte(s.url, '/')+1:])
	if t == nil {
		return m
	}
	m.props = doc.props(t)
	for _, n := range s.navs {
		if ct, _ := doc.navTarget(t, n.prop); ct != nil {
			m.children[n.prop] = doc.props(ct)
		}
	}
	return m
}
