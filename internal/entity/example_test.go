package entity_test

import (
	"fmt"

	"github.com/erpsync/erpsync/internal/entity"
)

func ExampleParse() {
	f, err := entity.Parse("customers.yaml", []byte(`
entities:
  - name: customers
    source: Customers
    key: [company, customer]
    updated_at: LastChangeDateTime
    columns:
      - {name: company,  from: CompanyCode, type: string(4)}
      - {name: customer, from: Customer,    type: string(10)}
      - {name: city,     from: Address.City, type: string(40), nullable: true}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	e := f.Entities[0]
	fmt.Println(e.Table, e.Key, e.Column("city").From, e.Column("city").Type)
	// Output: customers [company customer] [Address City] string(40)
}

func ExampleParse_mistake() {
	_, err := entity.Parse("customers.yaml", []byte(`
entities:
  - name: customers
    source: Customers
    key: customer
    updated_at: LastChangeDateTime
    colums:
      - {name: customer, type: string(10)}
`))
	fmt.Println(err)
	// Output: customers.yaml:7: unknown key "colums" (did you mean "columns"?)
}
