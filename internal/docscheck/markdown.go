package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// page is one Markdown file of the documentation.
type page struct {
	Path  string // relative to the repository root, slash-separated
	Lines []string
}

// block is a fenced code block of a page.
type block struct {
	Line     int    // line number of the opening fence, from 1
	Info     string // the fence's info string, such as "sh runnable"
	Text     string // the lines between the fences, each ending in a newline
	Runnable bool   // a shell block marked runnable: the check runs it
}

// newPage splits the text of the page at path into lines.
func newPage(path, text string) page {
	return page{Path: path, Lines: strings.Split(strings.TrimSuffix(text, "\n"), "\n")}
}

// fence reads a line that opens or closes a fenced code block: up to three
// spaces, then three or more backticks, then the info string. It returns
// the number of backticks (0 when the line is no fence).
func fence(line string) (ticks int, info string) {
	trimmed := strings.TrimLeft(line, " ")
	if len(line)-len(trimmed) > 3 {
		return 0, ""
	}
	for ticks < len(trimmed) && trimmed[ticks] == '`' {
		ticks++
	}
	if ticks < 3 {
		return 0, ""
	}
	return ticks, strings.TrimSpace(trimmed[ticks:])
}

// runnableInfo reports whether a fence's info string marks a shell block
// the check runs: the language sh or bash, and the word runnable.
func runnableInfo(info string) bool {
	fields := strings.Fields(info)
	return len(fields) > 1 && (fields[0] == "sh" || fields[0] == "bash") && slices.Contains(fields[1:], "runnable")
}

// blocks returns the page's fenced code blocks in order, and the prose:
// the page's lines outside them (blank in their place, so that line
// numbers hold).
func (p page) blocks() ([]block, []string, error) {
	var (
		out   []block
		prose = make([]string, len(p.Lines))
		open  *block
		width int
		body  strings.Builder
	)
	for i, line := range p.Lines {
		ticks, info := fence(line)
		switch {
		case open == nil && ticks > 0:
			if strings.Contains(info, "`") {
				prose[i] = line // an inline code span at the start of a line, not a fence
				continue
			}
			open, width = &block{Line: i + 1, Info: info, Runnable: runnableInfo(info)}, ticks
			body.Reset()
		case open != nil && ticks >= width && info == "":
			open.Text = body.String()
			out = append(out, *open)
			open = nil
		case open != nil:
			body.WriteString(line)
			body.WriteByte('\n')
		default:
			prose[i] = line
		}
	}
	if open != nil {
		return nil, nil, fmt.Errorf("%s:%d: code block never closed", p.Path, open.Line)
	}
	return out, prose, nil
}

// A code span is text between single backticks on one line.
var codeSpan = regexp.MustCompile("`([^`\n]+)`")

// span is an inline code span of a page's prose.
type span struct {
	Line int
	Text string
}

// spans returns the inline code spans of the page's prose.
func (p page) spans() ([]span, error) {
	_, prose, err := p.blocks()
	if err != nil {
		return nil, err
	}
	var out []span
	for i, line := range prose {
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			out = append(out, span{Line: i + 1, Text: m[1]})
		}
	}
	return out, nil
}

// A Markdown link or image: [text](target) with no spaces in the target.
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// links returns the targets of the page's Markdown links, outside code.
func (p page) links() ([]span, error) {
	_, prose, err := p.blocks()
	if err != nil {
		return nil, err
	}
	var out []span
	for i, line := range prose {
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range markdownLink.FindAllStringSubmatch(line, -1) {
			out = append(out, span{Line: i + 1, Text: m[1]})
		}
	}
	return out, nil
}

// anchors returns the fragment ids of the page's headings as GitHub makes
// them: lower case, punctuation other than '-' and '_' dropped, spaces
// turned into '-', a repeated heading numbered.
// (Letters, digits, marks and connector punctuation such as '_' stay.)
func (p page) anchors() (map[string]bool, error) {
	_, prose, err := p.blocks()
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose {
		heading, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		heading = strings.TrimLeft(heading, "#")
		if !strings.HasPrefix(heading, " ") {
			continue
		}
		id := slug(heading)
		if n := seen[id]; n > 0 {
			out[fmt.Sprintf("%s-%d", id, n)] = true
		} else {
			out[id] = true
		}
		seen[id]++
	}
	return out, nil
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r) || unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
