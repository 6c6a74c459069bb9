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
