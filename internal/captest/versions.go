package captest

import (
	"regexp"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/odata"
)

// Versions are the OData versions a test reads CAP through: the same
// services, served as V4 by CAP and as V2 by its V2 adapter. A test
// changes the records through V4 either way.
var Versions = []string{odata.Version4, odata.Version2}

// ForVersions runs fn as a parallel subtest of each of Versions, named
// for it.
func ForVersions(t *testing.T, fn func(t *testing.T, v string)) {
	for _, v := range Versions {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			fn(t, v)
		})
	}
}

// V2 returns the OData V2 URL of the V4 URL u: CAP's V2 adapter
// (@cap-js-community/odata-v2-adapter) serves every service again under
// /odata/v2/, the same entity sets with the same data.
func V2(u string) string { return strings.Replace(u, "/odata/v4/", "/odata/v2/", 1) }

// On returns the V4 URL u as a source of OData version v reads it: for
// odata.Version2, its V2 twin with ?sap-client=100, as SAP's services are
// addressed (CAP ignores the parameter). When v is V2, it also makes the
// test fail at its end unless the V2 adapter served a request with the
// parameter (it logs each as "GET /odata/v2/...?... -> ..."): the
// subtest read V2, not V4, and sent the URL's own query.
func (s *Server) On(t testing.TB, u, v string) string {
	if v != odata.Version2 {
		return u
	}
	t.Cleanup(func() {
		if !regexp.MustCompile(`GET /odata/v2/\S*sap-client=100`).MatchString(s.Logs()) {
			t.Error("captest: no request with sap-client=100 went through CAP's V2 adapter")
		}
	})
	return V2(u) + "?sap-client=100"
}
