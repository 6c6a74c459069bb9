package discover

import (
	"encoding/xml"
	"strings"
)

// document is the part of a CSDL XML document ($metadata, OData v4) that
// discover reads. encoding/xml matches the elements by their local names,
// so the edmx and edm namespaces need no prefix here.
type document struct {
	XMLName xml.Name `xml:"Edmx"`
	Refs    []struct {
		Includes []struct {
			Namespace string `xml:",attr"`
			Alias     string `xml:",attr"`
		} `xml:"Include"`
	} `xml:"Reference"`
	Schemas []schema `xml:"DataServices>Schema"`
}

type schema struct {
	Namespace    string          `xml:",attr"`
	Alias        string          `xml:",attr"`
	EntityTypes  []structured    `xml:"EntityType"`
	ComplexTypes []structured    `xml:"ComplexType"`
	EnumTypes    []enumType      `xml:"EnumType"`
	TypeDefs     []typeDef       `xml:"TypeDefinition"`
	Containers   []container     `xml:"EntityContainer"`
	Annotations  []annotationSet `xml:"Annotations"`
}

// structured is an EntityType or a ComplexType.
type structured struct {
	Name     string `xml:",attr"`
	BaseType string `xml:",attr"`
	Abstract bool   `xml:",attr"`
	Key      []struct {
		Name  string `xml:",attr"`
		Alias string `xml:",attr"`
	} `xml:"Key>PropertyRef"`
	Props []property   `xml:"Property"`
	Navs  []navigation `xml:"NavigationProperty"`
}

// navigation is a NavigationProperty of a structured type.
type navigation struct {
	Name string `xml:",attr"`
	Type string `xml:",attr"`
	// Relationship and ToRole are V2's: the association and its end the
	// property leads to (fromV2 sets Type from them).
	Relationship string `xml:",attr"`
	ToRole       string `xml:",attr"`
	// up, in a V2 document, are the target's properties that hold the
	// record's key (fromV2).
	up             []string
	Partner        string `xml:",attr"`
	ContainsTarget bool   `xml:",attr"`
	OnDelete       struct {
		Action string `xml:",attr"`
	} `xml:"OnDelete"`
	// Constraints name the properties of this type that hold a property
	// of the target (a line's copy of its parent's key).
	Constraints []struct {
		Property string `xml:",attr"`
	} `xml:"ReferentialConstraint"`
}

type property struct {
	Name        string       `xml:",attr"`
	Type        string       `xml:",attr"`
	MaxLength   string       `xml:",attr"`
	Precision   string       `xml:",attr"`
	Scale       string       `xml:",attr"`
	Nullable    string       `xml:",attr"`
	Annotations []annotation `xml:"Annotation"`
	// SAP's V2 annotations (sap:label, sap:display-format, sap:filterable).
	Label         string `xml:"label,attr"`
	DisplayFormat string `xml:"display-format,attr"`
	Filterable    string `xml:"filterable,attr"`
}

type enumType struct {
	Name    string `xml:",attr"`
	IsFlags bool   `xml:",attr"`
	Members []struct {
		Name string `xml:",attr"`
	} `xml:"Member"`
}

type typeDef struct {
	Name           string `xml:",attr"`
	UnderlyingType string `xml:",attr"`
	MaxLength      string `xml:",attr"`
	Precision      string `xml:",attr"`
	Scale          string `xml:",attr"`
}

type container struct {
	Name string `xml:",attr"`
	Sets []struct {
		Name        string       `xml:",attr"`
		EntityType  string       `xml:",attr"`
		Annotations []annotation `xml:"Annotation"`
	} `xml:"EntitySet"`
}

// annotationSet is an Annotations element: annotations of the element its
// Target names ("ns.Type/Property", "ns.Container/Set").
type annotationSet struct {
	Target      string       `xml:",attr"`
	Annotations []annotation `xml:"Annotation"`
}

type annotation struct {
	Term  string   `xml:",attr"`
	Bool  string   `xml:",attr"`
	Paths []string `xml:"Collection>PropertyPath"`
}

// coreNamespace is the namespace of the OData Core vocabulary.
const coreNamespace = "Org.OData.Core.V1"

