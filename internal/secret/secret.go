// Package secret reads secret settings from files and keeps known secrets
// out of what a process writes.
//
// The rule erpsync follows for a secret setting X (a DSN, a password, a
// token): the value comes from --x or ERPSYNC_X, or from a file named by
// --x-file or ERPSYNC_X_FILE (a Kubernetes or Docker secret mount), whose
// trailing newlines are trimmed. ReadFile is that read.
//
// A Redactor replaces known secrets with "***" in strings and, through
// Writer, in everything written to a stream. It is a second line of defense:
// erpsync's own messages never format a secret, and the redactor catches
// what a dependency's error might echo. It does not promise more than it
// sees: a secret split across two Write calls, or transformed (hashed,
// base64-encoded), passes through, and secrets shorter than MinLen are not
// masked at all (masking "ab" would garble every line).
package secret

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
)

// ErrEmpty is returned by ReadFile for a file that holds nothing but
// whitespace.
var ErrEmpty = errors.New("secret: file is empty")

// ReadFile returns the content of the file at path without its trailing
// newlines ("\n" or "\r\n"). Its error names the path, never the content.
func ReadFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("secret: %w", err)
	}
	v := strings.TrimRight(string(b), "\r\n")
	if strings.TrimSpace(v) == "" {
		return "", fmt.Errorf("%w: %s", ErrEmpty, path)
	}
	return v, nil
}

// MinLen is the length below which a secret is not masked.
const MinLen = 4

// Mask replaces each secret.
const Mask = "***"

// Redactor replaces known secrets with Mask. Its zero value knows no secret;
// it is safe for concurrent use.
type Redactor struct {
	mu  sync.RWMutex
	old [][]byte // longest first, so that a secret inside another goes second
}

// Add makes r mask each secret of at least MinLen bytes, together with its
// JSON-escaped and URL-escaped forms when they differ.
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for _, o := range r.old {
		seen[string(o)] = true
	}
	for _, s := range secrets {
		if len(s) < MinLen {
			continue
		}
		j, _ := json.Marshal(s)
		for _, form := range []string{s, string(j[1 : len(j)-1]), url.QueryEscape(s), url.PathEscape(s)} {
			if !seen[form] {
				seen[form] = true
				r.old = append(r.old, []byte(form))
			}
		}
	}
	sort.Slice(r.old, func(i, j int) bool { return len(r.old[i]) > len(r.old[j]) })
}

// Bytes returns b with every known secret masked; b itself when none occurs.
func (r *Redactor) Bytes(b []byte) []byte {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, o := range r.old {
		if bytes.Contains(b, o) {
			b = bytes.ReplaceAll(b, o, []byte(Mask))
		}
	}
	return b
}

// String returns s with every known secret masked.
func (r *Redactor) String(s string) string { return string(r.Bytes([]byte(s))) }

// Writer returns a writer that masks the known secrets, those added later
// included, in each Write before passing it to w. A Write reports len(p) on
// success whatever the length of what reached w.
func (r *Redactor) Writer(w io.Writer) *Writer { return &Writer{r: r, w: w} }

// Writer is a stream whose secrets a Redactor masks.
type Writer struct {
	r *Redactor
	w io.Writer
}

// Write masks p and writes it to the underlying writer.
func (w *Writer) Write(p []byte) (int, error) {
	if _, err := w.w.Write(w.r.Bytes(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Redactor returns the redactor that masks w.
func (w *Writer) Redactor() *Redactor { return w.r }

// Unwrap returns the underlying writer (a terminal check looks for an
// *os.File there).
func (w *Writer) Unwrap() io.Writer { return w.w }
