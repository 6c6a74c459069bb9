package captest

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The Sales service's seed data (cap/db/data/sales-*.csv), for tests that
// check values the float64 of encoding/json would round.
const (
	// SalesBigRating is the Rating of customer 1000/C0001: 2^53 + 1, an
	// Edm.Int64 that a float64 cannot hold.
	SalesBigRating = "9007199254740993"
	// SalesCustomerCount is the number of seeded Customers,
	// SalesOrderCount the number of seeded SalesOrders.
	SalesCustomerCount = 3
	SalesOrderCount    = 2
)

// Customer returns customer i of company code, as a POST body of
// Customers and as Options.Customers seeds it: number "N", the code's
// first character and i in five digits, with non-ASCII text, a decimal of
// 15 digits and an Int64 past 2^53.
func Customer(code string, i int) Object {
	return Object{
		"CompanyCode":  code,
		"Customer":     fmt.Sprintf("N%s%05d", code[:1], i),
		"CustomerName": fmt.Sprintf("Kunde Nº %d – Ærø Straße 東京", i),
		"CreditLimit":  fmt.Sprintf("%d.%02d", 1000000000000+i*7919, i%100),
		"IsBlocked":    i%3 == 0,
		"FoundedOn":    fmt.Sprintf("19%02d-%02d-%02d", i%100, i%12+1, i%28+1),
		"Rating":       fmt.Sprint(int64(9007199254740993) + int64(i)*1_000_000_007),
		"Status":       []string{"A", "B"}[i%2],
		"Address_City": fmt.Sprintf("Zürich %d", i),
	}
}

// CustomerSeedStart is the modifiedAt of the first customer that
// Options.Customers seeds: after the project's own.
var CustomerSeedStart = time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC)

