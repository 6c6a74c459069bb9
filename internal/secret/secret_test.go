package secret_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/erpsync/erpsync/internal/secret"
)

func TestReadFileTrimsTrailingNewlines(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]string{
		"s3cret\n":       "s3cret",
		"s3cret\r\n":     "s3cret",
		"s3cret":         "s3cret",
		"s3cret\n\n":     "s3cret",
		" spaced pass\n": " spaced pass",
	} {
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := secret.ReadFile(p)
		if err != nil || got != want {
			t.Errorf("ReadFile(%q) = %q, %v; want %q", content, got, err, want)
		}
	}
}

func TestReadFileErrorsNameThePathNotTheContent(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	if _, err := secret.ReadFile(empty); !errors.Is(err, secret.ErrEmpty) || !strings.Contains(err.Error(), empty) {
		t.Errorf("empty file: %v, want ErrEmpty naming %s", err, empty)
	}
	missing := filepath.Join(dir, "missing")
	if _, err := secret.ReadFile(missing); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v, want ErrNotExist naming %s", err, missing)
	}
}

func TestRedactorMasksEveryFormAndLaterSecrets(t *testing.T) {
	var r secret.Redactor
	var buf bytes.Buffer
	w := r.Writer(&buf)
	fmt.Fprintln(w, "before: p@ss\"w/rd")
	r.Add("p@ss\"w/rd", "ab", "")
	fmt.Fprintln(w, `raw p@ss"w/rd json "p@ss\"w/rd" query p%40ss%22w%2Frd path p@ss%22w%2Frd short ab`)
	got := buf.String()
	want := "before: p@ss\"w/rd\nraw *** json \"***\" query *** path *** short ab\n"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

func TestRedactorLongestFirst(t *testing.T) {
	var r secret.Redactor
	r.Add("abcd", "xxabcdxx")
	if got := r.String("1 xxabcdxx 2 abcd"); got != "1 *** 2 ***" {
		t.Fatalf("got %q", got)
	}
}

func ExampleRedactor() {
	var r secret.Redactor
	r.Add("hunter22")
	fmt.Println(r.String("dial redis: WRONGPASS for hunter22"))
	// Output: dial redis: WRONGPASS for ***
}

// A secret that is one of the program's words stays masked in every value
// (a URL, a DSN, a header, a field's value, a JSON value) but not in the
// program's fixed texts (Keep) nor in the keys of a JSON log line.
func TestRedactorKeepsTheProgramsWordsAndMasksValues(t *testing.T) {
	var r secret.Redactor
	r.Add("erpsync")
	r.Keep("^erpsync: ", "erpsync migrate")
	for in, want := range map[string]string{
		"erpsync: typo1.yaml:16: unknown key \"colums\"\n":             "erpsync: typo1.yaml:16: unknown key \"colums\"\n",
		"erpsync: table customers does not exist; run erpsync migrate": "erpsync: table customers does not exist; run erpsync migrate",
		"erpsync: GET http://u:erpsync@erp/x: refused":                 "erpsync: GET http://u:***@erp/x: refused",
		"dsn root:erpsync@tcp(db:3306)/erpsync":                        "dsn root:***@tcp(db:3306)/***",
		"Authorization: Basic erpsync":                                 "Authorization: Basic ***",
		"password=erpsync token=xerpsyncx":                             "password=*** token=x***x",
		"not at a line start, erpsync: x":                              "not at a line start, ***: x",
		"erpsync: erpsync: x":                                          "erpsync: ***: x",
		"erpsync migrated":                                             "erpsync migrated", // inside the kept phrase
		"erpsync migrate\nerpsync: a\n x erpsync: b":                   "erpsync migrate\nerpsync: a\n x ***: b",
		`{"level":"error","erpsync":"erpsync","message":"erpsync"}`:    `{"level":"error","erpsync":"***","message":"***"}`,
		`{"error":"body {\"erpsync\":1}"}`:                             `{"error":"body {\"***\":1}"}`,
		`not json {"erpsync":1}`:                                       `not json {"***":1}`,
	} {
		if got := r.String(in); got != want {
			t.Errorf("%q:\n got %q\nwant %q", in, got, want)
		}
	}
}

// A secret that is a log field's name (the password "status") is left in
// the keys of a console log line, coloured or not, and masked as a value.
func TestRedactorKeepsConsoleKeys(t *testing.T) {
	var r secret.Redactor
	r.Add("status", "Status9")
	for in, want := range map[string]string{
		"07:00:00 INF run summary job=customers status=succeeded":  "07:00:00 INF run summary job=customers status=succeeded",
		"07:00:00 INF run summary \x1b[36mstatus=\x1b[0msucceeded": "07:00:00 INF run summary \x1b[36mstatus=\x1b[0msucceeded",
		"07:00:00 INF x password=status":                           "07:00:00 INF x password=***",
		"07:00:00 INF x url=http://u:status@h/?status=1":           "07:00:00 INF x url=http://u:***@h/?***=1",
		"07:00:00 INF x Status9=1 token=Status9":                   "07:00:00 INF x ***=1 token=***",
		`{"status":"status"}`:                                      `{"status":"***"}`,
	} {
		if got := r.String(in); got != want {
			t.Errorf("%q:\n got %q\nwant %q", in, got, want)
		}
	}
}

// A secret that is not a word is masked even inside the program's texts:
// "erpsync_" or "erpsync:" could be a value that looks like one of them.
func TestRedactorKeepsOnlyWords(t *testing.T) {
	var r secret.Redactor
	r.Add("erpsync_", "erpsync:")
	r.Keep("^erpsync: ", "erpsync_")
	for in, want := range map[string]string{
		"erpsync: x":              "*** x",
		"table erpsync_events":    "table ***events",
		"dsn u:erpsync_@tcp(h)/d": "dsn u:***@tcp(h)/d",
	} {
		if got := r.String(in); got != want {
			t.Errorf("%q:\n got %q\nwant %q", in, got, want)
		}
	}
}
