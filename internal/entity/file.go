package entity

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// FileError is a mistake in a config file: the file, the line and what to
// fix. Every error of Load and Parse is one.
type FileError struct {
	Path string
	// Line is the line of the mistake, from 1; 0 when the file could not
	// be read.
	Line int
	Msg  string
}

// Error returns "PATH:LINE: MSG" ("PATH: MSG" without a line).
func (e *FileError) Error() string {
	if e.Line == 0 {
		return e.Path + ": " + e.Msg
	}
	return e.Path + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
}

// File is a config file: the ERP connection, the entities to sync and
// where their change events go.
type File struct {
	// Path is the file's path, as Load or Parse was given it.
	Path string
	// ERP is the connection every entity uses; settings the file leaves
	// out are the flags' and the environment's.
	ERP ERP
	// Entities are the file's entities, in the file's order.
	Entities []*Entity
	// Database is the database the commands open when neither the
	// command line nor the environment names one; nil when the file has
	// no database block.
	Database *Database
	// Events is where erpsync relay delivers change events; nil when the
	// file has no events block.
	Events *Events
}

// Entity returns the entity called name, or nil.
func (f *File) Entity(name string) *Entity {
	for _, e := range f.Entities {
		if e.Name == name {
			return e
		}
	}
	return nil
}

// ERP kinds of the file's erp.kind.
const (
	KindREST  = "rest"
	KindOData = "odata"
)

// ERP is the file's erp block: how erpsync reaches the ERP. An empty field
// was not given.
type ERP struct {
	// Kind is rest or odata.
	Kind string
	// URL is the REST API's base URL, or the OData service root.
	URL string
	// Username and Password (or the file PasswordFile names) are HTTP
	// basic authentication.
	Username, Password, PasswordFile string
	// Token (or the file TokenFile names) is a bearer token.
	Token, TokenFile string
	// OAuth is OAuth 2.0 client credentials; nil when not given.
	OAuth *OAuth
	// Paging is the OData paging, keyset or server.
	Paging string
	// OData is the OData version, auto, v2 or v4; "" when not given.
	OData string
	// TLSCA is a PEM CA bundle an https ERP's certificate must chain to.
	TLSCA string
	// Timeout is the timeout of one request attempt; 0 when not given.
	Timeout time.Duration
	// Retries is the retries of one request; nil when not given (0 is
	// none).
	Retries *int
	// Line is the line of the erp block; 0 when the file has none.
	Line int
}

// Database kinds of the file's database.kind.
const (
	DatabaseMySQL    = "mysql"
	DatabasePostgres = "postgres"
)

// Database is the file's database block: the database of every command
// that neither --mysql-dsn nor --postgres-dsn (nor their variables) names.
type Database struct {
	// Kind is mysql (the default) or postgres.
	Kind string
	// DSN, or the file DSNFile names (one of them), is the database's DSN.
	// Parse does not read DSNFile, nor check that the DSN is of Kind's
	// form: the command line does, as it does for its flags.
	DSN, DSNFile string
	// Line is the line of the database block; DSNLine the line of dsn or
	// dsn_file.
	Line, DSNLine int
}

// OAuth is OAuth 2.0 client credentials.
type OAuth struct {
	TokenURL string
	ClientID string
	// ClientSecret, or the file ClientSecretFile names.
	ClientSecret, ClientSecretFile string
	// Scope is the scopes, space- or comma-separated.
	Scope string
}

// RESTShape is an entity's REST shape as the file writes it: the strings
// of the --erp-* REST flags of the same meaning (see internal/erp's
// ParseJSONPath, ParseParams and ParsePaging). An empty field was not
// given.
type RESTShape struct {
	// RecordsPath is the JSON path of a page's records (--erp-records-path).
	RecordsPath string
	// CursorPath is the JSON path of a page's next cursor (--erp-cursor-path).
	CursorPath string
	// Path is the records endpoint (--erp-path).
	Path string
	// CountPath is the count endpoint (--erp-count-path); HasCountPath
	// tells it was given, "" meaning the API has none.
	CountPath    string
	HasCountPath bool
	// CountField is the JSON path of the count (--erp-count-field).
	CountField string
	// Params is the query parameter names (--erp-param), like
	// since=changedAfter,cursor=page_token.
	Params string
	// Paging is cursor or offset (--erp-rest-paging).
	Paging string
	// Line is the line of the rest block.
	Line int
}

// Event sinks of the file's events.sink.
const (
	SinkWebhook  = "webhook"
	SinkNATS     = "nats"
	SinkRabbitMQ = "rabbitmq"
)