// appendCustomers appends the customers of seed (Options.Customers) to
// the Customers seed file at path, in code order, each changed a
// millisecond after the one before, with ChangeCounter 1 as a POST gives.
// The columns are the file's, in the order its header names them; a
// column the customer leaves out (the street, the postal code, the
// country) is empty.
func appendCustomers(path string, seed map[string]int) error {
	if len(seed) == 0 {
		return nil
	}
	header, err := csvHeader(path)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	cw.Comma = ';'
	at := CustomerSeedStart
	row := make([]string, len(header))
	for _, code := range slices.Sorted(maps.Keys(seed)) {
		for i := range seed[code] {
			stamp := at.Format(TimeLayout)
			vals := map[string]string{"ChangeCounter": "1", "createdAt": stamp, "createdBy": "seed", "modifiedAt": stamp, "modifiedBy": "seed"}
			for k, v := range Customer(code, i) {
				vals[k] = fmt.Sprint(v)
			}
			for j, col := range header {
				row[j] = vals[col]
			}
			if err := cw.Write(row); err != nil {
				f.Close()
				return err
			}
			at = at.Add(time.Millisecond)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// csvHeader reads the column names of the first line of the seed file at
// path.
func csvHeader(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.Comma = ';'
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: header: %w", path, err)
	}
	return header, nil
}

// TypedSet is an entity set of the Sales service: records as JSON objects
// (property name to value), read with json.Number so that Edm.Int64 and
// Edm.Decimal values stay exact. The service serves both as strings
// (cds.features.ieee754compatible), "1234.50" padded to the scale, and
// takes them as strings in a PATCH or POST body: a JSON number there is
// rounded on the way in.
type TypedSet struct {
	// URL is the entity set's URL, e.g. ".../odata/v4/sales/Customers".
	URL string
	srv *Server
}

// Object is one record of a TypedSet. Numbers are json.Number, structured
// elements are flattened as CAP 9 serves them (Address_City), and an
// expanded composition is a []any of Objects' maps.
type Object map[string]any

// Key is the key of a record: key property to value, a string or an
// integer. Keys with several properties are written by name, in name order.
type Key map[string]any

// entityURL returns the URL of the record with key k, e.g.
// "Customers(CompanyCode='1000',Customer='C0001')".
func (e *TypedSet) entityURL(k Key) (string, error) {
	names := make([]string, 0, len(k))
	for n := range k {
		names = append(names, n)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, n := range names {
		switch v := k[n].(type) {
		case string:
			parts[i] = n + "=" + "'" + strings.ReplaceAll(v, "'", "''") + "'"
		case int:
			parts[i] = n + "=" + strconv.Itoa(v)
		case int64:
			parts[i] = n + "=" + strconv.FormatInt(v, 10)
		default:
			return "", fmt.Errorf("captest: key %s: a %T, want a string or an integer", n, v)
		}
	}
	return e.URL + "(" + url.PathEscape(strings.Join(parts, ",")) + ")", nil
}

// Get returns the record with key k; expand, when not empty, is the
// $expand option (e.g. "Items").
func (e *TypedSet) Get(ctx context.Context, k Key, expand string) (Object, error) {
	u, err := e.entityURL(k)
	if err != nil {
		return nil, err
	}
	if expand != "" {
		u += "?$expand=" + url.PathEscape(expand)
	}
	return e.object(ctx, "GET", u, nil)
}

// Patch changes the fields of the record with key k (property name to
// value; nil is null; Int64 and Decimal values as strings) and returns the
// record after the change. The server stamps modifiedAt, and a Customer's
// ChangeCounter goes up by one. A SalesOrder's "Items" field replaces its
// lines: those not listed are deleted.
func (e *TypedSet) Patch(ctx context.Context, k Key, fields map[string]any) (Object, error) {
	u, err := e.entityURL(k)
	if err != nil {
		return nil, err
	}
	return e.object(ctx, "PATCH", u, fields)
}

// Post creates a record of fields and returns it as stored.
func (e *TypedSet) Post(ctx context.Context, fields map[string]any) (Object, error) {
	return e.object(ctx, "POST", e.URL, fields)
}

// Delete removes the record with key k (a SalesOrder with its lines).
func (e *TypedSet) Delete(ctx context.Context, k Key) error {
	u, err := e.entityURL(k)
	if err != nil {
		return err
	}
	_, err = e.srv.do(ctx, "DELETE", u, nil)
	return err
}

// All returns every record in the server's order, following
// @odata.nextLink; query, when not empty, is added to the first request
// (e.g. "$expand=Items&$orderby=OrderID").
func (e *TypedSet) All(ctx context.Context, query string) ([]Object, error) {
	next := e.URL
	if query != "" {
		next += "?" + query
	}
	var all []Object
	for next != "" {
		u := next
		b, err := e.srv.do(ctx, "GET", u, nil)
		if err != nil {
			return nil, err
		}
		var p struct {
			Value    []Object `json:"value"`
			NextLink string   `json:"@odata.nextLink"`
		}
		if err := decodeExact(b, &p); err != nil {
			return nil, fmt.Errorf("captest: GET %s: %w", u, err)
		}
		all = append(all, p.Value...)
		next = ""
		if p.NextLink != "" {
			// A relative link resolves against the request's URL.
			base, err := url.Parse(u)
			if err != nil {
				return nil, err
			}
			ref, err := base.Parse(p.NextLink)
			if err != nil {
				return nil, fmt.Errorf("captest: GET %s: nextLink %q: %w", u, p.NextLink, err)
			}
			next = ref.String()
		}
	}
	return all, nil
}

func (e *TypedSet) object(ctx context.Context, method, u string, body any) (Object, error) {
	b, err := e.srv.do(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	var o Object
	if err := decodeExact(b, &o); err != nil {
		return nil, fmt.Errorf("captest: %s %s: %w", method, u, err)
	}
	return o, nil
}

// decodeExact decodes b into v with numbers as json.Number.
func decodeExact(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}
