package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// maxReadmeLines bounds README.md: it is the entry, the manual is docs/.
const maxReadmeLines = 250

// docPatterns are the pages the check reads, relative to the repository
// root.
var docPatterns = []string{"README.md", "docs/*.md", "deploy/README.md"}

// outputs are paths that builds and runs create: a page may name them
// although a checkout has none.
var outputs = []string{"bin/", "bench-results/"}

// readPages reads the documentation pages under root.
func readPages(root string) ([]page, error) {
	var pages []page
	for _, pattern := range docPatterns {
		matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pattern)))
		if err != nil {
			return nil, err
		}
		if len(matches) == 0 {
			return nil, fmt.Errorf("no page matches %s under %s", pattern, root)
		}
		for _, m := range matches {
			b, err := os.ReadFile(m)
			if err != nil {
				return nil, err
			}
			rel, err := filepath.Rel(root, m)
			if err != nil {
				return nil, err
			}
			pages = append(pages, newPage(filepath.ToSlash(rel), string(b)))
		}
	}
	return pages, nil
}

// repo is what the pages are checked against: the files of the
// repository's code.
type repo struct {
	root    string
	tests   map[string]bool // Test, Benchmark and Fuzz functions declared in _test.go files
	metrics map[string]bool // bidgate_ series the code registers
	code    []byte          // every Go, shell, Makefile and YAML file, concatenated
}

