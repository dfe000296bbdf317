package kaas_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// repoIndex is what the repository defines, as the doc-reference check
// (docrefs_test.go) looks things up.
type repoIndex struct {
	top       map[string]bool            // tracked top-level entries
	targets   map[string]bool            // Makefile targets
	commands  map[string]map[string]bool // kaas command → its flags → whether the flag takes a value
	anyFlag   map[string]bool            // every command's flags
	scenarios map[string]bool            // kaas bench scenarios, and all and list
	metrics   map[string]bool            // metric names defined under metrics/
	modules   []string                   // this module and its go.mod requirements
	pkgDirs   map[string][]string        // package directory name → directories
	tests     map[string]bool            // Test, Fuzz, Benchmark and Example functions
	files     map[string][]string        // file base name → paths

	mu    sync.Mutex
	decls map[string]map[string]bool // file or directory → its declarations
}

// theRepo is indexed once per test binary: it builds and asks the kaas
// binary for its flags.
var theRepo = sync.OnceValues(indexRepo)

func indexRepo() (*repoIndex, error) {
	r := &repoIndex{top: map[string]bool{}, targets: map[string]bool{}, metrics: map[string]bool{},
		pkgDirs: map[string][]string{}, tests: map[string]bool{}, files: map[string][]string{},
		decls: map[string]map[string]bool{}}
	out, err := exec.Command("git", "ls-files").Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	for _, f := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(f, "/")
		r.top[first] = true
	}
	for _, step := range []func() error{r.readMakefile, r.readModules, r.readCommands, r.walkSources} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

var makeTarget = regexp.MustCompile(`(?m)^([A-Za-z0-9_-]+)\s*:([^=]|$)`)

func (r *repoIndex) readMakefile() error {
	raw, err := os.ReadFile("Makefile")
	if err != nil {
		return err
	}
	for _, m := range makeTarget.FindAllStringSubmatch(string(raw), -1) {
		r.targets[m[1]] = true
	}
	if !r.targets["test"] || !r.targets["run"] {
		return errors.New("the Makefile has no run or test target: has its format changed?")
	}
	return nil
}

var goModPath = regexp.MustCompile(`(?m)^(?:module|require)?\s+([a-z0-9.-]+\.[a-z]{2,}/\S+|kaas)(?:\s|$)`)

func (r *repoIndex) readModules() error {
	raw, err := os.ReadFile("go.mod")
	if err != nil {
		return err
	}
	for _, m := range goModPath.FindAllStringSubmatch(string(raw), -1) {
		r.modules = append(r.modules, m[1])
	}
	return nil
}

var (
	commandLine = regexp.MustCompile(`(?m)^  kaas (\w+)( add)?`)
	flagLine    = regexp.MustCompile(`(?m)^  -([a-z0-9][a-z0-9-]*)( \S+)?$`)
)

// readCommands asks the kaas binary for its commands (`kaas help`), each
// command's flags (`kaas CMD --help`: a flag printed with a type takes a
// value) and the bench scenarios (`kaas bench list`). It runs the binary
// make test built (KAAS_TEST_BINARY), or builds one.
func (r *repoIndex) readCommands() error {
	bin := os.Getenv("KAAS_TEST_BINARY")
	if bin == "" {
		dir, err := os.MkdirTemp("", "kaas-docrefs-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "kaas")
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/kaas").CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/kaas: %w\n%s", err, out)
		}
	}
	run := func(args ...string) string {
		out, _ := exec.Command(bin, args...).CombinedOutput() // a usage may exit non-zero
		return string(out)
	}
	r.commands, r.anyFlag = map[string]map[string]bool{}, map[string]bool{"help": false}
	for _, m := range commandLine.FindAllStringSubmatch(run("help"), -1) {
		args := append(strings.Fields(m[2]), "--help")
		flags := map[string]bool{"help": false}
		for _, f := range flagLine.FindAllStringSubmatch(run(append([]string{m[1]}, args...)...), -1) {
			flags[f[1]] = f[2] != ""
			r.anyFlag[f[1]] = f[2] != ""
		}
		r.commands[m[1]] = flags
	}
	if len(r.commands["serve"]) < 20 || len(r.commands["bench"]) < 10 {
		return fmt.Errorf("kaas serve and bench --help listed %d and %d flags: has the help format changed?", len(r.commands["serve"]), len(r.commands["bench"]))
	}
	r.scenarios = map[string]bool{"all": true, "list": true}
	for _, line := range strings.Split(run("bench", "list"), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			r.scenarios[f[0]] = true
		}
	}
	if !r.scenarios["produce"] {
		return errors.New("kaas bench list names no produce scenario: has its format changed?")
	}
	return nil
}

var (
	metricName = regexp.MustCompile(`"(kaas_[a-z0-9_]+)"`)
	testFunc   = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark|Example)\w*)\(`)
)

// walkSources indexes the tracked top-level folders: files by base name,
// package directories by name, test functions, and the metric names
// metrics/ defines.
func (r *repoIndex) walkSources() error {
	walk := func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		r.files[d.Name()] = append(r.files[d.Name()], p)
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		dir := filepath.Dir(p)
		if name := filepath.Base(dir); !strings.HasSuffix(p, "_test.go") && !contains(r.pkgDirs[name], dir) {
			r.pkgDirs[name] = append(r.pkgDirs[name], dir)
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(p, "_test.go"):
			for _, m := range testFunc.FindAllStringSubmatch(string(raw), -1) {
				r.tests[m[1]] = true
			}
		case strings.HasPrefix(p, "metrics"+string(filepath.Separator)):
			for _, m := range metricName.FindAllStringSubmatch(string(raw), -1) {
				r.metrics[m[1]] = true
			}
		}
		return nil
	}
	for top := range r.top {
		if strings.HasPrefix(top, ".") {
			continue
		}
		if err := filepath.WalkDir(top, walk); err != nil {
			return err
		}
	}
	if len(r.metrics) < 20 {
		return fmt.Errorf("only %d metric names found in metrics/", len(r.metrics))
	}
	return nil
}

// declared lists the top-level names declared in one .go file or in the
// .go files of a directory: functions, methods (as Name and Type.Name),
// types, variables and constants.
func (r *repoIndex) declared(p string) map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d, ok := r.decls[p]; ok {
		return d
	}
	d := map[string]bool{}
	files := []string{p}
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		files, _ = filepath.Glob(filepath.Join(p, "*.go"))
	}
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			continue // not Go, or not yet: the build reports it
		}
		for _, decl := range af.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				d[decl.Name.Name] = true
				if decl.Recv != nil && len(decl.Recv.List) == 1 {
					if recv := receiverName(decl.Recv.List[0].Type); recv != "" {
						d[recv+"."+decl.Name.Name] = true
					}
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						d[spec.Name.Name] = true
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							d[n.Name] = true
						}
					}
				}
			}
		}
	}
	r.decls[p] = d
	return d
}

func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
