package captest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// EntitySet is one entity set of the service: the URL a source reads, and
// the changes a test makes to it while the source pages. Every change
// stamps LastChangeDateTime with the server's clock.
type EntitySet struct {
	// URL is the entity set's URL, e.g. ".../odata/v4/erp/Memberships".
	URL string
	srv *Server
}

// Page is one response of a collection read.
type Page struct {
	Value    []Record `json:"value"`
	Count    *int     `json:"@odata.count"`
	NextLink string   `json:"@odata.nextLink"`
}

// entityURL returns the URL of the entity with key id, e.g.
// "Memberships('MBR00000001')".
func (e *EntitySet) entityURL(id string) string {
	return e.URL + "(" + url.PathEscape("'"+strings.ReplaceAll(id, "'", "''")+"'") + ")"
}

// Get returns the record with key id.
func (e *EntitySet) Get(ctx context.Context, id string) (Record, error) {
	return e.record(ctx, "GET", e.entityURL(id), nil)
}

// Patch changes the fields of the record with key id (property name to
// value; nil is null) and returns the record after the change. The server
// sets LastChangeDateTime to its current time, and ChangeCounter to one
// more, whatever fields says about them.
func (e *EntitySet) Patch(ctx context.Context, id string, fields map[string]any) (Record, error) {
	return e.record(ctx, "PATCH", e.entityURL(id), fields)
}

// Post creates r and returns it as stored. r's LastChangeDateTime and
// ChangeCounter are ignored: the server stamps the first and starts the
// second at 1. An empty ValidTo is null.
func (e *EntitySet) Post(ctx context.Context, r Record) (Record, error) {
	fields := map[string]any{
		"MembershipID":    r.MembershipID,
		"BusinessPartner": r.BusinessPartner,
		"Product":         r.Product,
		"LifecycleStatus": r.LifecycleStatus,
		"ValidFrom":       r.ValidFrom,
		"ValidTo":         nil,
	}
	if r.ValidTo != "" {
		fields["ValidTo"] = r.ValidTo
	}
	return e.record(ctx, "POST", e.URL, fields)
}

// Delete removes the record with key id.
func (e *EntitySet) Delete(ctx context.Context, id string) error {
	_, err := e.srv.do(ctx, "DELETE", e.entityURL(id), nil)
	return err
}

// All returns every record, ordered by MembershipID: the reference a test
// compares a synced table with. It follows @odata.nextLink, so records
// changed while it reads may be missed or seen twice; call it when nothing
// changes.
func (e *EntitySet) All(ctx context.Context) ([]Record, error) {
	var all []Record
	next := e.URL + "?$orderby=MembershipID"
	for next != "" {
		p, err := e.srv.Page(ctx, next)
		if err != nil {
			return nil, err
		}
		all = append(all, p.Value...)
		next = p.NextLink
	}
	if !slices.IsSortedFunc(all, func(a, b Record) int { return strings.Compare(a.MembershipID, b.MembershipID) }) {
		return nil, fmt.Errorf("captest: %s: records out of MembershipID order", e.URL)
	}
	return all, nil
}

// Page reads one page of a collection at rawURL (a URL or a nextLink, which
// resolves against the service root) with the server's credentials. Its
// NextLink is made absolute.
func (s *Server) Page(ctx context.Context, rawURL string) (Page, error) {
	u, err := s.resolve(rawURL)
	if err != nil {
		return Page{}, err
	}
	b, err := s.do(ctx, "GET", u, nil)
	if err != nil {
		return Page{}, err
	}
	var p Page
	if err := json.Unmarshal(b, &p); err != nil {
		return Page{}, fmt.Errorf("captest: GET %s: %w", u, err)
	}
	if p.NextLink != "" {
		if p.NextLink, err = s.resolve(p.NextLink); err != nil {
			return Page{}, err
		}
	}
	return p, nil
}

// resolve makes ref absolute against the service root.
func (s *Server) resolve(ref string) (string, error) {
	base, err := url.Parse(s.ServiceURL)
	if err != nil {
		return "", err
	}
	u, err := base.Parse(ref)
	if err != nil {
		return "", fmt.Errorf("captest: resolve %q: %w", ref, err)
	}
	return u.String(), nil
}

func (e *EntitySet) record(ctx context.Context, method, u string, body any) (Record, error) {
	b, err := e.srv.do(ctx, method, u, body)
	if err != nil {
		return Record{}, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("captest: %s %s: %w", method, u, err)
	}
	return r, nil
}
