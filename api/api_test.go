package api_test

import (
	"context"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/erpsync/erpsync/api"
)

// TestERPOpenAPI loads and validates the contract, and checks the promises
// the consumer relies on beyond the schemas: every successful answer
// carries a required Date header, and the description says that records
// may be deleted.
func TestERPOpenAPI(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.ERPOpenAPI)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("validate: %v", err)
	}
	for _, path := range []string{"/api/v1/memberships", "/api/v1/memberships/count"} {
		item := doc.Paths.Value(path)
		if item == nil || item.Get == nil {
			t.Fatalf("no GET %s", path)
		}
		for _, code := range []int{200, 400, 401, 429, 500, 502, 503, 504} {
			res := item.Get.Responses.Status(code)
			if res == nil || res.Value == nil {
				t.Errorf("GET %s: no %d answer", path, code)
				continue
			}
			date := res.Value.Headers["Date"]
			if code < 502 && (date == nil || date.Value == nil || !date.Value.Required) {
				t.Errorf("GET %s %d: no required Date header", path, code)
			}
		}
	}
	if d := doc.Info.Description; !strings.Contains(d, "delete") || !strings.Contains(d, "`Date` header") {
		t.Errorf("the description does not say that records may be deleted and answers carry Date:\n%s", d)
	}
}