// model is a document with its qualified names resolved: what Config
// reads.
type model struct {
	doc      *document
	entities map[string]*structured // by qualified name, under namespace and alias
	complex  map[string]*structured
	enums    map[string]*enumType
	typeDefs map[string]*typeDef
	// annotations are the external annotations, by target with the
	// namespace (not the alias) of its qualified name.
	annotations map[string][]annotation
	// core are the names the Core vocabulary goes by: its namespace and
	// the aliases the document's references give it.
	core []string
	// exposed are the entity types that have an entity set.
	exposed map[*structured]bool
}

func newModel(doc *document) *model {
	m := &model{doc: doc,
		entities: map[string]*structured{}, complex: map[string]*structured{},
		enums: map[string]*enumType{}, typeDefs: map[string]*typeDef{},
		annotations: map[string][]annotation{}, core: []string{coreNamespace},
	}
	for _, r := range doc.Refs {
		for _, inc := range r.Includes {
			if inc.Namespace == coreNamespace && inc.Alias != "" {
				m.core = append(m.core, inc.Alias)
			}
		}
	}
	for si := range doc.Schemas {
		sc := &doc.Schemas[si]
		for _, prefix := range []string{sc.Namespace, sc.Alias} {
			if prefix == "" {
				continue
			}
			for i := range sc.EntityTypes {
				m.entities[prefix+"."+sc.EntityTypes[i].Name] = &sc.EntityTypes[i]
			}
			for i := range sc.ComplexTypes {
				m.complex[prefix+"."+sc.ComplexTypes[i].Name] = &sc.ComplexTypes[i]
			}
			for i := range sc.EnumTypes {
				m.enums[prefix+"."+sc.EnumTypes[i].Name] = &sc.EnumTypes[i]
			}
			for i := range sc.TypeDefs {
				m.typeDefs[prefix+"."+sc.TypeDefs[i].Name] = &sc.TypeDefs[i]
			}
		}
	}
	m.exposed = map[*structured]bool{}
	for _, sc := range doc.Schemas {
		for _, c := range sc.Containers {
			for _, set := range c.Sets {
				if t, ok := m.entities[set.EntityType]; ok {
					m.exposed[t] = true
				}
			}
		}
	}
	for _, sc := range doc.Schemas {
		for _, a := range sc.Annotations {
			t := m.canonical(a.Target)
			m.annotations[t] = append(m.annotations[t], a.Annotations...)
		}
	}
	return m
}

// canonical writes a target's qualified name with its schema's namespace
// instead of its alias.
func (m *model) canonical(target string) string {
	for _, sc := range m.doc.Schemas {
		if sc.Alias != "" && strings.HasPrefix(target, sc.Alias+".") {
			return sc.Namespace + target[len(sc.Alias):]
		}
	}
	return target
}

// isCore reports whether term is the Core vocabulary's term name.
func (m *model) isCore(term, name string) bool {
	for _, c := range m.core {
		if term == c+"."+name {
			return true
		}
	}
	return false
}

// hasTrue reports whether one of as is the Core term name with a value
// that is not false (a tagging term: no value means true).
func (m *model) hasTrue(as []annotation, name string) bool {
	for _, a := range as {
		if m.isCore(a.Term, name) && a.Bool != "false" {
			return true
		}
	}
	return false
}

// paths returns the property paths of the Core term name in as.
func (m *model) paths(as []annotation, name string) []string {
	var out []string
	for _, a := range as {
		if m.isCore(a.Term, name) {
			out = append(out, a.Paths...)
		}
	}
	return out
}

// hierarchy returns t and its base types, the most basic first; a base
// type that is missing or repeats ends it.
func hierarchy(types map[string]*structured, t *structured) []*structured {
	chain := []*structured{t}
	for base := t.BaseType; base != "" && len(chain) < 16; {
		b, ok := types[base]
		if !ok {
			break
		}
		for _, seen := range chain {
			if seen == b {
				base = ""
			}
		}
		if base == "" {
			break
		}
		chain = append(chain, b)
		base = b.BaseType
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return chain
}

// qualifiedName returns the namespace-qualified name of the structured
// type t of the schemas, for annotation targets.
func (m *model) qualifiedName(t *structured) string {
	for si := range m.doc.Schemas {
		sc := &m.doc.Schemas[si]
		for i := range sc.EntityTypes {
			if &sc.EntityTypes[i] == t {
				return sc.Namespace + "." + t.Name
			}
		}
		for i := range sc.ComplexTypes {
			if &sc.ComplexTypes[i] == t {
				return sc.Namespace + "." + t.Name
			}
		}
	}
	return t.Name
}
