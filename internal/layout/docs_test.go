package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// maxReadmeLines is the longest README.md may be: a door a newcomer reads in
// ten minutes; everything else lives in docs/.
const maxReadmeLines = 300

// page is one Markdown file of the repository's documentation.
type page struct {
	rel   string   // path from the module's root, slash-separated
	lines []string // its lines
	fence []bool   // fence[i]: line i is inside a fenced code block, or is a fence
}

// pages reads README.md and every docs/*.md.
func pages(t *testing.T) []page {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	rels := []string{"README.md"}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		rels = append(rels, filepath.ToSlash(rel))
	}
	var out []page
	for _, rel := range rels {
		out = append(out, readPage(t, rel))
	}
	if len(out) < 5 {
		t.Fatalf("only %d documentation pages found", len(out))
	}
	return out
}

// readPage reads one Markdown file and marks its fenced code blocks.
func readPage(t *testing.T, rel string) page {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	p := page{rel: rel, lines: strings.Split(strings.TrimRight(string(b), "\n"), "\n")}
	in := false
	for _, l := range p.lines {
		isFence := strings.HasPrefix(strings.TrimSpace(l), "```")
		p.fence = append(p.fence, in || isFence)
		if isFence {
			in = !in
		}
	}
	return p
}

// prose is the page's text outside fenced code blocks, lines joined by spaces
// (an inline code span or a link may wrap across lines).
func (p page) prose() string {
	var b strings.Builder
	for i, l := range p.lines {
		if !p.fence[i] {
			b.WriteString(l)
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// code is every piece of code the page shows: each line of its fenced blocks,
// without a shell comment, and each inline code span.
func (p page) code() []string {
	var out []string
	for i, l := range p.lines {
		if p.fence[i] && !strings.HasPrefix(strings.TrimSpace(l), "```") {
			out = append(out, shComment.ReplaceAllString(l, ""))
		}
	}
	for _, m := range inlineCode.FindAllStringSubmatch(p.prose(), -1) {
		out = append(out, m[1])
	}
	return out
}

var (
	inlineCode = regexp.MustCompile("`([^`]+)`")
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*$`)
)

// anchors are the ids GitHub gives the page's headings.
func (p page) anchors() map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for i, l := range p.lines {
		m := heading.FindStringSubmatch(l)
		if p.fence[i] || m == nil {
			continue
		}
		slug := slugify(m[2])
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// slugify is GitHub's heading id: lower case, punctuation dropped, spaces as
// hyphens.
func slugify(h string) string {
	h = mdLink.ReplaceAllString(h, "]")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// TestReadmeShort: README.md is at most 300 lines.
func TestReadmeShort(t *testing.T) {
	p := readPage(t, "README.md")
	if n := len(p.lines); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, more than %d: move what a newcomer does not need first into a docs/ page and link it", n, maxReadmeLines)
	}
}

// TestReadmeLinksEveryDocsPage: every docs/*.md is linked from README.md, so a
// reader finds every page from the door.
func TestReadmeLinksEveryDocsPage(t *testing.T) {
	readme := readPage(t, "README.md")
	linked := map[string]bool{}
	for _, m := range mdLink.FindAllStringSubmatch(readme.prose(), -1) {
		target, _, _ := strings.Cut(m[1], "#")
		linked[path.Clean(target)] = true
	}
	for _, p := range pages(t)[1:] {
		if !linked[p.rel] {
			t.Errorf("README.md does not link %s: add it under \"Where to go next\"", p.rel)
		}
	}
}

// TestDocLinksResolve: every relative link in README.md and docs/*.md names a
// file or directory that exists, and an anchor into a Markdown page names one
// of its headings.
func TestDocLinksResolve(t *testing.T) {
	all := pages(t)
	anchors := map[string]map[string]bool{}
	for _, p := range all {
		anchors[p.rel] = p.anchors()
	}
	n := 0
	for _, p := range all {
		for _, m := range mdLink.FindAllStringSubmatch(p.prose(), -1) {
			if u, err := url.Parse(m[1]); err != nil || u.Scheme != "" {
				continue
			}
			n++
			target, anchor, _ := strings.Cut(m[1], "#")
			rel := p.rel
			if target != "" {
				rel = path.Clean(path.Join(path.Dir(p.rel), target))
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
					t.Errorf("%s: link %q: %s does not exist", p.rel, m[1], rel)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(rel, ".md") {
				continue
			}
			if _, ok := anchors[rel]; !ok {
				anchors[rel] = readPage(t, rel).anchors()
			}
			if !anchors[rel][anchor] {
				t.Errorf("%s: link %q: %s has no heading #%s", p.rel, m[1], rel, anchor)
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d relative links found: the scan missed the pages", n)
	}
}

var (
	goTest      = regexp.MustCompile(`go test\s([^#]*)`)
	runFlag     = regexp.MustCompile(`-(run|bench)[ =]('[^']*'|"[^"]*"|\S+)`)
	pkgArg      = regexp.MustCompile(`(?:^|\s)(\./\S*)`)
	makeTarget  = regexp.MustCompile(`(?:^|[\s;(&])make ([a-z][a-z-]*)`)
	effectdVerb = regexp.MustCompile(`(?:^|&&|;|\(|\|)\s*(?:\S*/)?effectd ([a-z][a-z-]*)`)
	shComment   = regexp.MustCompile(`(?:^|\s)#.*$`)
	goTestSpan  = regexp.MustCompile("`go test[^`]*`")
	testName    = regexp.MustCompile(`\b(Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*(…)?`)
)

// TestDocCommandsNameWhatExists: the commands the pages show name what the
// repository has: a `go test` command's packages exist and each alternative
// of its -run (or -bench) pattern matches a test there; every `make` target is
// in the Makefile; every `effectd` verb is one the binary takes; and every
// test a page names (a proof in the guarantee table, a test cited beside a
// figure) exists.
func TestDocCommandsNameWhatExists(t *testing.T) {
	tests := testFuncs(t)
	targets := makeTargets(t)
	verbs := effectdVerbs(t)
	checked := 0
	for _, p := range pages(t) {
		for _, c := range p.code() {
			for _, m := range goTest.FindAllStringSubmatch(c, -1) {
				checked++
				checkGoTest(t, p.rel, m[1], tests)
			}
			for _, m := range makeTarget.FindAllStringSubmatch(c, -1) {
				if !targets[m[1]] {
					t.Errorf("%s: `make %s`: no such target in the Makefile", p.rel, m[1])
				}
			}
			for _, m := range effectdVerb.FindAllStringSubmatch(c, -1) {
				if !verbs[m[1]] {
					t.Errorf("%s: `effectd %s`: effectd has no such command (cmd/effectd/run.go)", p.rel, m[1])
				}
			}
		}
		// a -run pattern in a `go test` command is checked as a pattern above
		for _, m := range testName.FindAllStringSubmatch(goTestSpan.ReplaceAllString(p.prose(), ""), -1) {
			name, prefix := strings.TrimSuffix(m[0], "…"), m[2] != ""
			if !slices.ContainsFunc(allNames(tests), func(n string) bool { return n == name || prefix && strings.HasPrefix(n, name) }) {
				t.Errorf("%s names %s, which no _test.go file defines", p.rel, m[0])
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d `go test` commands found: the scan missed the pages", checked)
	}
}

// checkGoTest checks one `go test` command's packages and -run or -bench pattern.
func checkGoTest(t *testing.T, rel, args string, tests map[string][]string) {
	t.Helper()
	var names []string
	for _, m := range pkgArg.FindAllStringSubmatch(args, -1) {
		dir := strings.TrimSuffix(strings.TrimSuffix(m[1], "..."), "/")
		if _, err := os.Stat(filepath.Join(root, dir)); err != nil {
			t.Errorf("%s: `go test %s`: package %s does not exist", rel, args, m[1])
		}
		if strings.HasSuffix(m[1], "...") {
			names = allNames(tests)
			continue
		}
		names = append(names, tests[path.Clean(dir)]...)
	}
	for _, m := range runFlag.FindAllStringSubmatch(args, -1) {
		pattern := strings.Trim(m[2], `'"`)
		if pattern == "^$" || pattern == "." {
			continue
		}
		first, _, _ := strings.Cut(pattern, "/") // the top-level part; subtests are not checked
		for _, alt := range strings.Split(first, "|") {
			re, err := regexp.Compile(alt)
			if err != nil {
				t.Errorf("%s: `go test %s`: -%s %q: %v", rel, args, m[1], pattern, err)
				continue
			}
			if !slices.ContainsFunc(names, re.MatchString) {
				t.Errorf("%s: `go test %s`: -%s %q matches no test in its packages", rel, args, m[1], alt)
			}
		}
	}
}

// testFuncs maps each package directory ("dispatcher", "cmd/effectd") to the
// Test, Benchmark and Fuzz functions of its _test.go files, every build tag
// included.
func testFuncs(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		for _, decl := range file.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Recv == nil {
				out[filepath.ToSlash(rel)] = append(out[filepath.ToSlash(rel)], fd.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// allNames is every test function of the module.
func allNames(tests map[string][]string) []string {
	var out []string
	for _, names := range tests {
		out = append(out, names...)
	}
	return out
}

// makeTargets are the Makefile's targets.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z-]*):`).FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = true
	}
	return out
}

// effectdVerbs are the commands effectd's run dispatches on.
func effectdVerbs(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "cmd", "effectd", "run.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`case ((?:"[a-z-]+",?\s*)+):`).FindAllStringSubmatch(string(b), -1) {
		for _, v := range regexp.MustCompile(`"([a-z-]+)"`).FindAllStringSubmatch(m[1], -1) {
			out[v[1]] = true
		}
	}
	if !out["serve"] {
		t.Fatal("no `serve` command found in cmd/effectd/run.go: the scan missed the dispatch")
	}
	return out
}
