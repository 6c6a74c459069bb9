// Package docscheck checks that the user documentation (README.md and
// docs/*.md) still describes the repository: every relative link resolves
// to a file (and to a heading, when it names one), every `make X` the docs
// show is a target of the Makefile, every flag that `erpsync <command> -h`
// prints is documented in docs/configuration.md, and every alert of
// deploy/prometheus/alerts.yml has a runbook heading in docs/operations.md
// (and every flag of `erpmock -h` appears in docs/connect-erp.md).
//
// Its test runs the checks on this repository (`make docs-check`, and
// `make test` through go test). A flag or command added without its
// documentation fails it, naming the file and what is missing.
//
// What it does NOT check: that the prose is true. A default changed in code
// but not in the table, or a figure that no longer holds, passes.
package docscheck

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Problem is one thing the docs get wrong: File (relative to the
// repository root) and what is missing there.
type Problem struct {
	File string
	Msg  string
}

func (p Problem) String() string { return p.File + ": " + p.Msg }

// DocFiles returns README.md and docs/*.md of the repository at root,
// relative to root.
func DocFiles(root string) ([]string, error) {
	files := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	for _, f := range more {
		files = append(files, filepath.Join("docs", filepath.Base(f)))
	}
	return files, nil
}

// mdFile is a markdown file split into its prose and its code (inline code
// spans and fenced blocks).
type mdFile struct {
	prose    []string // lines outside fenced blocks
	code     []string // fenced lines and inline code spans
	headings []string
}

var inlineCode = regexp.MustCompile("`[^`]+`")

func readMD(path string) (*mdFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	md := &mdFile{}
	fenced := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			md.code = append(md.code, line)
			continue
		}
		md.code = append(md.code, inlineCode.FindAllString(line, -1)...)
		md.prose = append(md.prose, line)
		if h, ok := strings.CutPrefix(line, "#"); ok {
			md.headings = append(md.headings, strings.TrimSpace(strings.TrimLeft(h, "#")))
		}
	}
	return md, sc.Err()
}

// Anchor is GitHub's anchor of a heading: lower case, punctuation but '-'
// and '_' dropped, spaces as '-'.
func Anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the anchors of md's headings, repeated ones numbered as
// GitHub numbers them (x, x-1, x-2).
func (md *mdFile) anchors() map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, h := range md.headings {
		a := Anchor(h)
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Links reports every relative link of files (relative to root) whose
// target file does not exist, or whose #anchor is no heading of the
// markdown file it points into.
func Links(root string, files []string) []Problem {
	var out []Problem
	cache := map[string]*mdFile{}
	load := func(rel string) (*mdFile, error) {
		if md, ok := cache[rel]; ok {
			return md, nil
		}
		md, err := readMD(filepath.Join(root, rel))
		cache[rel] = md
		return md, err
	}
	for _, f := range files {
		md, err := load(f)
		if err != nil {
			out = append(out, Problem{f, err.Error()})
			continue
		}
		for _, line := range md.prose {
			line = inlineCode.ReplaceAllString(line, "")
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				rel := f
				if path != "" {
					rel = filepath.Join(filepath.Dir(f), path)
					if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
						out = append(out, Problem{f, fmt.Sprintf("link %s: no file %s", target, rel)})
						continue
					}
				}
				if frag == "" || !strings.HasSuffix(rel, ".md") {
					continue
				}
				to, err := load(rel)
				if err != nil {
					out = append(out, Problem{f, fmt.Sprintf("link %s: %v", target, err)})
					continue
				}
				if !to.anchors()[frag] {
					out = append(out, Problem{f, fmt.Sprintf("link %s: no heading #%s in %s", target, frag, rel)})
				}
			}
		}
	}
	return out
}

var (
	// make as a command: at the start of a line (after a "$ " prompt), of
	// an inline code span, or after ; & | or (; not "make" in a comment.
	makeCmd    = regexp.MustCompile(`(?:^\s*(?:\$\s+)?|[;&|(]\s*|` + "`" + `)make\s+([a-z][a-z0-9_-]*)`)
	makeTarget = regexp.MustCompile(`(?m)^([A-Za-z0-9_.-]+(?:[ \t]+[A-Za-z0-9_.-]+)*)[ \t]*:([^=]|$)`)
)

// MakefileTargets returns the targets the Makefile at path defines.
func MakefileTargets(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, m := range makeTarget.FindAllStringSubmatch(string(b), -1) {
		for _, t := range strings.Fields(m[1]) {
			if !strings.HasPrefix(t, ".") {
				out[t] = true
			}
		}
	}
	return out, nil
}

// MakeTargets reports every `make X` in the code of files (fenced blocks
// and inline code spans) whose X is no target of the Makefile at root.
func MakeTargets(root string, files []string) []Problem {
	targets, err := MakefileTargets(filepath.Join(root, "Makefile"))
	if err != nil {
		return []Problem{{"Makefile", err.Error()}}
	}
	var out []Problem
	for _, f := range files {
		md, err := readMD(filepath.Join(root, f))
		if err != nil {
			out = append(out, Problem{f, err.Error()})
			continue
		}
		seen := map[string]bool{}
		for _, c := range md.code {
			for _, m := range makeCmd.FindAllStringSubmatch(c, -1) {
				if t := m[1]; !targets[t] && !seen[t] {
					seen[t] = true
					out = append(out, Problem{f, fmt.Sprintf("`make %s`: no target %s in the Makefile", t, t)})
				}
			}
		}
	}
	return out
}

