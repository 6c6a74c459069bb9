package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/erpmock"
)

// SAP Gateway's refusals at start say what they are: a 400 (a property the
// service does not know) is an answer, not an unreachable ERP, and its V2
// error's message object reads as its text; a 403 to a user who gave
// credentials (no authorization for the service) names the user's
// authorizations, not the password.
func TestSAPRefusalsAtStartSayWhatTheyAre(t *testing.T) {
	t.Parallel()
	meta, err := os.ReadFile("../discover/testdata/s4-api-business-partner-v2.xml")
	if err != nil {
		t.Fatal(err)
	}
	e := setup(t, erpmock.Options{Records: 1, Seed: 1})
	gateway := func(code int, errCode, text string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/$metadata") {
				w.Header().Set("Content-Type", "application/xml")
				w.Header().Set("DataServiceVersion", "2.0")
				w.Write(meta)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			w.Write([]byte(`{"error":{"code":"` + errCode + `","message":{"lang":"en","value":"` + text + `"}}}`))
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/sap/opu/odata/sap/API_BUSINESS_PARTNER/?sap-client=100"
	}
	config := func(url string) string {
		p := filepath.Join(t.TempDir(), "bp.yaml")
		if err := os.WriteFile(p, []byte(`erp:
  kind: odata
  url: "`+url+`"
entities:
  - name: business_partners
    source: A_BusinessPartner
    key: [business_partner]
    updated_at: LastChangeDateTime
    columns:
      - {name: business_partner, from: BusinessPartner, type: string(10)}
      - {name: full_name, from: BusinessPartnerFullName, type: string(81), nullable: true}
`), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := func(url string) string {
		cfg := config(url)
		e.MustRun("migrate", "--config", cfg)
		// ERPSYNC_ERP_URL (the Env's erpmock) would win over the file.
		return assertExit(t, e.Cmd(context.Background(), "run", "--config", cfg, "--erp-url", url, "--erp-retries", "0",
			"--erp-username", "erpsync", "--erp-password", "correct-horse"), 2, "")
	}

	bad := gateway(http.StatusBadRequest, "/IWBEP/CM_MGW_RT/022", "Property LastChangeDateTime not found in type A_BusinessPartnerType")
	want := "erpsync: erp at " + bad + " answered 400 Bad Request (entity business_partners, source A_BusinessPartner): a property, filter or value the service does not accept " +
		"(erpsync config check --online checks the file against $metadata): erp: bad request: /IWBEP/CM_MGW_RT/022: Property LastChangeDateTime not found in type A_BusinessPartnerType"
	if l := lastLine(run(bad)); l != want {
		t.Errorf("400:\n got %q\nwant %q", l, want)
	}

	forbidden := gateway(http.StatusForbidden, "/IWFND/CM_CONSUMER/101", "No authorization to access Service 'API_BUSINESS_PARTNER_0001'")
	want = "erpsync: erp at " + forbidden + " refused access (403 Forbidden): check that the user is authorized for the service (SAP: a role that grants it): " +
		"erp: unauthorized: status 403: /IWFND/CM_CONSUMER/101: No authorization to access Service 'API_BUSINESS_PARTNER_0001'"
	if l := lastLine(run(forbidden)); l != want {
		t.Errorf("403:\n got %q\nwant %q", l, want)
	}
}
