package guarantee

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/erpsync/erpsync/internal/odata"
)

// The OData face serves about a third of its feeds as OData V2, as SAP
// Gateway does (odataSpec.V2): an EDMX 1.0 $metadata, records in
// {"d":{"results":[...],"__next":...}} with __metadata, /Date(ms)/ and
// /Date(ms+0000)/ date-times, ChangeCounter (an Edm.Int64) as a string,
// and a $filter whose literals must be V2's (datetimeoffset'...',
// guid'...'): a V4 literal is a 400, as it is from SAP. erpsync reads
// such a feed with --erp-odata auto, so it learns V2 from $metadata.

// version is the --erp-odata of the feed's erpsync: auto for a V2 face
// (the version learnt from $metadata), v4 for a V4 face (no $metadata
// read beyond what a GUID key needs).
func (o *odataSpec) version() string {
	if o.V2 {
		return odata.VersionAuto
	}
	return odata.Version4
}

// v2Date writes t as V2 JSON writes an Edm.DateTime: milliseconds since
// 1970 in UTC; with offset, an Edm.DateTimeOffset (+0000).
func v2Date(t time.Time, offset bool) string {
	s := "/Date(" + strconv.FormatInt(t.UnixMilli(), 10)
	if offset {
		s += "+0000"
	}
	return s + ")/"
}

// v2Entity is record r as the V2 face serves it.
func (o *odataSpec) v2Entity(r record) []byte {
	e := map[string]any{
		"__metadata": map[string]string{"type": "ErpService.Membership", "uri": "Memberships('" + r.ID + "')"},
		pKey:         r.ID, "BusinessPartner": r.Member, "Product": r.Product, "LifecycleStatus": strings.ToLower(r.Status),
		"ValidFrom": v2Date(r.Starts, false), "ValidTo": nil, pModified: v2Date(r.Updated, true),
	}
	if r.Ends != nil {
		e["ValidTo"] = v2Date(*r.Ends, false)
	}
	if !o.Derived {
		e[pVersion] = strconv.FormatInt(r.Version, 10)
	}
	b, _ := json.Marshal(e)
	return b
}

// isoNoZone is a date-time without a zone, which a V2 reader takes as
// UTC (SAP's convention for Edm.DateTime): an invalid item's value of
// that shape is valid in V2, so the V2 face does not serve such an item.
var isoNoZone = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$`)

// v2Serves reports whether the V2 face serves the invalid item w (the
// REST feed's fields): not when a date-time field holds a date-time
// without a zone, nor when the version is a string of a positive
// integer, which is how V2 writes an Edm.Int64: both are valid in V2.
func v2Serves(w map[string]any) bool {
	for _, f := range []string{"starts_at", "ends_at", "updated_at"} {
		if s, ok := w[f].(string); ok && isoNoZone.MatchString(s) {
			return false
		}
	}
	if s, ok := w["version"].(string); ok {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
			return false
		}
	}
	return true
}

var (
	reV2Literal = regexp.MustCompile(`(datetimeoffset|guid)'([^']*)'`)
	// reBareLiteral is a date-time or GUID literal written bare, V4's
	// way: a 400 from a V2 server.
	reBareLiteral = regexp.MustCompile(`(^|[ (])(\d{4}-\d{2}-\d{2}T|[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-)`)
)

// v2Filter checks the literals of a V2 $filter and returns it with V4's:
// datetimeoffset'X' and guid'X' become X; a bare date-time or GUID is an
// error, and so is a guid'...' of a key that is no Edm.Guid.
func (f *face) v2Filter(filter string) (string, error) {
	if m := reBareLiteral.FindString(filter); m != "" {
		return "", fmt.Errorf("V2 $filter %q: %q is no V2 literal (datetimeoffset'...', guid'...')", filter, strings.TrimSpace(m))
	}
	var bad error
	out := reV2Literal.ReplaceAllStringFunc(filter, func(lit string) string {
		m := reV2Literal.FindStringSubmatch(lit)
		if m[1] == "guid" && !f.GUID {
			bad = fmt.Errorf("%s: %s is an Edm.String", lit, pKey)
		}
		return m[2]
	})
	return out, bad
}

// metadataV2 is the V2 service's EDMX document: ValidFrom and ValidTo
// Edm.DateTime, LastChangeDateTime an Edm.DateTimeOffset.
func (f *face) metadataV2() []byte {
	key, version := f.keyAndVersion()
	return []byte(`<?xml version="1.0" encoding="utf-8"?>
<edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx" xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" xmlns:sap="http://www.sap.com/Protocols/SAPData">
<edmx:DataServices m:DataServiceVersion="2.0">
<Schema Namespace="ErpService" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">
<EntityType Name="Membership"><Key><PropertyRef Name="` + pKey + `"/></Key>` + key + `
<Property Name="BusinessPartner" Type="Edm.String"/><Property Name="Product" Type="Edm.String"/>
<Property Name="LifecycleStatus" Type="Edm.String"/><Property Name="ValidFrom" Type="Edm.DateTime"/>
<Property Name="ValidTo" Type="Edm.DateTime"/><Property Name="` + pModified + `" Type="Edm.DateTimeOffset" Precision="7" Nullable="false"/>` + version + `
</EntityType>
<EntityContainer Name="EntityContainer" m:IsDefaultEntityContainer="true"><EntitySet Name="Memberships" EntityType="ErpService.Membership"/></EntityContainer>
</Schema>
</edmx:DataServices>
</edmx:Edmx>
`)
}

// envelope returns how the face writes a page: the text before the
// records, the name of the next link and the text after.
func (f *face) envelope() (open, next, end string) {
	if f.V2 {
		return `{"d":{"results":[`, "__next", "}}"
	}
	return `{"@odata.context":"$metadata#Memberships","value":[`, "@odata.nextLink", "}"
}
