package metrics

import (
	"regexp"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
)

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Names lists every metric family the registry can report, whether or not
// it has a sample yet (a label vector nobody has touched reports nothing
// on a scrape). The dashboard test checks its queries against it.
func (m *Metrics) Names() []string {
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range m.collectors {
			c.Describe(ch)
		}
		close(ch)
	}()
	seen := map[string]bool{}
	for d := range ch {
		// Desc has no accessor for its name; its String form is stable
		// across client_golang releases.
		if sm := fqName.FindStringSubmatch(d.String()); sm != nil {
			seen[sm[1]] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