// CommandFlags runs the erpsync binary bin: `bin help` for its commands,
// then `bin <command> -h` for each, and returns each command's flags
// (without dashes).
func CommandFlags(bin string) (map[string][]string, error) {
	help, err := exec.Command(bin, "help").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s help: %w\n%s", bin, err, help)
	}
	cmds := commands(string(help))
	if len(cmds) == 0 {
		return nil, fmt.Errorf("%s help lists no commands:\n%s", bin, help)
	}
	out := map[string][]string{}
	for _, c := range cmds {
		if out[c], err = UsageFlags(bin, c, "-h"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// UsageFlags runs bin with args (ending in -h) and returns the flags its
// usage text lists (without dashes).
func UsageFlags(bin string, args ...string) ([]string, error) {
	usage, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w\n%s", bin, strings.Join(args, " "), err, usage)
	}
	return flagNames(string(usage)), nil
}

// commands are the command names of the "Commands:" block of a help text.
func commands(help string) []string {
	_, block, ok := strings.Cut(help, "\nCommands:\n")
	if !ok {
		return nil
	}
	var out []string
	for _, line := range strings.Split(block, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(line, "  ") {
			break
		}
		out = append(out, f[0])
	}
	return out
}

var (
	flagLine = regexp.MustCompile(`(?m)^  --?([a-z0-9][a-z0-9-]*)`)
	// fileFlag is a secret's --x-file, which erpsync's -h names on the
	// line of --x.
	fileFlag = regexp.MustCompile(`\(or --([a-z0-9-]+-file) FILE\)`)
)

// flagNames are the flags of a usage text in the flag package's format
// (-name) or erpsync's grouped -h (--name).
func flagNames(usage string) []string {
	var out []string
	for _, m := range flagLine.FindAllStringSubmatch(usage, -1) {
		out = append(out, m[1])
	}
	for _, m := range fileFlag.FindAllStringSubmatch(usage, -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// CommonHeading is the heading of docs/configuration.md's section of the
// settings several commands share.
const CommonHeading = "Common settings"

// Flags reports, for the configuration page doc (relative to root), every
// command of cmds without a section (a heading that names `erpsync
// <command>`) and every flag of a command that neither its section nor the
// "Common settings" section mentions as --flag.
func Flags(root, doc string, cmds map[string][]string) []Problem {
	b, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		return []Problem{{doc, err.Error()}}
	}
	sections := map[string]string{} // heading -> its text, up to the next heading of any level
	var heading string
	var text strings.Builder
	flush := func() { sections[heading] += text.String(); text.Reset() }
	for _, line := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			flush()
			heading = strings.TrimSpace(strings.TrimLeft(h, "#"))
			continue
		}
		text.WriteString(line + "\n")
	}
	flush()
	common, hasCommon := sections[CommonHeading]
	var out []Problem
	if !hasCommon {
		out = append(out, Problem{doc, fmt.Sprintf("no section %q", CommonHeading)})
	}
	names := make([]string, 0, len(cmds))
	for c := range cmds {
		names = append(names, c)
	}
	slices.Sort(names)
	for _, c := range names {
		own, found := "", false
		for h, t := range sections {
			if strings.Contains(h, "`erpsync "+c+"`") || strings.Contains(h, "`erpsync "+c+" ") {
				own, found = own+t, true
			}
		}
		if !found {
			out = append(out, Problem{doc, fmt.Sprintf("no section for `erpsync %s` (a heading that names it)", c)})
		}
		for _, f := range cmds[c] {
			if !mentions(own, f) && !mentions(common, f) {
				out = append(out, Problem{doc, fmt.Sprintf("erpsync %s -h prints --%s, which neither the section of `erpsync %s` nor %q documents", c, f, c, CommonHeading)})
			}
		}
	}
	return out
}

// mentions reports whether text names --flag, not a longer flag that
// starts with it.
func mentions(text, flag string) bool {
	name := "--" + flag
	for i := 0; ; {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		end := i + j + len(name)
		if end == len(text) || !isFlagByte(text[end]) {
			return true
		}
		i = end
	}
}

func isFlagByte(c byte) bool { return c == '-' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// Mentioned reports every flag of flags (without dashes) that the page doc
// (relative to root) does not name as --flag; what says whose flags they
// are, for the message.
func Mentioned(root, doc, what string, flags []string) []Problem {
	b, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		return []Problem{{doc, err.Error()}}
	}
	var out []Problem
	for _, f := range flags {
		if !mentions(string(b), f) {
			out = append(out, Problem{doc, fmt.Sprintf("%s prints --%s, which the page does not document", what, f)})
		}
	}
	return out
}

var alertName = regexp.MustCompile(`(?m)^\s*-\s*alert:\s*([A-Za-z0-9_]+)`)

// Runbooks reports every alert of the rules file alerts (relative to root)
// that has no heading of its own name in doc.
func Runbooks(root, alerts, doc string) []Problem {
	b, err := os.ReadFile(filepath.Join(root, alerts))
	if err != nil {
		return []Problem{{alerts, err.Error()}}
	}
	md, err := readMD(filepath.Join(root, doc))
	if err != nil {
		return []Problem{{doc, err.Error()}}
	}
	var out []Problem
	for _, m := range alertName.FindAllStringSubmatch(string(b), -1) {
		if !slices.Contains(md.headings, m[1]) {
			out = append(out, Problem{doc, fmt.Sprintf("no runbook heading %q for the alert of %s", m[1], alerts)})
		}
	}
	return out
}
