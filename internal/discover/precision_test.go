package discover_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/discover"
)

// TestDateTimePrecision maps Edm.DateTimeOffset by its Precision: 0 to 6
// digits to datetime(P) (3 is datetime), 7 (SAP CAP's Timestamp, S/4HANA)
// to datetime(6) with a comment that a seventh non-zero digit is
// quarantined; and warns of a change cursor counting seconds in an entity
// without a version, where two changes within a second share a version.
func TestDateTimePrecision(t *testing.T) {
	const doc = `<edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx"><edmx:DataServices>
<Schema Namespace="s" xmlns="http://docs.oasis-open.org/odata/ns/edm">
 <EntityType Name="T"><Key><PropertyRef Name="ID"/></Key>
  <Property Name="ID" Type="Edm.String" MaxLength="10" Nullable="false"/>
  <Property Name="Seconds" Type="Edm.DateTimeOffset" Precision="0"/>
  <Property Name="Millis" Type="Edm.DateTimeOffset" Precision="3"/>
  <Property Name="Micros" Type="Edm.DateTimeOffset" Precision="6"/>
  <Property Name="Ticks" Type="Edm.DateTimeOffset" Precision="7"/>
  <Property Name="Plain" Type="Edm.DateTimeOffset"/>
  <Property Name="LastChangedAt" Type="Edm.DateTimeOffset" Precision="0" Nullable="false"/>
 </EntityType>
 <EntityType Name="V"><Key><PropertyRef Name="ID"/></Key>
  <Property Name="ID" Type="Edm.String" MaxLength="10" Nullable="false"/>
  <Property Name="version" Type="Edm.Int64" Nullable="false"/>
  <Property Name="LastChangedAt" Type="Edm.DateTimeOffset" Precision="0" Nullable="false"/>
 </EntityType>
 <EntityContainer Name="C"><EntitySet Name="Stamps" EntityType="s.T"/><EntitySet Name="Versioned" EntityType="s.V"/></EntityContainer>
</Schema></edmx:DataServices></edmx:Edmx>`
	out, err := discover.Config([]byte(doc), discover.Options{URL: "http://127.0.0.1:4004/odata/v4/x/"})
	if err != nil {
		t.Fatal(err)
	}
	f := check(t, out)
	golden(t, "precision.yaml", out)
	var got []string
	for _, c := range f.Entities[0].Columns {
		got = append(got, c.From+":"+c.Type)
	}
	want := []string{"ID:string(10)", "Seconds:datetime(0)", "Millis:datetime", "Micros:datetime(6)", "Ticks:datetime(6)", "Plain:datetime"}
	if !slices.Equal(got, want) || f.Entities[0].UpdatedAt != "LastChangedAt" {
		t.Errorf("columns %v, updated_at %s; want %v, LastChangedAt", got, f.Entities[0].UpdatedAt, want)
	}
	text := string(out)
	if !strings.Contains(text, "type: datetime(6), nullable: true}  # Precision 7: datetime(6) keeps microseconds") {
		t.Errorf("no comment on Precision 7:\n%s", out)
	}
	if strings.Count(text, "WARNING: Precision 0, a second: with no version, two changes of a record within one second share a version") != 1 {
		t.Errorf("want one warning, on the entity without a version:\n%s", out)
	}
}