var (
	testFunc  = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)\w+)\(`)
	metricDef = regexp.MustCompile(`(?s)(Counter|Gauge|Histogram|Summary)(?:Vec)?Opts\{\s*Name:\s*"(bidgate_[a-z0-9_]+)"`)
)

// loadRepo reads the code under root.
func loadRepo(root string) (*repo, error) {
	r := &repo{root: root, tests: map[string]bool{}, metrics: map[string]bool{}}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") && name != ".ci" || name == "bin" || name == "bench-results") {
				return filepath.SkipDir
			}
			return nil
		}
		code := strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".sh") || name == "Makefile" ||
			name == "run" || strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")
		if !code {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		r.code = append(r.code, b...)
		if strings.HasSuffix(name, "_test.go") {
			for _, m := range testFunc.FindAllSubmatch(b, -1) {
				r.tests[string(m[1])] = true
			}
		} else if strings.HasSuffix(name, ".go") {
			for _, m := range metricDef.FindAllSubmatch(b, -1) {
				kind, metric := string(m[1]), string(m[2])
				r.metrics[metric] = true
				if kind == "Histogram" || kind == "Summary" {
					r.metrics[metric+"_sum"], r.metrics[metric+"_count"] = true, true
				}
				if kind == "Histogram" {
					r.metrics[metric+"_bucket"] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(r.tests) < 50 || len(r.metrics) < 40 {
		return nil, fmt.Errorf("found only %d tests and %d metrics under %s: has their form changed?", len(r.tests), len(r.metrics), root)
	}
	return r, nil
}

var (
	testName   = regexp.MustCompile(`^(?:Test|Benchmark|Fuzz)[A-Z]\w*$`)
	metricName = regexp.MustCompile(`^bidgate_[a-z0-9_]+`)
	envName    = regexp.MustCompile(`^BIDGATE_[A-Z0-9_]+$`)
)

// checkStatic checks what the pages say about the repository without
// running anything: README.md's length, and that every path, test,
// metric and link they name exists. It returns one line per problem.
func checkStatic(pages []page, r *repo) []string {
	var problems []string
	add := func(p page, line int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: %s", p.Path, line, fmt.Sprintf(format, args...)))
	}
	byPath := map[string]page{}
	for _, p := range pages {
		byPath[p.Path] = p
	}
	for _, p := range pages {
		if p.Path == "README.md" && len(p.Lines) > maxReadmeLines {
			add(p, len(p.Lines), "README.md has %d lines; it is the entry, at most %d: move the rest to docs/", len(p.Lines), maxReadmeLines)
		}
		spans, err := p.spans()
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for _, s := range spans {
			fields := strings.Fields(s.Text)
			first := fields[0]
			if isPath(first) && !r.exists(p, first) {
				add(p, s.Line, "`%s` names a path that does not exist", first)
			}
			for _, f := range fields {
				if testName.MatchString(f) && !r.tests[f] {
					add(p, s.Line, "`%s` names a test that no _test.go file declares", f)
				}
			}
			if m := metricName.FindString(first); m != "" && !r.metrics[m] {
				add(p, s.Line, "`%s` names a metric the code does not register", m)
			}
		}
		links, err := p.links()
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for _, l := range links {
			if msg := r.checkLink(p, l.Text, byPath); msg != "" {
				add(p, l.Line, "link %s: %s", l.Text, msg)
			}
		}
	}
	return problems
}

// isPath reports whether a code span's first word reads as a relative
// path: it holds a slash, and nothing a pattern, a URL, a MIME type or a
// shell word would.
func isPath(word string) bool {
	return strings.Contains(word, "/") && !strings.ContainsAny(word[:1], "/.~") &&
		!strings.ContainsAny(word, "*{}<>$:|+=@,()'\"")
}

// exists reports whether path names a file or directory of the repository,
// from its root or from the directory of page p, or one that builds and
// runs create.
func (r *repo) exists(p page, path string) bool {
	for _, o := range outputs {
		if strings.HasPrefix(path, o) {
			return true
		}
	}
	for _, dir := range []string{".", filepath.Dir(filepath.FromSlash(p.Path))} {
		if _, err := os.Stat(filepath.Join(r.root, dir, filepath.FromSlash(path))); err == nil {
			return true
		}
	}
	return false
}

// checkLink says what is wrong with a link of page p to target, or "".
func (r *repo) checkLink(p page, target string, pages map[string]page) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	file, fragment, _ := strings.Cut(target, "#")
	dest := p.Path
	if file != "" {
		dest = path.Clean(path.Join(path.Dir(p.Path), file))
		if strings.HasPrefix(dest, "../") {
			return "leaves the repository"
		}
		if _, err := os.Stat(filepath.Join(r.root, filepath.FromSlash(dest))); err != nil {
			return "no such file"
		}
	}
	if fragment == "" {
		return ""
	}
	to, ok := pages[dest]
	if !ok {
		b, err := os.ReadFile(filepath.Join(r.root, filepath.FromSlash(dest)))
		if err != nil || !strings.HasSuffix(dest, ".md") {
			return "a fragment into a file that is not a Markdown page"
		}
		to = newPage(dest, string(b))
	}
	anchors, err := to.anchors()
	if err != nil {
		return err.Error()
	}
	if !anchors[fragment] {
		return fmt.Sprintf("%s has no heading #%s", dest, fragment)
	}
	return ""
}

// flags are the flags of the binaries, each with its defaults in the
// commands that take it ("" for a zero value).
type flags map[string][]string

// zeroDefaults are how a page writes the default of a flag whose -h shows
// none: its zero value.
var zeroDefaults = []string{"", "0", "false"}

// has reports whether some command's flag name has the default def.
func (f flags) has(name, def string) bool {
	for _, d := range f[name] {
		if d == def || d == "" && slices.Contains(zeroDefaults, def) {
			return true
		}
	}
	return false
}

// checkCommandLine checks the flags and environment variables the pages
// name against the binaries' flags: a code span that starts with --name
// must name a flag; a flag table's default, written as a code span or left
// empty, must be the flag's default in some command; BIDGATE_NAME must be a
// flag's variable or appear in the code.
func checkCommandLine(pages []page, r *repo, fl flags) []string {
	var problems []string
	for _, p := range pages {
		spans, err := p.spans()
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for _, s := range spans {
			first := strings.Fields(s.Text)[0]
			if name, ok := strings.CutPrefix(first, "--"); ok {
				name, _, _ = strings.Cut(name, "=")
				if fl[name] == nil {
					problems = append(problems, fmt.Sprintf("%s:%d: `--%s` is no flag of bidgate or bidbench", p.Path, s.Line, name))
				}
			}
			if envName.MatchString(first) {
				flag := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(first, "BIDGATE_")), "_", "-")
				if fl[flag] == nil && !bytes.Contains(r.code, []byte(first)) {
					problems = append(problems, fmt.Sprintf("%s:%d: `%s` is no flag's variable and the code never reads it", p.Path, s.Line, first))
				}
			}
		}
		rows, err := p.flagTable()
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for _, row := range rows {
			if fl[row.Flag] != nil && !fl.has(row.Flag, row.Default) {
				problems = append(problems, fmt.Sprintf("%s:%d: the table gives --%s the default %q; the binaries' -h says %q",
					p.Path, row.Line, row.Flag, row.Default, fl[row.Flag]))
			}
		}
	}
	return problems
}

// flagRow is a row of a flag table (a table whose columns start "flag",
// "default") that states one flag's default: the flag cell is one code span
// `--name`, the default cell one code span (not another flag) or empty.
type flagRow struct {
	Line          int
	Flag, Default string
}

// wholeSpan is a table cell that is exactly one code span.
var wholeSpan = regexp.MustCompile("^`([^`]*)`$")

// flagTable returns the rows of the page's flag tables that state a default.
func (p page) flagTable() ([]flagRow, error) {
	_, prose, err := p.blocks()
	if err != nil {
		return nil, err
	}
	var out []flagRow
	inTable := false
	for i, line := range prose {
		cells := tableCells(line)
		switch {
		case cells == nil:
			inTable = false
		case len(cells) >= 2 && cells[0] == "flag" && cells[1] == "default":
			inTable = true
		case inTable && len(cells) >= 2:
			m := wholeSpan.FindStringSubmatch(cells[0])
			if m == nil || !strings.HasPrefix(m[1], "--") {
				continue
			}
			def := wholeSpan.FindStringSubmatch(cells[1])
			switch {
			case def != nil && strings.HasPrefix(def[1], "--"):
				// The default is another flag's value.
			case def != nil:
				out = append(out, flagRow{Line: i + 1, Flag: strings.TrimPrefix(m[1], "--"), Default: def[1]})
			case cells[1] == "":
				out = append(out, flagRow{Line: i + 1, Flag: strings.TrimPrefix(m[1], "--")})
			}
		}
	}
	return out, nil
}

// tableCells splits a Markdown table row into its trimmed cells, or
// returns nil for a line that is no table row.
func tableCells(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") || len(line) < 2 {
		return nil
	}
	cells := strings.Split(line[1:len(line)-1], "|")
	for i, c := range cells {
		cells[i] = strings.TrimSpace(c)
	}
	return cells
}

// negated is a command whose status a leading ! inverts: bash -e never
// stops on it, so it checks nothing.
var negated = regexp.MustCompile(`^\s*!\s`)

// checkRunnable checks the runnable blocks for what bash -e does not check.
func checkRunnable(pages []page) []string {
	var problems []string
	for _, p := range pages {
		blocks, _, err := p.blocks()
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for _, b := range blocks {
			if !b.Runnable {
				continue
			}
			for i, line := range strings.Split(b.Text, "\n") {
				if negated.MatchString(line) {
					problems = append(problems, fmt.Sprintf("%s:%d: a command negated with ! checks nothing under bash -e; test the answer with [[ ]] or grep instead",
						p.Path, b.Line+1+i))
				}
			}
		}
	}
	return problems
}
