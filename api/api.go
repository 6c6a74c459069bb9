// Package api holds the documents of the interfaces erpsync depends on, so
// that code can serve them and tests can check implementations against them.
//
// erp-api.yaml, beside this file, is the OpenAPI 3 contract of the ERP's
// membership feed: what erpsync's ERP client assumes and what erpmock
// serves. It is the project's contract, not a description of one ERP
// product: an ERP that differs needs an adapter, not a change here.
package api

import _ "embed"

// ERPOpenAPI is the OpenAPI 3 document of the ERP membership feed
// (erp-api.yaml): paths, parameters, responses and the Membership schema.
//
//go:embed erp-api.yaml
var ERPOpenAPI []byte