// Events is the file's events block: where erpsync relay delivers the
// change events of the entities with Events set.
type Events struct {
	// Sink is webhook, nats or rabbitmq.
	Sink string
	// URL is the webhook's URL, or the NATS or RabbitMQ server's.
	URL string
	// Secret (or the file SecretFile names) signs a webhook's bodies.
	Secret, SecretFile string
	// Unsigned lets a webhook go without a secret (unsigned: true).
	Unsigned bool
	// Subject is the NATS subject prefix.
	Subject string
	// Exchange is the RabbitMQ exchange.
	Exchange string
	// Line is the line of the events block.
	Line int
}

// Load reads and parses the config file at path (see Parse).
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &FileError{Path: path, Msg: "read config file: " + err.Error()}
	}
	return Parse(path, data)
}

// Parse parses the config file data, read from path, and checks it whole:
// a mistake (bad YAML, an unknown key, a wrong type, a name, table or key
// that cannot work) is one *FileError naming the line and what to fix.
// Defaults are filled: a table is its entity's or child's name, a column
// reads the property of its own name.
func Parse(path string, data []byte) (*File, error) {
	d := &decoder{path: path, tables: map[string]string{}}
	f := d.file(d.document(data))
	if !d.ok() {
		return nil, d.err
	}
	f.Path = path
	return f, nil
}

// yamlLine is the line in the YAML parser's messages.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// document returns the top node of the file's one YAML document; nil
// after a mistake.
func (d *decoder) document(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if err == nil {
		var next yaml.Node
		switch err2 := dec.Decode(&next); {
		case err2 == nil && len(next.Content) == 1 && next.Content[0].Tag != "!!null":
			d.fail(&next, "a second YAML document (after ---): want one")
			return nil
		case err2 != nil && !errors.Is(err2, io.EOF):
			err = err2
		}
	}
	switch {
	case errors.Is(err, io.EOF):
	case err != nil:
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		line := 1
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = strings.TrimPrefix(err.Error(), m[0])
		}
		d.fail(&yaml.Node{Line: line}, "bad YAML: %s", msg)
		return nil
	case len(doc.Content) == 1 && doc.Content[0].Tag != "!!null":
		return doc.Content[0]
	}
	d.fail(&yaml.Node{Line: 1}, "empty file: want entities: (and erp:, database:, events:)")
	return nil
}

// file reads the top of the file.
func (d *decoder) file(n *yaml.Node) *File {
	if n == nil {
		return nil
	}
	f := &File{}
	m := d.fields(n, "the file", "erp", "database", "entities", "events")
	if v, ok := m["erp"]; ok {
		f.ERP = d.erp(v.value)
	}
	if v, ok := m["database"]; ok {
		f.Database = d.database(v.value)
	}
	if v, ok := m["events"]; ok {
		f.Events = d.events(v.value)
	}
	v, ok := m["entities"]
	if !ok {
		d.fail(n, "no entities: want entities: with at least one entity")
		return f
	}
	f.Entities = d.entities(v.value, f)
	return f
}

// erp reads the erp block.
func (d *decoder) erp(n *yaml.Node) ERP {
	m := d.fields(n, "erp", "kind", "url", "username", "password", "password_file", "token", "token_file",
		"oauth", "paging", "odata", "tls_ca", "timeout", "retries")
	e := ERP{Line: n.Line}
	str := func(key string) string {
		if v, ok := m[key]; ok {
			return d.str(v.value, "erp."+key)
		}
		return ""
	}
	if v, ok := m["kind"]; ok {
		e.Kind = d.oneOf(v.value, "erp.kind", KindREST, KindOData)
	}
	if v, ok := m["url"]; ok {
		e.URL = d.url(v.value, "erp.url", "http", "https")
	}
	e.Username, e.Password, e.PasswordFile = str("username"), str("password"), str("password_file")
	e.Token, e.TokenFile = str("token"), str("token_file")
	e.TLSCA = str("tls_ca")
	if v, ok := m["timeout"]; ok {
		e.Timeout = d.duration(v.value, "erp.timeout", time.Millisecond)
	}
	if v, ok := m["retries"]; ok {
		r := d.integer(v.value, "erp.retries", 0, 100)
		e.Retries = &r
	}
	if v, ok := m["oauth"]; ok {
		e.OAuth = d.oauth(v.value)
	}
	if v, ok := m["paging"]; ok {
		e.Paging = d.oneOf(v.value, "erp.paging", "keyset", "server")
		if d.ok() && e.Kind != KindOData {
			d.fail(v.key, "erp.paging: only for kind: odata (a REST entity pages by its rest: block)")
		}
	}
	if v, ok := m["odata"]; ok {
		e.OData = d.oneOf(v.value, "erp.odata", "auto", "v2", "v4")
		if d.ok() && e.Kind != KindOData {
			d.fail(v.key, "erp.odata: only for kind: odata")
		}
	}
	if !d.ok() {
		return e
	}
	auths := 0
	for _, given := range []bool{e.Username != "", e.Token != "" || e.TokenFile != "", e.OAuth != nil} {
		if given {
			auths++
		}
	}
	switch {
	case e.Password != "" && e.PasswordFile != "":
		d.fail(m["password_file"].key, "erp: password and password_file: want one")
	case e.Token != "" && e.TokenFile != "":
		d.fail(m["token_file"].key, "erp: token and token_file: want one")
	case (e.Password != "" || e.PasswordFile != "") && e.Username == "":
		d.fail(n, "erp: a password without a username: add username:")
	case auths > 1:
		d.fail(n, "erp: more than one authentication (username, token, oauth): want one")
	}
	return e
}

