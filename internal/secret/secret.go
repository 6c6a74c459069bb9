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
//
// A secret can be a word the program itself writes: the password "erpsync"
// is the program's name. Masking it in the program's fixed text ("erpsync:
// table customers does not exist; run erpsync migrate") would garble every
// line and, worse, tell the reader the secret: that text reads the same
// whatever the secret, so an occurrence there is no leak, while "***:" in
// its place is one. Keep declares those texts, and the keys of a JSON log
// line are kept too (a value's quotes are escaped, so an unescaped
// {"key": or ,"key": in a line that starts with { is always a key), and so
// are those of a console log line (key= after a space or the key's colour
// code, for a secret of a key's shape: lower-case letters and
// underscores). Every
// other occurrence is masked: in URLs, DSNs, headers, field values and the
// errors of dependencies alike.
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
	mu   sync.RWMutex
	old  [][]byte // longest first, so that a secret inside another goes second
	keep []phrase
}

// phrase is a fixed text of the program, at the start of a line only when
// lineStart.
type phrase struct {
	text      []byte
	lineStart bool
}

// Keep declares fixed texts of the program, in which a secret is left as
// it is (see the package documentation). A phrase that starts with "^"
// counts only at the start of a line (without the "^"). A phrase keeps only
// the occurrences of a secret that lie wholly inside it, and only of a
// secret that is a word (letters and digits).
func (r *Redactor) Keep(phrases ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range phrases {
		ph := phrase{text: []byte(strings.TrimPrefix(p, "^")), lineStart: strings.HasPrefix(p, "^")}
		if len(ph.text) > 0 {
			r.keep = append(r.keep, ph)
		}
	}
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

// Bytes returns b with every known secret masked, except inside the kept
// texts; b itself when no secret occurs.
func (r *Redactor) Bytes(b []byte) []byte {
	r.mu.RLock()
	defer r.mu.RUnlock()
	found := false
	for _, o := range r.old {
		if bytes.Contains(b, o) {
			found = true
			break
		}
	}
	if !found {
		return b
	}
	kept := r.keptSpans(b)
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		n := r.secretAt(b[i:], i, kept)
		if n == 0 {
			out = append(out, b[i])
			i++
			continue
		}
		out = append(out, Mask...)
		i += n
	}
	return out
}

// secretAt returns the length of the longest secret that starts b (at
// offset off of the whole) and is not wholly inside a kept span; 0 if none.
func (r *Redactor) secretAt(b []byte, off int, kept [][2]int) int {
	for _, o := range r.old {
		if !bytes.HasPrefix(b, o) {
			continue
		}
		inside := false
		for _, k := range kept {
			if k[0] <= off && off+len(o) <= k[1] && isWord(o) {
				inside = true
				break
			}
		}
		if !inside {
			return len(o)
		}
	}
	return 0
}

// isWord reports whether a secret is a word: letters and digits only.
// Only such a secret is left in the program's texts; one with other
// characters ("erpsync_", "erpsync:") could be a value that happens to
// look like part of a text, and is masked everywhere.
func isWord(b []byte) bool {
	for _, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// keptSpans returns the [start, end) spans of b that are the program's
// fixed text: the phrases of Keep and, in a line that starts with "{",
// each key of a secret's name written as {"key": or ,"key":.
func (r *Redactor) keptSpans(b []byte) [][2]int {
	var spans [][2]int
	for _, p := range r.keep {
		for i := 0; ; {
			j := bytes.Index(b[i:], p.text)
			if j < 0 {
				break
			}
			at := i + j
			if !p.lineStart || at == 0 || b[at-1] == '\n' {
				spans = append(spans, [2]int{at, at + len(p.text)})
			}
			i = at + 1
		}
	}
	for start := 0; start < len(b); {
		end := bytes.IndexByte(b[start:], '\n')
		if end < 0 {
			end = len(b)
		} else {
			end += start
		}
		if b[start] != '{' {
			spans = append(spans, consoleKeys(b[start:end], start, r.old)...)
		}
		if b[start] == '{' {
			for _, o := range r.old {
				for _, lead := range []byte{'{', ','} {
					key := append(append([]byte{lead, '"'}, o...), '"', ':')
					for i := start; i < end; {
						j := bytes.Index(b[i:end], key)
						if j < 0 {
							break
						}
						spans = append(spans, [2]int{i + j, i + j + len(key)})
						i += j + 1
					}
				}
			}
		}
		start = end + 1
	}
	return spans
}

// consoleKeys returns the spans of line (at offset off of the whole) that
// are keys of a console log line, each of secrets that is a key's shape
// (lower-case letters and underscores) written as key= after a space or
// after the colour code the console writer puts before a key.
func consoleKeys(line []byte, off int, secrets [][]byte) [][2]int {
	var spans [][2]int
	for _, o := range secrets {
		if !isKeyShape(o) {
			continue
		}
		key := append(append([]byte{}, o...), '=')
		for i := 0; ; {
			j := bytes.Index(line[i:], key)
			if j < 0 {
				break
			}
			at := i + j
			if at > 0 && line[at-1] == ' ' || bytes.HasSuffix(line[:at], []byte(consoleKeyColour)) {
				spans = append(spans, [2]int{off + at, off + at + len(key)})
			}
			i = at + 1
		}
	}
	return spans
}

// consoleKeyColour is the colour code zerolog's console writer puts before
// a field's key.
const consoleKeyColour = "\x1b[36m"

// isKeyShape reports whether a secret could be a log field's key: lower-case
// letters and underscores.
func isKeyShape(b []byte) bool {
	for _, c := range b {
		if !('a' <= c && c <= 'z' || c == '_') {
			return false
		}
	}
	return true
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
