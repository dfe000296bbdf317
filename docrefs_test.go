// Everything the README and the docs pages name in the repository exists:
// a file or directory, a Go package, identifier or test, a `kaas`
// command, flag or bench scenario, a `make` target, a metric, a relative
// link and its #anchor. A doc that drifts from the code fails here, at the
// line that drifted; what the repository defines is indexed in
// docrefs_index_test.go.
//
// What counts as a reference, so that prose raises no false alarm:
//   - a path is a word, in backticks or a code block, whose first element
//     is a tracked top-level entry (`storage/slotlog`, `./cmd/kaas`,
//     `kaas/broker`, `Makefile`); `pkg/path.Ident` names a declaration
//     there too. A bare `file.go` is looked for in the directory its
//     paragraph last named, else anywhere. Upper-case parts (`NN`,
//     `KIND`), `<name>` and `*` are placeholders.
//   - `file.go` `Ident` (a file's span, then an identifier's) names a
//     declaration in that file; `pkg.Ident` one in the repository's
//     package of that name; `TestX`, `FuzzX` a test function.
//   - `--name` after `kaas COMMAND` must be one of that command's flags
//     (as its --help lists them), and a span that starts with `--` one of
//     any command's; the words after `kaas bench` are scenarios.
//   - `make TARGET` is a Makefile target; `kaas_...` a metric defined
//     under metrics/ (a histogram's _bucket, _sum and _count included).
//   - a link that is not a URL is relative to its page; its #anchor is a
//     heading of the page it names, as GitHub makes anchors.
package kaas_test

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