// database reads the database block.
func (d *decoder) database(n *yaml.Node) *Database {
	m := d.fields(n, "database", "kind", "dsn", "dsn_file")
	db := &Database{Kind: DatabaseMySQL, Line: n.Line}
	if v, ok := m["kind"]; ok {
		db.Kind = d.oneOf(v.value, "database.kind", DatabaseMySQL, DatabasePostgres)
	}
	dsn := func(key string) string {
		v, ok := m[key]
		if !ok {
			return ""
		}
		s := d.str(v.value, "database."+key)
		if d.ok() && s == "" {
			d.fail(v.value, "database.%s: empty", key)
		}
		db.DSNLine = v.value.Line
		return s
	}
	db.DSN, db.DSNFile = dsn("dsn"), dsn("dsn_file")
	switch {
	case !d.ok():
	case db.DSN != "" && db.DSNFile != "":
		d.fail(m["dsn_file"].key, "database: dsn and dsn_file: want one")
	case db.DSN == "" && db.DSNFile == "":
		d.fail(n, "database: no dsn: want dsn: or dsn_file: (a file that holds the DSN)")
	}
	return db
}

// oauth reads erp.oauth.
func (d *decoder) oauth(n *yaml.Node) *OAuth {
	m := d.fields(n, "erp.oauth", "token_url", "client_id", "client_secret", "client_secret_file", "scope")
	o := &OAuth{}
	if v, ok := m["token_url"]; ok {
		o.TokenURL = d.url(v.value, "erp.oauth.token_url", "http", "https")
	}
	for _, s := range []struct {
		key string
		p   *string
	}{{"client_id", &o.ClientID}, {"client_secret", &o.ClientSecret}, {"client_secret_file", &o.ClientSecretFile}, {"scope", &o.Scope}} {
		if v, ok := m[s.key]; ok {
			*s.p = d.str(v.value, "erp.oauth."+s.key)
		}
	}
	switch {
	case !d.ok():
	case o.ClientSecret != "" && o.ClientSecretFile != "":
		d.fail(m["client_secret_file"].key, "erp.oauth: client_secret and client_secret_file: want one")
	case o.TokenURL == "" || o.ClientID == "" || o.ClientSecret == "" && o.ClientSecretFile == "":
		d.fail(n, "erp.oauth: want token_url, client_id and client_secret (or client_secret_file)")
	}
	return o
}

// url returns the URL n, whose scheme must be one of schemes. Messages
// never show it: it may carry a password.
func (d *decoder) url(n *yaml.Node, key string, schemes ...string) string {
	s := d.str(n, key)
	if !d.ok() {
		return s
	}
	u, err := url.Parse(s)
	want := make([]string, len(schemes))
	for i, sc := range schemes {
		want[i] = sc + "://"
	}
	if err != nil || u.Host == "" || !slices.ContainsFunc(schemes, func(sc string) bool { return strings.EqualFold(sc, u.Scheme) }) {
		d.fail(n, "%s: want a URL of %s with a host", key, orList(want))
	}
	return s
}

