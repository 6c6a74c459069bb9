package entity_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/entity"
)

// good is a valid file; the bad ones are made from it by edits.
const good = `erp:
  kind: rest
  url: http://127.0.0.1:8090
entities:
  - name: customers
    source: customers
    key: [company, customer]
    updated_at: changed_at
    columns:
      - {name: company, type: string(4)}
      - {name: customer, type: string(10)}
      - {name: credit, type: "decimal(15,2)", nullable: true}
`

// edit returns good with old replaced by new (old must occur).
func edit(t testing.TB, old, new string) string {
	t.Helper()
	if !strings.Contains(good, old) {
		t.Fatalf("good has no %q", old)
	}
	return strings.Replace(good, old, new, 1)
}

func TestGoodParses(t *testing.T) {
	if _, err := entity.Parse("c.yaml", []byte(good)); err != nil {
		t.Fatal(err)
	}
}

// badCase is a file the loader refuses: the line and a part of the message.
type badCase struct {
	name, file string
	line       int
	msg        string
	// structural: the JSON Schema refuses the file too.
	structural bool
}

func badCases(t testing.TB) []badCase {
	return []badCase{
		{"empty file", "", 1, "empty file", false},
		{"only a comment", "# nothing\n", 1, "empty file", false},
		{"bad YAML", edit(t, "    source: customers\n", "    source: [customers\n"), 5, "bad YAML: did not find expected ',' or ']'", false},
		{"tab indentation", edit(t, "    key:", "\tkey:"), 6, "bad YAML: found a tab character", false},
		{"merge key", edit(t, "  - name: customers\n", "  - <<: {table: c}\n    name: customers\n"), 5, "a merge key (<<)", false},
		{"two documents", good + "---\nentities: []\n", 13, "second YAML document", false},
		{"top-level list", "- a\n- b\n", 1, "the file: want a map, not a list", true},
		{"unknown top-level key", "entites: []\n", 1, `unknown key "entites" (did you mean "entities"?)`, true},
		{"unknown key did you mean", edit(t, "    columns:", "    colums:"), 9, `unknown key "colums" (did you mean "columns"?)`, true},
		{"pattern on a decimal", edit(t, `nullable: true}`, `nullable: true, pattern: "."}`), 12, "column credit: pattern is for string and text columns, not decimal(15,2)", false},
		{"bad pattern", edit(t, "{name: customer, type: string(10)}", `{name: customer, type: string(10), pattern: "a("}`), 11, "column customer: pattern \"a(\": error parsing regexp", false},
		{"not_before on a string", edit(t, "{name: customer, type: string(10)}", "{name: customer, type: string(10), not_before: company}"), 11, "column customer: not_before is for date and datetime columns, not string(10)", false},
		{"not_before no such column", edit(t, "{name: customer, type: string(10)}", "{name: customer, type: string(10)}\n      - {name: ends, type: date, nullable: true, not_before: starts}"), 12, "column ends: not_before starts: no such column", false},
		{"unknown key far", edit(t, "    columns:", "    zzz: 1\n    columns:"), 9, `unknown key "zzz": want one of name, table`, true},
		{"unknown column key", edit(t, "{name: company, type", "{name: company, typ: string(4), type"), 10, `unknown key "typ" (did you mean "type"?)`, true},
		{"key given twice", edit(t, "    key: [company, customer]\n", "    key: [company, customer]\n    key: company\n"), 8, "key given twice (first on line 7)", false},
		{"erp a list", "erp: [kind]\n" + strings.SplitAfter(good, "url: http://127.0.0.1:8090\n")[1], 1, "erp: want a map, not a list", true},
		{"column a string", strings.SplitAfter(good, "updated_at: changed_at\n")[0] + "    columns: [company]\n", 9, "a column: want a map, not a string", true},
		{"no entities", "erp: {kind: rest}\n", 1, "no entities", true},
		{"entities empty", "entities: []\n", 1, "entities: empty", true},
		{"entities a map", "entities: {name: x}\n", 1, "entities: want a list, not a map", true},
		{"columns a map", strings.SplitAfter(good, "updated_at: changed_at\n")[0] + "    columns: {company: string(4)}\n", 9, "columns: want a list, not a map", true},
		{"columns empty", strings.SplitAfter(good, "updated_at: changed_at\n")[0] + "    columns: []\n", 9, "columns: empty", true},
		{"name a number", edit(t, "name: customers", "name: 12"), 5, "name: want a string, not a number (quote it)", true},
		{"nullable a string", edit(t, `nullable: true`, `nullable: "yes"`), 12, "nullable: want true or false, not a string", true},
		{"alias", edit(t, "    source: customers", "    source: &s customers\n    table: *s"), 7, "aliases are not supported", false},
		{"unknown type", edit(t, "type: string(10)", "type: varchar(10)"), 11, `unknown type "varchar(10)": want string(N)`, true},
		{"datetime(7)", edit(t, `type: "decimal(15,2)"`, `type: "datetime(7)"`), 12, `type "datetime(7)": want datetime(P) with P, the fraction digits of a second, from 0 to 6`, false},
		{"datetime(P,S)", edit(t, `type: "decimal(15,2)"`, `type: "datetime(6,1)"`), 12, `type "datetime(6,1)": want datetime(N)`, false},
		{"an event key past the outbox", good[:strings.Index(good, "entities:")] + "events: {sink: nats, url: \"nats://127.0.0.1:4222\"}\n" +
			strings.Replace(strings.Replace(good[strings.Index(good, "entities:"):], "string(10)", "string(200)", 1), "    columns:", "    events: true\n    columns:", 1),
			8, "entity customers: key: its change events' key text takes up to 1252 bytes (the key's JSON, a string(N) at up to 6 bytes a character, <, > and & escaped as \\u003c), more than the 500 the outbox holds", false},
		{"type with a tab", edit(t, "type: string(10)", "type: \"string(10)\\t\""), 11, `type "string(10)\t": want printable ASCII`, true},
		{"set a date", edit(t, "    source: customers\n", "    sources: [{source: a, set: {company: 2024-01-01}}]\n"), 6, `set: company "2024-01-01": 10 characters, more than 4`, false},
		{"type without length", edit(t, "type: string(10)", "type: string"), 11, `type "string": want string(N)`, true},
		{"string too long", edit(t, "type: string(10)", "type: string(20000)"), 11, "want a length of 1 to 16383", false},
		{"entity name upper case", edit(t, "name: customers", "name: Customers"), 5, `name "Customers": want a lower-case name`, true},
		{"entity name too long", edit(t, "name: customers", "name: "+strings.Repeat("c", 65)), 5, "65 characters, want at most 64", true},
		{"column name with a dash", edit(t, "name: credit,", "name: credit-limit,"), 12, `name "credit-limit": want a lower-case name`, true},
		{"table name bad", edit(t, "    source: customers\n", "    source: customers\n    table: 1st\n"), 7, "want a lower-case name", true},
		{"reserved column", edit(t, "name: credit,", "name: fence_token,"), 12, `column "fence_token" is one of erpsync's own`, false},
		{"column twice", edit(t, "name: credit,", "name: company,"), 12, `column "company" declared twice (first on line 10)`, false},
		{"key not declared", edit(t, "key: [company, customer]", "key: [company, custmer]"), 7, `key column "custmer" is not declared (did you mean "customer"?)`, false},
		{"key nullable", edit(t, "key: [company, customer]", "key: [company, credit]"), 7, `key column "credit" is nullable`, false},
		{"key text", edit(t, "{name: customer, type: string(10)}", "{name: customer, type: text}"), 7, `key column "customer" is text: a key column is string(N)`, false},
		{"key json", edit(t, "{name: customer, type: string(10)}", "{name: customer, type: json}"), 7, `key column "customer" is json`, false},
		{"key a map", edit(t, "key: [company, customer]", "key: {a: b}"), 7, "key: want a column or a list of columns, not a map", true},
		{"key too long", edit(t, "type: string(10)", "type: string(767)"), 7, "the key takes 3084 bytes of index, more than MySQL's 3072", false},
		{"key given twice in the list", edit(t, "key: [company, customer]", "key: [company, company]"), 7, `key column "company" given twice`, false},
		{"no key", edit(t, "    key: [company, customer]\n", ""), 5, "entity customers: no key", true},
		{"no source", edit(t, "    source: customers\n", ""), 5, "entity customers: no source", true},
		{"no updated_at", edit(t, "    updated_at: changed_at\n", ""), 5, "entity customers: no updated_at", true},
		{"no columns", strings.SplitAfter(good, "updated_at: changed_at\n")[0], 5, "entity customers: no columns", true},
		{"no name", edit(t, "  - name: customers\n    source", "  - source"), 5, "an entity without a name", true},
		{"source and sources", edit(t, "    source: customers\n", "    source: customers\n    sources: [{source: a}]\n"), 7, "source and sources: want one", true},
		{"set column not declared", edit(t, "    source: customers\n", "    sources: [{source: a, set: {compny: \"1\"}}, {source: b, set: {company: \"2\"}}]\n"), 6, `set: column "compny" is not declared (did you mean "company"?)`, false},
		{"set column not in the key", edit(t, "    source: customers\n", "    sources: [{source: a, set: {credit: \"1\"}}]\n"), 6, `set: column "credit" is not in the key`, false},
		{"set value too long", edit(t, "    source: customers\n", "    sources: [{source: a, set: {company: \"12345\"}}]\n"), 6, `set: company "12345": 5 characters, more than 4`, false},
		{"sources without set", edit(t, "    source: customers\n", "    sources: [{source: a, set: {company: \"1\"}}, {source: b}]\n"), 6, "source b without set", false},
		{"sources setting other columns", edit(t, "    source: customers\n", "    sources:\n      - {source: a, set: {company: \"1\"}}\n      - {source: b, set: {customer: \"1\"}}\n"), 8, "sets other columns than the first source (line 7)", false},
		{"sources setting one value", edit(t, "    source: customers\n", "    sources:\n      - {source: a, set: {company: \"1\"}}\n      - {source: b, set: {company: \"1\"}}\n"), 8, "their rows would collide", false},
		{"sources read the same records", edit(t, "    source: customers\n", "    sources:\n      - {source: customers, set: {company: \"1000\"}}\n      - {source: customers, set: {company: \"2000\"}}\n"), 8, "sources customers (line 7) and customers (line 8) would read the same records: both read /api/v1/customers with no params", false},
		{"sources of one path spelled twice", edit(t, "    source: customers\n", "    sources:\n      - {source: customers, set: {company: \"1000\"}}\n      - {source: /api/v1/customers, set: {company: \"2000\"}}\n"), 8, "would read the same records", false},
		{"sources with the same params", edit(t, "    source: customers\n", "    sources:\n      - {source: customers, set: {company: \"1000\"}, params: {co: \"1\"}}\n      - {source: customers, set: {company: \"2000\"}, params: {co: \"1\"}}\n"), 8, "both read /api/v1/customers with the params co=1", false},
		{"sources of one rest.path", edit(t, "    source: customers\n", "    rest: {path: /v2/c}\n    sources:\n      - {source: a, set: {company: \"1000\"}}\n      - {source: b, set: {company: \"2000\"}}\n"), 9, "both read /v2/c with no params", false},
		{"params for odata", strings.Replace(edit(t, "kind: rest", "kind: odata"), "    source: customers\n", "    sources:\n      - {source: C, set: {company: \"1000\"}, params: {co: \"1\"}}\n      - {source: C, set: {company: \"2000\"}}\n", 1), 7, "params: only for erp.kind rest", false},
		{"source params empty", edit(t, "    source: customers\n", "    sources: [{source: a, set: {company: \"1\"}, params: {}}]\n"), 6, "params: empty", true},
		{"source params bad name", edit(t, "    source: customers\n", "    sources: [{source: a, set: {company: \"1\"}, params: {\"a b\": x}}]\n"), 6, `params: "a b": want a query parameter name`, true},
		{"jobs differing in case", edit(t, "    source: customers\n", "    sources:\n      - {source: a, set: {company: \"ab\"}}\n      - {source: b, set: {company: \"AB\"}}\n"), 8, "its job customers/AB and the job customers/ab of the source on line 7 differ only in case", false},
		{"job too long", strings.Replace(edit(t, "{name: company, type: string(4)}", "{name: company, type: string(200)}"), "    source: customers\n", "    sources:\n      - {source: a, set: {company: \"1\"}}\n      - {source: b, set: {company: \""+strings.Repeat("x", 150)+"\"}}\n", 1), 8, "its job customers/xxx", false},
		{"values do not fit", edit(t, "{name: company, type: string(4)}", "{name: company, type: string(4), values: {a: ABCDE}}"), 10, `values: "a" stores "ABCDE", which does not fit string(4): 5 characters`, false},
		{"values do not fit int", edit(t, `{name: credit, type: "decimal(15,2)", nullable: true}`, `{name: credit, type: int32, nullable: true, values: {a: 3000000000}}`), 12, "does not fit int32", false},
		{"values do not fit decimal", edit(t, `nullable: true}`, `nullable: true, values: {a: 1.234}}`), 12, "more digits than decimal(15,2) holds", false},
		{"values a list", edit(t, `nullable: true}`, `nullable: true, values: [a]}`), 12, "values: want a map, not a list", true},
		{"duplicate entity", good + "  - {name: customers, source: x, key: id, updated_at: u, columns: [{name: id, type: int64}]}\n", 13, `entity "customers" declared twice (first on line 5)`, false},
		{"duplicate entity, own table", good + "  - {name: customers, table: c2, source: x, key: id, updated_at: u, columns: [{name: id, type: int64}]}\n", 13, `entity "customers" declared twice`, false},
		{"two entities one table", good + "  - {name: c2, table: customers, source: x, key: id, updated_at: u, columns: [{name: id, type: int64}]}\n", 13, `table "customers" is written by entity customers (line 5) already`, false},
		{"own table", edit(t, "    source: customers\n", "    source: customers\n    table: sync_runs\n"), 7, `table "sync_runs" is one of erpsync's own`, false},
		{"own table by name", edit(t, "name: customers", "name: sync_checkpoints"), 5, `table "sync_checkpoints" is one of erpsync's own`, false},
		{"every and cron", edit(t, "    source: customers\n", "    source: customers\n    every: 1m\n    cron: \"* * * * *\"\n"), 8, "every and cron: want one", true},
		{"bad every", edit(t, "    source: customers\n", "    source: customers\n    every: soon\n"), 7, `every "soon": want a duration`, false},
		{"every too short", edit(t, "    source: customers\n", "    source: customers\n    every: 10ms\n"), 7, "want at least 1s", false},
		{"cron with a zone", edit(t, "    source: customers\n", "    source: customers\n    cron: TZ=0\n"), 7, `cron "TZ=0": no time zone prefix`, false},
		{"bad cron", edit(t, "    source: customers\n", "    source: customers\n    cron: \"61 * * * *\"\n"), 7, `cron "61 * * * *"`, false},
		{"bad from", edit(t, "{name: company, type", "{name: company, from: Address..City, type"), 10, `from "Address..City": want a property name`, false},
		{"bad erp kind", edit(t, "kind: rest", "kind: soap"), 2, `erp.kind "soap": want rest or odata`, true},
		{"bad erp url", edit(t, "url: http://127.0.0.1:8090", "url: 127.0.0.1:8090"), 3, "erp.url: want a URL of http:// or https:// with a host", false},
		{"erp password without user", edit(t, "kind: rest\n", "kind: rest\n  password: hunter2\n"), 2, "a password without a username", false},
		{"erp two auths", edit(t, "kind: rest\n", "kind: rest\n  username: u\n  token: t\n"), 2, "more than one authentication", false},
		{"erp oauth incomplete", edit(t, "kind: rest\n", "kind: rest\n  oauth: {client_id: x}\n"), 3, "erp.oauth: want token_url, client_id and client_secret", false},
		{"erp paging for rest", edit(t, "kind: rest\n", "kind: rest\n  paging: server\n"), 3, "erp.paging: only for kind: odata", false},
		{"erp retries", edit(t, "kind: rest\n", "kind: rest\n  retries: 1000\n"), 3, "erp.retries: want 0..100", true},
		{"rest for odata", edit(t, "kind: rest", "kind: odata") + "    rest: {paging: offset}\n", 13, "rest: only for erp.kind rest", false},
		{"rest bad paging", good + "    rest: {paging: pages}\n", 13, `rest.paging "pages": want cursor or offset`, true},
		{"rest bad path", good + "    rest: {path: v2/x}\n", 13, `rest.path "v2/x": want a path like /v2/members/changes`, false},
		{"rest bad param", good + "    rest: {params: {sinse: from}}\n", 13, `unknown key "sinse" (did you mean "since"?)`, true},
		{"rest param twice", good + "    rest: {params: {since: a, until: a}}\n", 13, `parameter "a" stands for since too`, false},
		{"rest overlapping paths", good + "    rest: {records_path: result, cursor_path: result.next}\n", 13, "inside or around records_path", false},
		{"events without block", good + "    events: true\n", 13, "events: true without the file's events: block", false},
		{"events bad sink", "events: {sink: kafka, url: http://x}\n" + strings.TrimPrefix(good, ""), 1, `events.sink "kafka": want webhook, nats or rabbitmq`, true},
		{"events url scheme", "events: {sink: nats, url: http://x}\n" + good, 1, "events.url: want a URL of nats:// or tls://", false},
		{"events subject for webhook", "events: {sink: webhook, url: http://x, subject: a}\n" + good, 1, "events.subject: only for sink: nats", false},
		{"events unsigned for nats", "events: {sink: nats, url: nats://x, unsigned: true}\n" + good, 1, "events.unsigned: only for sink: webhook", true},
		{"events unsigned and a secret", "events: {sink: webhook, url: http://x, secret_file: /s, unsigned: true}\n" + good, 1, "events: unsigned: true and a secret: want one", true},
		{"events unsigned not a boolean", "events: {sink: webhook, url: http://x, unsigned: yes please}\n" + good, 1, "events.unsigned", true},
		{"database unknown key", "database:\n  kind: postgres\n  dns: postgres://h/db\n" + good, 3, `unknown key "dns" (did you mean "dsn"?)`, true},
		{"database unknown kind", "database:\n  kind: mariadb\n  dsn: root@tcp(h:3306)/db\n" + good, 2, `database.kind "mariadb": want mysql or postgres`, true},
		{"database dsn and dsn_file", "database:\n  kind: postgres\n  dsn: postgres://h/db\n  dsn_file: /run/secrets/dsn\n" + good, 4, "database: dsn and dsn_file: want one", true},
		{"database without a dsn", "erp: {kind: rest}\ndatabase:\n  kind: postgres\n" + strings.SplitAfter(good, "url: http://127.0.0.1:8090\n")[1], 3, "database: no dsn: want dsn: or dsn_file:", true},
		{"database dsn empty", "database: {kind: mysql, dsn: \"\"}\n" + good, 1, "database.dsn: empty", true},
		{"database dsn_file a list", "database:\n  dsn_file: [a]\n" + good, 2, "database.dsn_file: want a string, not a list", true},
		{"database a string", "database: postgres://h/db\n" + good, 1, "database: want a map, not a string", true},
		{"database dsn a number", "database:\n  dsn: 5432\n" + good, 2, "database.dsn: want a string, not a number (quote it)", true},
		{"child not declared key", good + "    children:\n      - {name: items, key: [line], columns: [{name: item, type: int32}]}\n", 14, `key column "line" is not declared`, false},
		{"child column is the parent key", good + "    children:\n      - {name: items, key: [company], columns: [{name: company, type: int32}]}\n", 14, "the child table has the parent's key column company", false},
		{"child key too long", edit(t, "type: string(10)", "type: string(760)") + "    children:\n      - {name: items, key: [line], columns: [{name: line, type: string(5)}]}\n", 14, "the parent key and the child key take 3076 bytes", false},
		{"child on the parent's table", good + "    children:\n      - {name: items, table: customers, key: [line], columns: [{name: line, type: int32}]}\n", 14, `table "customers" is written by entity customers`, false},
		{"children twice", good + "    children:\n      - {name: items, key: [line], columns: [{name: line, type: int32}]}\n      - {name: items, table: items2, key: [line], columns: [{name: line, type: int32}]}\n", 15, `child "items" declared twice`, false},
		{"child unknown key", good + "    children:\n      - {name: items, keys: [line], columns: [{name: line, type: int32}]}\n", 14, `unknown key "keys" (did you mean "key"?)`, true},
		{"child named like a column", good + "    children:\n      - {name: credit, table: credits, key: [line], columns: [{name: line, type: int32}]}\n", 14, `child "credit" is named like column credit`, false},
		{"child bad name", good + "    children:\n      - {name: Items, key: [line], columns: [{name: line, type: int32}]}\n", 14, `name "Items": want a lower-case name`, true},
	}
}

func TestBadFiles(t *testing.T) {
	for _, c := range badCases(t) {
		t.Run(c.name, func(t *testing.T) {
			_, err := entity.Parse("c.yaml", []byte(c.file))
			var fe *entity.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("err %v (%T), want a *FileError", err, err)
			}
			if fe.Path != "c.yaml" || fe.Line != c.line || !strings.Contains(fe.Msg, c.msg) {
				t.Errorf("got  %v\nwant c.yaml:%d: ...%s...", err, c.line, c.msg)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the message shows the password: %v", err)
			}
		})
	}
}
