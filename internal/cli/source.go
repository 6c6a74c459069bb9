package cli

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/erpsync/erpsync/internal/erp"
	"github.com/erpsync/erpsync/internal/odata"
)

// erpSettings choose and configure the ERP source (docs/configuration.md,
// "ERP sources").
type erpSettings struct {
	Kind, Map, StatusMap, Paging string
	OData                        string // --erp-odata: auto, v2 or v4
	Username, Password           string
	OAuthTokenURL, OAuthClientID string
	OAuthClientSecret            string
	OAuthScope                   string
}

// Source kinds of --erp-kind.
const (
	kindREST  = "rest"
	kindOData = "odata"
)

func (e *erpSettings) flags(fs *flag.FlagSet) {
	fs.StringVar(&e.Kind, "erp-kind", kindREST, "how to read the ERP: rest (the erpsync ERP API) or odata (an OData V4 or V2 entity set at --erp-url)")
	fs.StringVar(&e.Map, "erp-map", "", "field=Property pairs, comma-separated, for erp_id, member_id, product_code, status, starts_at, ends_at, version, updated_at (unlisted: own name; version= empty: updated_at in microseconds)")
	fs.StringVar(&e.StatusMap, "erp-status-map", "", "sourceValue=STATUS pairs, comma-separated, like active=ACTIVE (unlisted values used as they are)")
	fs.StringVar(&e.Paging, "erp-paging", odata.PagingKeyset, "odata: keyset ($filter after the last (updated_at, erp_id) seen) or server (follow @odata.nextLink; an offset-based server skips rows that move during the sync)")
	fs.StringVar(&e.OData, "erp-odata", odata.VersionAuto, "odata: the OData version, auto (as the service's $metadata declares), v2 or v4")
	e.authFlags(fs)
}

// authFlags are the flags of the ERP credentials other than the token:
// basic authentication and OAuth.
func (e *erpSettings) authFlags(fs *flag.FlagSet) {
	fs.StringVar(&e.Username, "erp-username", "", "ERP user for HTTP basic authentication")
	secretVar(fs, &e.Password, "erp-password", "", "ERP password for HTTP basic authentication (never logged)")
	fs.StringVar(&e.OAuthTokenURL, "erp-oauth-token-url", "", "OAuth 2.0 client credentials: the token endpoint")
	fs.StringVar(&e.OAuthClientID, "erp-oauth-client-id", "", "OAuth 2.0 client credentials: the client id")
	secretVar(fs, &e.OAuthClientSecret, "erp-oauth-client-secret", "", "OAuth 2.0 client credentials: the client secret (never logged)")
	fs.StringVar(&e.OAuthScope, "erp-oauth-scope", "", "OAuth 2.0 client credentials: scopes, space- or comma-separated")
}

// source returns the ERP source of cfg (its BaseURL is --erp-url) and
// these settings. Errors name the flag.
func (e *erpSettings) source(cfg erp.Config) (source, error) {
	mapping, err := erp.ParseMapping(e.Map, "")
	if err != nil {
		return nil, fmt.Errorf("--erp-map: %w", err)
	}
	if mapping, err = erp.ParseMapping(e.Map, e.StatusMap); err != nil {
		return nil, fmt.Errorf("--erp-status-map: %w", err)
	}
	if err := e.auth(&cfg); err != nil {
		return nil, err
	}
	switch e.Kind {
	case kindREST:
		if e.Paging != odata.PagingKeyset {
			return nil, fmt.Errorf("--erp-paging %q: only for --erp-kind odata", e.Paging)
		}
		if e.OData != odata.VersionAuto {
			return nil, fmt.Errorf("--erp-odata %q: only for --erp-kind odata", e.OData)
		}
		cfg.Mapping = mapping
		c, err := erp.New(cfg)
		if err != nil {
			return nil, fmt.Errorf("--erp-url: %w", err)
		}
		return c, nil
	case kindOData:
		if e.Paging != odata.PagingKeyset && e.Paging != odata.PagingServer {
			return nil, fmt.Errorf("--erp-paging %q: want %s or %s", e.Paging, odata.PagingKeyset, odata.PagingServer)
		}
		s, err := odata.New(odata.Config{URL: cfg.BaseURL, Mapping: mapping, Paging: e.Paging, Version: e.OData, HTTP: cfg})
		if err != nil {
			return nil, fmt.Errorf("--erp-url: %w", err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("--erp-kind %q: want %s or %s", e.Kind, kindREST, kindOData)
}

// auth sets the credentials of cfg from these settings; cfg.Token is
// --erp-token's. Errors name the flags.
func (e *erpSettings) auth(cfg *erp.Config) error {
	cfg.Username, cfg.Password = e.Username, e.Password
	switch {
	case e.Password != "" && e.Username == "":
		return errors.New("--erp-password without --erp-username")
	case e.OAuthTokenURL != "" || e.OAuthClientID != "" || e.OAuthClientSecret != "" || e.OAuthScope != "":
		if e.OAuthTokenURL == "" || e.OAuthClientID == "" || e.OAuthClientSecret == "" {
			return errors.New("OAuth needs --erp-oauth-token-url, --erp-oauth-client-id and --erp-oauth-client-secret")
		}
		if _, err := erp.ParseURL("token URL", e.OAuthTokenURL); err != nil {
			return fmt.Errorf("--erp-oauth-token-url: %w", err)
		}
		cfg.OAuth = &erp.OAuth{TokenURL: e.OAuthTokenURL, ClientID: e.OAuthClientID, ClientSecret: e.OAuthClientSecret,
			Scopes: strings.FieldsFunc(e.OAuthScope, func(r rune) bool { return r == ' ' || r == ',' })}
	}
	if (cfg.Token != "" && cfg.Username != "") || (cfg.Token != "" || cfg.Username != "") && cfg.OAuth != nil {
		return errors.New("more than one ERP authentication given (--erp-token, --erp-username, --erp-oauth-*): want one")
	}
	return nil
}

// credentials names what a 401 or 403 refused, and the flags to check.
func (e *erpSettings) credentials(token bool) string {
	switch {
	case e.Username != "":
		return "credentials (check --erp-username/--erp-password)"
	case e.OAuthClientID != "":
		return "OAuth client credentials (check --erp-oauth-client-id/--erp-oauth-client-secret/--erp-oauth-scope)"
	case token:
		return "token (check --erp-token)"
	}
	return "request without credentials (set --erp-username/--erp-password, --erp-token or --erp-oauth-*)"
}