func TestDocReferences(t *testing.T) {
	repo, err := theRepo()
	if err != nil {
		t.Fatal(err)
	}
	docs := []string{"README.md"}
	err = filepath.WalkDir("docs", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			docs = append(docs, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	refs := 0
	for _, doc := range docs {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		n, problems := repo.checkDoc(doc, string(raw))
		refs += n
		for _, p := range problems {
			t.Error(p)
		}
	}
	if refs < 500 {
		t.Fatalf("only %d references checked in %d docs: is the scan looking in the right place?", refs, len(docs))
	}
	t.Logf("%d references checked in %d docs", refs, len(docs))
}

// A planted bad reference of each kind is reported, at its line, and the
// good ones beside them are not.
func TestDocReferencesCatchDrift(t *testing.T) {
	repo, err := theRepo()
	if err != nil {
		t.Fatal(err)
	}
	doc := "# Planted\n\n## A heading\n\n" +
		"Good: `storage/slotlog`, `storage/slotlog.Group`, `net/server/conn.go` `pump`, then `server.go` `dispatch`,\n" +
		"`kaas serve --listen :0`, `--fence-poll-interval`, `make test`, `kaas_fsyncs_total`,\n" +
		"`kaas_request_duration_seconds_bucket`, `kaas bench --duration 1s produce fence`, `brokertest.Eventually`,\n" +
		"`TestSpecIDs`, `broker/NN_*.go`, `<data>/__cluster/offsets/slot-NN.log`, `kaas/broker`,\n" +
		"`github.com/twmb/franz-go/pkg/kgo`, `kgo.Record`, `-race`, `kafka-acls.sh --add`,\n" +
		"[the spec](docs/spec/README.md), [rules](docs/spec/README.md#general-rules), [here](#a-heading), [kgo](https://pkg.go.dev/x).\n\n" +
		"- bad `broker/txn_slots.go`\n" +
		"- bad `storage/slotlog.NoSuchThing`\n" +
		"- bad `net/server/conn.go` `noSuchFunc`\n" +
		"- bad `kaas serve --no-such-flag`\n" +
		"- bad `--no-such-flag-anywhere`\n" +
		"- bad `make no-such-target`\n" +
		"- bad `kaas_no_such_metric_total`\n" +
		"- bad [gone](docs/no-such-page.md)\n" +
		"- bad [gone](#no-such-heading)\n" +
		"- bad [gone](docs/spec/README.md#no-such-heading)\n" +
		"- bad `kaas bench no-such-scenario`\n" +
		"- bad `kaas nosuchcommand`\n" +
		"- bad `TestNoSuchTest`\n" +
		"- bad `brokertest.NoSuchHelper`\n" +
		"- bad `github.com/nobody/nothing`\n" +
		"- bad `NoSuchFile.go`\n" +
		"\n```sh\n" +
		"kaas serve --data ./bad-dir \\\n  --no-such-continued-flag x   # reported on the line the command starts\n" +
		"make nor-this-one                # bad\n" +
		"go test ./no/such/dir/...        # fine: not a top-level entry\n" +
		"go test ./storage/nosuchpkg/...  # bad\n" +
		"```\n"
	_, problems := repo.checkDoc("planted.md", doc)
	reported := map[int]bool{}
	for _, p := range problems {
		n, _ := strconv.Atoi(strings.Split(p, ":")[1])
		reported[n] = true
	}
	for i, line := range strings.Split(doc, "\n") {
		if bad := strings.Contains(line, "bad"); bad != reported[i+1] {
			t.Errorf("line %d %q: reported %v", i+1, line, reported[i+1])
		}
	}
	if t.Failed() {
		t.Log(strings.Join(problems, "\n"))
	}
}

// A block is what a bare file name is resolved in: a paragraph, a list
// item, a table row or a heading, or one command line of a code block.
type block struct {
	line int // its first line, from 1
	text string
	code bool
}

var (
	fence     = regexp.MustCompile("^\\s*(```|~~~)")
	listItem  = regexp.MustCompile(`^\s*([-*+]|\d+\.)\s`)
	heading   = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	codeSpan  = regexp.MustCompile("`([^`]+)`")
	link      = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	fileIdent = regexp.MustCompile("`([^`\\s]+\\.go)`\\s+`([A-Za-z_]\\w*(?:\\.\\w+)?)`((?:\\s*/\\s*`[A-Za-z_]\\w*`)*)")
	moreIdent = regexp.MustCompile("`([A-Za-z_]\\w*)`")
	pkgIdent  = regexp.MustCompile(`^([a-z][a-z0-9]*)\.([A-Z]\w*(?:\.\w+)?)$`)
	testName  = regexp.MustCompile(`^(Test|Fuzz|Benchmark|Example)[A-Z0-9_]\w*$`)
	makeCall  = regexp.MustCompile(`(?:^|[\s(;&|])make\s+([a-z][\w-]*)`)
	kaasCall  = regexp.MustCompile(`(?:^|[\s/])kaas\s+([a-z]+)([^|;&#>\n]*)`)
	metricRef = regexp.MustCompile(`^kaas_[a-z0-9_]+`)
	hostName  = regexp.MustCompile(`^[a-z0-9-]+(\.[a-z0-9-]+)*\.[a-z]{2,}$`)
)

// splitBlocks cuts a markdown page into blocks, and lists its headings.
func splitBlocks(src string) (blocks []block, headings []string) {
	lines := strings.Split(src, "\n")
	var cur *block
	flush := func() {
		if cur != nil {
			blocks = append(blocks, *cur)
			cur = nil
		}
	}
	inCode := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case fence.MatchString(l):
			flush()
			inCode = !inCode
		case inCode:
			start := i
			for strings.HasSuffix(l, "\\") && i+1 < len(lines) { // a continued shell line
				i++
				l = strings.TrimSuffix(l, "\\") + " " + lines[i]
			}
			blocks = append(blocks, block{line: start + 1, text: l, code: true})
		case heading.MatchString(l):
			flush()
			h := heading.FindStringSubmatch(l)[2]
			headings = append(headings, h)
			blocks = append(blocks, block{line: i + 1, text: h})
		case strings.TrimSpace(l) == "":
			flush()
		default:
			if listItem.MatchString(l) || strings.HasPrefix(strings.TrimSpace(l), "|") {
				flush()
			}
			if cur == nil {
				cur = &block{line: i + 1, text: l}
			} else {
				cur.text += "\n" + l
			}
		}
	}
	flush()
	return blocks, headings
}

// anchors are the anchors GitHub gives a page's headings: lower case,
// spaces to hyphens, punctuation dropped, repeats numbered.
func anchors(headings []string) map[string]bool {
	out := map[string]bool{}
	for _, h := range headings {
		h = link.ReplaceAllString(h, "]")
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		s := b.String()
		for n := 1; out[s]; n++ {
			s = b.String() + "-" + strconv.Itoa(n)
		}
		out[s] = true
	}
	return out
}

