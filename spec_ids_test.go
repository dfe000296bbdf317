// Every requirement id the code cites — a broker rule R-XXX-n, a scenario
// S-nn, an uncertainty U-n, or a scenario test named TestSnn_ — is
// defined in docs/spec, so a citation always leads to its text. Ids the
// spec defines and nothing cites are listed (go test -v -run SpecIDs), not
// failed: some rules are exercised without being named.
package kaas_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var (
	// A definition is the bold id opening a rule, scenario or register
	// entry: **R-IPI-3**, - **S-01**, - **U-1**.
	specDefinition = regexp.MustCompile(`\*\*((?:R-[A-Z]+|S|U)-\d+)\*\*`)
	// A citation may name several ids of one family: R-IPI-6,11,
	// R-MRK-4/5, R-RC-1..4, R-PV-9c (a clause of R-PV-9).
	specCitation = regexp.MustCompile(`\b(R-[A-Z]+|S|U)-(\d+)[a-z]?((?:(?:\.\.|, ?|/)\d+[a-z]?\b)*)`)
	scenarioTest = regexp.MustCompile(`\bTestS(\d{2})_`)
	clause       = regexp.MustCompile(`(\.\.|, ?|/)(\d+)`)
)

func TestSpecIDs(t *testing.T) {
	defined := map[string]bool{}
	specs, err := filepath.Glob("docs/spec/*.md")
	if err != nil || len(specs) == 0 {
		t.Fatalf("no spec in docs/spec (%v)", err)
	}
	for _, f := range specs {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range specDefinition.FindAllStringSubmatch(string(raw), -1) {
			defined[m[1]] = true
		}
	}
	cited := map[string][]string{} // id → where
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch {
			case d.Name() == ".git", d.Name() == "testdata", d.Name() == "node_modules", path == filepath.Join("docs", "spec"):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".md") {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for n, line := range strings.Split(string(raw), "\n") {
			where := path + ":" + strconv.Itoa(n+1)
			for _, id := range citedIDs(line) {
				cited[id] = append(cited[id], where)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cited) == 0 {
		t.Fatal("no citation found: is the scan looking in the right place?")
	}
	var missing []string
	for id, where := range cited {
		if !defined[id] {
			missing = append(missing, id+" (cited at "+strings.Join(where, ", ")+")")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("%s: not defined in docs/spec", m)
	}
	var uncited []string
	for id := range defined {
		if len(cited[id]) == 0 {
			uncited = append(uncited, id)
		}
	}
	sort.Slice(uncited, func(i, j int) bool { return idLess(uncited[i], uncited[j]) })
	t.Logf("%d ids defined, %d cited; defined but never cited (informational): %s",
		len(defined), len(cited), strings.Join(uncited, " "))
}

// citedIDs expands the citations on one line: R-IPI-6,11 (or 6/11) is
// R-IPI-6 and R-IPI-11, R-RC-1..4 is R-RC-1 to R-RC-4, TestS07_ is S-07.
func citedIDs(line string) []string {
	var out []string
	for _, m := range specCitation.FindAllStringSubmatch(line, -1) {
		family := m[1]
		id := func(n int) string {
			if family == "S" {
				return "S-" + pad2(n)
			}
			return family + "-" + strconv.Itoa(n)
		}
		prev, _ := strconv.Atoi(m[2])
		out = append(out, id(prev))
		for _, c := range clause.FindAllStringSubmatch(m[3], -1) {
			n, _ := strconv.Atoi(c[2])
			if c[1] == ".." {
				for i := prev + 1; i < n; i++ {
					out = append(out, id(i))
				}
			}
			out = append(out, id(n))
			prev = n
		}
	}
	for _, m := range scenarioTest.FindAllStringSubmatch(line, -1) {
		out = append(out, "S-"+m[1])
	}
	return out
}

func pad2(n int) string {
	if n < 10 {
		return "0" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}

// idLess orders ids by family, then number.
func idLess(a, b string) bool {
	ia, ib := strings.LastIndexByte(a, '-'), strings.LastIndexByte(b, '-')
	if a[:ia] != b[:ib] {
		return a[:ia] < b[:ib]
	}
	na, _ := strconv.Atoi(a[ia+1:])
	nb, _ := strconv.Atoi(b[ib+1:])
	return na < nb
}
