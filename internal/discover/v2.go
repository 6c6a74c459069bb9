package discover

import (
	"encoding/xml"
	"slices"
	"strings"
)

// documentV2 is what discover reads of an OData V2 document (EDMX 1.0)
// beyond what document holds: its version and the associations that
// give a navigation property its target, multiplicity and referential
// constraint.
type documentV2 struct {
	Version      string `xml:"Version,attr"`
	DataServices struct {
		DataServiceVersion string `xml:"DataServiceVersion,attr"`
		Schemas            []struct {
			Namespace    string `xml:",attr"`
			Alias        string `xml:",attr"`
			Associations []struct {
				Name string `xml:",attr"`
				Ends []struct {
					Role         string `xml:",attr"`
					Type         string `xml:",attr"`
					Multiplicity string `xml:",attr"`
					OnDelete     struct {
						Action string `xml:",attr"`
					} `xml:"OnDelete"`
				} `xml:"End"`
				Constraint struct {
					Dependent struct {
						Role string `xml:",attr"`
						Refs []struct {
							Name string `xml:",attr"`
						} `xml:"PropertyRef"`
					} `xml:"Dependent"`
				} `xml:"ReferentialConstraint"`
			} `xml:"Association"`
		} `xml:"Schema"`
	} `xml:"DataServices"`
}

// isV2 reports whether the document is OData V2 (or V1, V3): EDMX
// Version="1.0" with a DataServiceVersion of 1.0 to 3.0, or none.
func (d *documentV2) isV2() bool {
	switch d.DataServices.DataServiceVersion {
	case "", "1.0", "2.0", "3.0":
		return d.Version == "1.0"
	}
	return false
}

// fromV2 rewrites doc, read from metadata, as the V4 document it stands
// for when metadata is OData V2: an Edm.DateTime of sap:display-format
// "Date" is an Edm.Date, any other an Edm.DateTimeOffset (V2 writes it in
// UTC); a property sap:filterable="false" is no cursor; a navigation
// property takes its type from its association's end (a collection for
// multiplicity *), and one to many lines is a composition when the
// association's referential constraint ties the lines to the record's
// key, or, without a constraint, when the lines' key holds every
// property of the record's key by name (as SAP's APIs key items). A V4
// document is left as it is.
func fromV2(metadata []byte, doc *document) {
	var v2 documentV2
	if xml.Unmarshal(metadata, &v2) != nil || !v2.isV2() {
		return
	}
	type end struct {
		typ, multiplicity string
		cascade           bool
		up                []string // the dependent's properties that hold the principal's key
	}
	ends := map[string]end{} // by qualified association name and role
	for _, sc := range v2.DataServices.Schemas {
		for _, a := range sc.Associations {
			for _, e := range a.Ends {
				x := end{typ: e.Type, multiplicity: e.Multiplicity, cascade: e.OnDelete.Action == "Cascade"}
				if a.Constraint.Dependent.Role == e.Role {
					for _, r := range a.Constraint.Dependent.Refs {
						x.up = append(x.up, r.Name)
					}
				}
				for _, ns := range []string{sc.Namespace, sc.Alias} {
					if ns != "" {
						ends[ns+"."+a.Name+"/"+e.Role] = x
					}
				}
			}
		}
	}
	types := map[string]*structured{}
	for si := range doc.Schemas {
		sc := &doc.Schemas[si]
		for ti := range sc.EntityTypes {
			for _, ns := range []string{sc.Namespace, sc.Alias} {
				if ns != "" {
					types[ns+"."+sc.EntityTypes[ti].Name] = &sc.EntityTypes[ti]
				}
			}
		}
	}
	for si := range doc.Schemas {
		sc := &doc.Schemas[si]
		for _, list := range [][]structured{sc.EntityTypes, sc.ComplexTypes} {
			for ti := range list {
				t := &list[ti]
				for pi := range t.Props {
					p := &t.Props[pi]
					if p.Type == "Edm.DateTime" {
						p.Type = "Edm.DateTimeOffset"
						if strings.EqualFold(p.DisplayFormat, "Date") {
							p.Type = "Edm.Date"
						}
					}
				}
				for ni := range t.Navs {
					n := &t.Navs[ni]
					e, ok := ends[n.Relationship+"/"+n.ToRole]
					if !ok {
						continue
					}
					n.Type = e.typ
					if e.multiplicity != "*" {
						continue
					}
					n.Type = "Collection(" + e.typ + ")"
					n.up = e.up
					if n.up == nil {
						n.up = sharedKey(t, types[e.typ])
					}
					if e.cascade || n.up != nil {
						n.OnDelete.Action = "Cascade"
					}
				}
			}
		}
	}
}

// sharedKey returns the key properties of the lines' type line that are
// named as a key property of the record's type record, when the lines'
// key holds all of the record's; else nil.
func sharedKey(record, line *structured) []string {
	if record == nil || line == nil || len(record.Key) == 0 {
		return nil
	}
	lineKey := map[string]bool{}
	for _, k := range line.Key {
		lineKey[k.Name] = true
	}
	var shared []string
	for _, k := range record.Key {
		if !lineKey[k.Name] {
			return nil
		}
		shared = append(shared, k.Name)
	}
	if len(shared) == len(line.Key) {
		return nil // the lines have no key of their own
	}
	return shared
}

// cursors returns the properties of props the service can filter on:
// not those sap:filterable="false" marks.
func cursors(props []prop) []prop {
	return slices.DeleteFunc(slices.Clone(props), func(p prop) bool { return p.noFilter })
}

// unfilterable says which property would have been the cursor but for
// sap:filterable="false"; "" when none.
func unfilterable(props []prop, key map[string]bool) string {
	p, _ := guessUpdatedAt(props, key)
	if p == "" {
		return ""
	}
	return "; " + p + " is sap:filterable=\"false\": the service cannot filter on it, so it cannot be the change cursor"
}