// checkDoc returns how many references a page makes and what is wrong
// with them, each as "page:line: problem".
func (r *repoIndex) checkDoc(doc, src string) (refs int, problems []string) {
	blocks, headings := splitBlocks(src)
	own := anchors(headings)
	for _, b := range blocks {
		bad := func(off int, format string, args ...any) {
			line := b.line + strings.Count(b.text[:off], "\n")
			problems = append(problems, doc+":"+strconv.Itoa(line)+": "+fmt.Sprintf(format, args...))
		}
		if b.code {
			text, _, _ := strings.Cut(b.text, "#") // a shell comment
			refs += r.checkCommands(text, 0, false, bad)
			for _, tok := range pathTokens(text) {
				if r.isRepoPath(tok) {
					refs++
					if len(r.resolvePath(tok, "")) == 0 {
						bad(0, "`%s`: no such file or directory", tok)
					}
				}
			}
			continue
		}
		lastDir := ""
		files := map[int][]string{} // a span naming a .go file, by offset → the files it may be
		for _, m := range codeSpan.FindAllStringSubmatchIndex(b.text, -1) {
			span := b.text[m[2]:m[3]]
			refs += r.checkCommands(span, m[0], strings.HasPrefix(span, "--"), bad)
			refs += r.checkSpan(span, m[0], &lastDir, files, bad)
		}
		for _, m := range fileIdent.FindAllStringSubmatchIndex(b.text, -1) {
			in, ok := files[m[0]]
			if !ok {
				continue // the file itself was reported
			}
			idents := []string{b.text[m[4]:m[5]]}
			for _, x := range moreIdent.FindAllStringSubmatch(b.text[m[6]:m[7]], -1) {
				idents = append(idents, x[1])
			}
			for _, id := range idents {
				refs++
				if !r.anyDeclares(in, id) {
					bad(m[0], "`%s` declares no `%s`", strings.Join(in, "` or `"), id)
				}
			}
		}
		for _, m := range link.FindAllStringSubmatchIndex(b.text, -1) {
			refs++
			if msg := r.checkLink(doc, b.text[m[2]:m[3]], own); msg != "" {
				bad(m[0], "%s", msg)
			}
		}
	}
	return refs, problems
}

// checkCommands checks `make TARGET` and `kaas COMMAND --flag ...` in a
// span or a code line; with bareFlags, every --flag against any command.
func (r *repoIndex) checkCommands(text string, off int, bareFlags bool, bad func(int, string, ...any)) (refs int) {
	for _, m := range makeCall.FindAllStringSubmatch(text, -1) {
		refs++
		if !r.targets[m[1]] {
			bad(off, "`make %s`: no such target in the Makefile", m[1])
		}
	}
	if bareFlags {
		for _, f := range strings.Fields(text) {
			if name, ok := flagName(f); ok {
				refs++
				if _, ok := r.anyFlag[name]; !ok {
					bad(off, "`--%s`: no kaas command has this flag", name)
				}
			}
		}
	}
	for _, m := range kaasCall.FindAllStringSubmatch(text, -1) {
		refs++
		cmd, args := m[1], strings.Fields(strings.NewReplacer("[", " ", "]", " ").Replace(m[2]))
		flags, ok := r.commands[cmd]
		if !ok {
			bad(off, "`kaas %s`: no such command", cmd)
			continue
		}
		for i := 0; i < len(args); i++ {
			if name, ok := flagName(args[i]); ok {
				refs++
				takesValue, ok := flags[name]
				if !ok {
					bad(off, "`kaas %s --%s`: no such flag", cmd, name)
				}
				if takesValue && !strings.Contains(args[i], "=") {
					i++ // its value
				}
				continue
			}
			if cmd == "bench" && isWord(args[i]) {
				refs++
				if !r.scenarios[args[i]] {
					bad(off, "`kaas bench %s`: no such scenario (kaas bench list)", args[i])
				}
			}
		}
	}
	return refs
}

func flagName(s string) (string, bool) {
	if !strings.HasPrefix(s, "--") {
		return "", false
	}
	name, _, _ := strings.Cut(s[2:], "=")
	name = strings.TrimRight(name, ".,;:)")
	return name, name != "" && !strings.ContainsAny(name, "/")
}

// isWord: a lower-case argument, not a placeholder (SCENARIO) or a value.
func isWord(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return s != "" && s[0] >= 'a' && s[0] <= 'z'
}

// checkSpan checks one backticked span of prose: a test name, a metric, a
// package's identifier, or the paths in it.
func (r *repoIndex) checkSpan(span string, off int, lastDir *string, files map[int][]string, bad func(int, string, ...any)) (refs int) {
	switch m := pkgIdent.FindStringSubmatch(span); {
	case testName.MatchString(span):
		if !r.tests[span] {
			bad(off, "`%s`: no such test function", span)
		}
		return 1
	case metricRef.MatchString(span) && !strings.ContainsAny(span, " /"):
		name := metricRef.FindString(span)
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			if strings.HasSuffix(name, suffix) && r.metrics[strings.TrimSuffix(name, suffix)] {
				return 1
			}
		}
		bad(off, "`%s`: no such metric under metrics/", name)
		return 1
	case m != nil:
		dirs := r.pkgDirs[m[1]]
		if len(dirs) == 0 {
			return 0 // not one of ours: kgo.Record, time.Duration
		}
		if !r.anyDeclares(dirs, m[2]) {
			bad(off, "`%s`: %s declares no %s", span, strings.Join(dirs, ", "), m[2])
		}
		return 1
	}
	for _, tok := range pathTokens(span) {
		if isModulePath(tok) {
			refs++
			if !r.knownModule(tok) {
				bad(off, "`%s`: neither this module nor one of its go.mod requirements", tok)
			}
			continue
		}
		bare := !strings.Contains(tok, "/") && strings.HasSuffix(tok, ".go")
		if !bare && !r.isRepoPath(tok) {
			continue
		}
		refs++
		found := r.resolvePath(tok, *lastDir)
		if len(found) == 0 {
			bad(off, "`%s`: no such file or directory", tok)
			continue
		}
		if strings.HasSuffix(tok, ".go") && tok == strings.TrimSpace(span) {
			files[off] = found
		}
		if len(found) > 1 {
			continue // a bare name found in several places says nothing of where we are
		}
		if st, err := os.Stat(found[0]); err == nil && st.IsDir() {
			*lastDir = found[0]
		} else {
			*lastDir = filepath.Dir(found[0])
		}
	}
	return refs
}

