package discover_test

import (
	"slices"
	"testing"

	"github.com/erpsync/erpsync/internal/discover"
	"github.com/erpsync/erpsync/internal/entity"
)

// The same entity type as a V4 and a V2 service declare it: Amount
// Edm.Decimal(15,4), Name Edm.String MaxLength 80, Counter Edm.Int64,
// ChangedAt Edm.DateTimeOffset Precision 7, a complex Address with City;
// V2's ChangedAt is not filterable.
const (
	checkProps = ` <ComplexType Name="Addr"><Property Name="City" Type="Edm.String" MaxLength="40"/></ComplexType>
 <EntityType Name="T"><Key><PropertyRef Name="ID"/></Key>
  <Property Name="ID" Type="Edm.String" MaxLength="10" Nullable="false"/>
  <Property Name="Amount" Type="Edm.Decimal" Precision="15" Scale="4"/>
  <Property Name="Name" Type="Edm.String" MaxLength="80"/>
  <Property Name="Counter" Type="Edm.Int64"/>
  <Property Name="Address" Type="s.Addr"/>
`
	checkV4 = `<edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx"><edmx:DataServices>
<Schema Namespace="s" xmlns="http://docs.oasis-open.org/odata/ns/edm">
` + checkProps + `  <Property Name="ChangedAt" Type="Edm.DateTimeOffset" Precision="7" Nullable="false"/>
 </EntityType>
 <EntityContainer Name="C"><EntitySet Name="Things" EntityType="s.T"/></EntityContainer>
</Schema></edmx:DataServices></edmx:Edmx>`
	checkV2 = `<edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx" xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata" xmlns:sap="http://www.sap.com/Protocols/SAPData">
<edmx:DataServices m:DataServiceVersion="2.0">
<Schema Namespace="s" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">
` + checkProps + `  <Property Name="ChangedAt" Type="Edm.DateTimeOffset" Precision="7" Nullable="false" sap:filterable="false"/>
 </EntityType>
 <EntityContainer Name="C" m:IsDefaultEntityContainer="true"><EntitySet Name="Things" EntityType="s.T"/></EntityContainer>
</Schema></edmx:DataServices></edmx:Edmx>`
)

func mustType(t *testing.T, s string) entity.Type {
	t.Helper()
	ty, err := entity.ParseType(s)
	if err != nil {
		t.Fatal(err)
	}
	return ty
}

// TestCheck checks an entity with each mistake against the V4 and the V2
// document: a from that names no property (a dotted path too), a
// decimal(15,2) for a scale of 4, a string(40) for MaxLength 80, an
// int32 for an Int64, a datetime(3) for Precision 7 (a warning), a
// cursor V2 cannot filter on; an entity set the service lacks. Columns
// that fit (Address.City into string(40), a wider decimal) say nothing.
func TestCheck(t *testing.T) {
	e := &entity.Entity{Name: "things", Line: 3, UpdatedAt: []string{"ChangedAt"}, Columns: []entity.Column{
		{Name: "id", From: []string{"ID"}, Type: mustType(t, "string(10)"), Line: 5},
		{Name: "amount", From: []string{"Amount"}, Type: mustType(t, "decimal(15,2)"), Line: 6},
		{Name: "wide", From: []string{"Amount"}, Type: mustType(t, "decimal(20,4)"), Line: 7},
		{Name: "name", From: []string{"Name"}, Type: mustType(t, "string(40)"), Line: 8},
		{Name: "counter", From: []string{"Counter"}, Type: mustType(t, "int32"), Line: 9},
		{Name: "city", From: []string{"Address", "City"}, Type: mustType(t, "string(40)"), Line: 10},
		{Name: "street", From: []string{"Address", "Street"}, Type: mustType(t, "string(40)"), Line: 11},
		{Name: "colour", From: []string{"Colour"}, Type: mustType(t, "text"), Line: 12},
		{Name: "changed", From: []string{"ChangedAt"}, Type: mustType(t, "datetime"), Line: 13},
	}}
	common := []discover.Finding{
		{Line: 6, Msg: "entity things: column amount decimal(15,2): from Amount, an Edm.Decimal Precision 15 Scale 4: a value may have 11 digits before the point and 4 after, the column holds 13 and 2 (want decimal(15,4))"},
		{Line: 8, Msg: "entity things: column name string(40): from Name, an Edm.String MaxLength 80: a value may be 80 characters, longer than the column's 40 (want string(80))"},
		{Line: 9, Msg: "entity things: column counter int32: from Counter, an Edm.Int64: int32 cannot hold its values (want int64)"},
		{Line: 11, Msg: "entity things: column street: from Address.Street: the entity type s.T has no property Address.Street"},
		{Line: 12, Msg: "entity things: column colour: from Colour: the entity type s.T has no property Colour"},
		{Line: 13, Warning: true, Msg: "entity things: column changed datetime: from ChangedAt, an Edm.DateTimeOffset Precision 7: a value may have 7 fraction digits, the column keeps 3: a record whose value has a non-zero digit past the 3rd is quarantined, not cut"},
	}
	for _, tc := range []struct {
		name, doc string
		want      []discover.Finding
	}{
		{"v4", checkV4, common},
		{"v2", checkV2, append([]discover.Finding{{Line: 3, Msg: `entity things: updated_at: ChangedAt is not filterable (sap:filterable="false"): the service cannot page the changes by it`}}, common...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := discover.Check([]byte(tc.doc), "Things", e)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("findings:\n%v\nwant:\n%v", got, tc.want)
			}
			got, err = discover.Check([]byte(tc.doc), "Thingz", e)
			if want := []discover.Finding{{Line: 3, Msg: "entity things: entity set Thingz: the service has no such entity set"}}; err != nil || !slices.Equal(got, want) {
				t.Errorf("Thingz: %v, %v; want %v", got, err, want)
			}
		})
	}
}
