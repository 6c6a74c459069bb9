package discover_test

import (
	"fmt"

	"github.com/erpsync/erpsync/internal/discover"
)

func ExampleConfig() {
	const metadata = `<edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
 <edmx:DataServices>
  <Schema Namespace="sales" xmlns="http://docs.oasis-open.org/odata/ns/edm">
   <EntityType Name="Customer">
    <Key><PropertyRef Name="CompanyCode"/><PropertyRef Name="Customer"/></Key>
    <Property Name="CompanyCode" Type="Edm.String" MaxLength="4" Nullable="false"/>
    <Property Name="Customer" Type="Edm.String" MaxLength="10" Nullable="false"/>
    <Property Name="CreditLimit" Type="Edm.Decimal" Precision="15" Scale="2"/>
    <Property Name="LastChangeDateTime" Type="Edm.DateTimeOffset" Nullable="false"/>
   </EntityType>
   <EntityContainer Name="Service"><EntitySet Name="Customers" EntityType="sales.Customer"/></EntityContainer>
  </Schema>
 </edmx:DataServices>
</edmx:Edmx>`
	file, err := discover.Config([]byte(metadata), discover.Options{URL: "https://erp.example.com/odata/v4/sales/"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(file))
	// Output:
	// # erpsync config file, written by `erpsync discover` from the service's $metadata.
	// # Check every comment that says "guessed" or "check" before the first sync.
	// erp:
	//   kind: odata
	//   url: "https://erp.example.com/odata/v4/sales/"
	//   # Credentials never go in this file's values: username: with password_file:, token_file:,
	//   # oauth: {..., client_secret_file: ...}, or the flags and ERPSYNC_* variables.
	//
	// entities:
	//   - name: customers
	//     table: customers
	//     source: Customers
	//     key: [company_code, customer]
	//     updated_at: LastChangeDateTime  # guessed from the name: the change cursor; check that every change (and a change of a line) sets it, and that $filter and $orderby accept it
	//     # version: no integer change counter found: the version is updated_at in microseconds
	//     columns:
	//       - {name: company_code, from: CompanyCode, type: string(4)}
	//       - {name: customer,     from: Customer,    type: string(10)}
	//       - {name: credit_limit, from: CreditLimit, type: "decimal(15,2)", nullable: true}
}