// pathTokens splits a span or a code line into words that may be paths.
func pathTokens(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(c rune) bool {
		return unicode.IsSpace(c) || strings.ContainsRune(",;()[]{}\"'=`|", c)
	}) {
		f = strings.TrimRight(strings.TrimSuffix(f, "/..."), ".:")
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}

func isModulePath(tok string) bool {
	host, _, ok := strings.Cut(tok, "/")
	return ok && hostName.MatchString(host)
}

func (r *repoIndex) knownModule(tok string) bool {
	for _, m := range r.modules {
		if tok == m || strings.HasPrefix(tok, m+"/") || strings.HasPrefix(m, tok+"/") {
			return true
		}
	}
	return false
}

// isRepoPath: the word's first element is a tracked top-level entry.
func (r *repoIndex) isRepoPath(tok string) bool {
	if strings.Contains(tok, "://") {
		return false
	}
	first, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(tok, "./"), "kaas/"), "/")
	return r.top[first]
}

// resolvePath finds what a path word may name: a bare file name in dir,
// else wherever one of that name is; the path as written; a package path
// with a declared identifier after it; or a glob of its placeholders.
func (r *repoIndex) resolvePath(tok, dir string) []string {
	p := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(tok, "./"), "kaas/"), "/")
	if !strings.Contains(p, "/") && strings.HasSuffix(p, ".go") && !r.top[p] {
		if dir != "" && exists(filepath.Join(dir, p)) {
			return []string{filepath.Join(dir, p)}
		}
		if len(r.files[p]) > 0 {
			return r.files[p]
		}
	}
	if exists(p) {
		return []string{p}
	}
	if i := strings.LastIndex(p, "."); i > strings.LastIndex(p, "/") && i > 0 {
		pkg, ident := p[:i], p[i+1:]
		if exists(pkg) && r.declared(pkg)[ident] {
			return []string{pkg}
		}
		if j := strings.LastIndex(pkg, "."); j > strings.LastIndex(pkg, "/") && exists(pkg[:j]) && r.declared(pkg[:j])[pkg[j+1:]+"."+ident] {
			return []string{pkg[:j]} // pkg/path.Type.Method
		}
	}
	if glob := placeholders(p); glob != p && r.matches(glob) {
		return []string{glob}
	}
	return nil
}

func (r *repoIndex) anyDeclares(in []string, ident string) bool {
	for _, f := range in {
		if r.declared(f)[ident] {
			return true
		}
	}
	return false
}

// placeholders turns each upper-case or <bracketed> part of a path (parts
// are separated by / _ . -) into a glob's *.
func placeholders(p string) string {
	var b strings.Builder
	part := func(s string) {
		upper := s != "" && strings.IndexFunc(s, func(c rune) bool { return !unicode.IsUpper(c) }) < 0
		if upper || strings.HasPrefix(s, "<") && strings.HasSuffix(s, ">") {
			s = "*"
		}
		b.WriteString(s)
	}
	start := 0
	for i, c := range p {
		if strings.ContainsRune("/_.-", c) {
			part(p[start:i])
			b.WriteRune(c)
			start = i + 1
		}
	}
	part(p[start:])
	return b.String()
}

// matches: a file matches the glob (a bare name's glob: anywhere).
func (r *repoIndex) matches(glob string) bool {
	if strings.Contains(glob, "/") {
		m, _ := filepath.Glob(glob)
		return len(m) > 0
	}
	for base := range r.files {
		if ok, _ := path.Match(glob, base); ok {
			return true
		}
	}
	return false
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// checkLink checks a relative link's target and its #anchor.
func (r *repoIndex) checkLink(doc, target string, own map[string]bool) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	file, anchor, _ := strings.Cut(target, "#")
	in := own
	if file != "" {
		p := filepath.Join(filepath.Dir(doc), file)
		if !exists(p) {
			return "link to " + target + ": no such file or directory"
		}
		if anchor == "" {
			return ""
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return "link to " + target + ": " + err.Error()
		}
		_, hs := splitBlocks(string(raw))
		in = anchors(hs)
	}
	if anchor != "" && !in[anchor] {
		return "link to " + target + ": no heading with that anchor"
	}
	return ""
}