// events reads the events block.
func (d *decoder) events(n *yaml.Node) *Events {
	m := d.fields(n, "events", "sink", "url", "secret", "secret_file", "unsigned", "subject", "exchange")
	ev := &Events{Line: n.Line}
	v, ok := m["sink"]
	if !ok {
		d.fail(n, "events: no sink: want sink: webhook, nats or rabbitmq")
		return ev
	}
	ev.Sink = d.oneOf(v.value, "events.sink", SinkWebhook, SinkNATS, SinkRabbitMQ)
	schemes := map[string][]string{SinkWebhook: {"http", "https"}, SinkNATS: {"nats", "tls"}, SinkRabbitMQ: {"amqp", "amqps"}}[ev.Sink]
	only := map[string]string{"secret": SinkWebhook, "secret_file": SinkWebhook, "unsigned": SinkWebhook, "subject": SinkNATS, "exchange": SinkRabbitMQ}
	for _, key := range []string{"secret", "secret_file", "unsigned", "subject", "exchange"} {
		if v, ok := m[key]; ok && d.ok() && only[key] != ev.Sink {
			d.fail(v.key, "events.%s: only for sink: %s", key, only[key])
		}
	}
	if v, ok := m["url"]; ok {
		ev.URL = d.url(v.value, "events.url", schemes...)
	} else {
		d.fail(n, "events: no url: want the %s URL", ev.Sink)
	}
	str := func(key string) string {
		if v, ok := m[key]; ok {
			s := d.str(v.value, "events."+key)
			if s == "" {
				d.fail(v.value, "events.%s: empty", key)
			}
			return s
		}
		return ""
	}
	ev.Secret, ev.SecretFile = str("secret"), str("secret_file")
	ev.Subject, ev.Exchange = str("subject"), str("exchange")
	if v, ok := m["unsigned"]; ok && d.ok() {
		ev.Unsigned = d.boolean(v.value, "events.unsigned")
	}
	switch {
	case !d.ok():
	case ev.Secret != "" && ev.SecretFile != "":
		d.fail(m["secret_file"].key, "events: secret and secret_file: want one")
	case ev.Unsigned && (ev.Secret != "" || ev.SecretFile != ""):
		d.fail(m["unsigned"].key, "events: unsigned: true and a secret: want one")
	case strings.ContainsAny(ev.Subject, " \t*>") || strings.HasPrefix(ev.Subject, ".") || strings.HasSuffix(ev.Subject, ".") || strings.Contains(ev.Subject, ".."):
		d.fail(m["subject"].value, "events.subject %q: want a NATS subject like erpsync.events, without wildcards", ev.Subject)
	}
	return ev
}

// rest reads an entity's rest block.
func (d *decoder) rest(n *yaml.Node) *RESTShape {
	m := d.fields(n, "rest", "records_path", "cursor_path", "path", "count_path", "count_field", "params", "paging")
	r := &RESTShape{Line: n.Line}
	paths := map[string][]string{}
	for _, s := range []struct {
		key string
		p   *string
	}{{"records_path", &r.RecordsPath}, {"cursor_path", &r.CursorPath}, {"count_field", &r.CountField}} {
		if v, ok := m[s.key]; ok {
			*s.p = d.str(v.value, "rest."+s.key)
			if *s.p != "." {
				paths[s.key] = d.dotted(v.value, "rest."+s.key)
			}
		}
	}
	endpoint := func(key string, empty bool) string {
		v, ok := m[key]
		if !ok {
			return ""
		}
		s := d.str(v.value, "rest."+key)
		if d.ok() && !(s == "" && empty) && (!strings.HasPrefix(s, "/") || strings.ContainsAny(s, "?# ")) {
			d.fail(v.value, "rest.%s %q: want a path like /v2/members/changes, without a query", key, s)
		}
		return s
	}
	r.Path = endpoint("path", false)
	r.CountPath = endpoint("count_path", true)
	_, r.HasCountPath = m["count_path"]
	if v, ok := m["paging"]; ok {
		r.Paging = d.oneOf(v.value, "rest.paging", "cursor", "offset")
	}
	if v, ok := m["params"]; ok {
		r.Params = d.params(v.value)
	}
	rec, cur := paths["records_path"], paths["cursor_path"]
	if d.ok() && r.Paging != "offset" && r.RecordsPath != "" && r.CursorPath != "" && overlaps(rec, cur) {
		d.fail(m["cursor_path"].value, "rest.cursor_path %s: inside or around records_path %s", r.CursorPath, r.RecordsPath)
	}
	return r
}

// params reads rest.params, a map of since, until, cursor, limit and
// offset to the query parameter names, into --erp-param's form.
func (d *decoder) params(n *yaml.Node) string {
	names := []string{"since", "until", "cursor", "limit", "offset"}
	m := d.fields(n, "rest.params", names...)
	var out []string
	stands := map[string]string{}
	for _, k := range names {
		v, ok := m[k]
		if !ok {
			continue
		}
		p := d.str(v.value, "rest.params."+k)
		switch other, dup := stands[p]; {
		case !d.ok():
			return ""
		case p == "" || strings.ContainsAny(p, "=,&?# "):
			d.fail(v.value, "rest.params.%s %q: want a query parameter name", k, p)
		case dup:
			d.fail(v.value, "rest.params.%s: parameter %q stands for %s too", k, p, other)
		}
		stands[p] = k
		out = append(out, k+"="+p)
	}
	return strings.Join(out, ",")
}

// overlaps tells whether p or q starts with the other (a nil path is the
// body itself).
func overlaps(p, q []string) bool {
	n := min(len(p), len(q))
	for i := range n {
		if p[i] != q[i] {
			return false
		}
	}
	return true
}
