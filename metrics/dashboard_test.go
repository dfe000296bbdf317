package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dashboardQueries returns every PromQL expression in the shipped Grafana
// dashboard.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	var exprs []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs
}

// metricName matches identifiers that name series in our expressions
// (kaas_, go_ and process_ families).
var metricName = regexp.MustCompile(`\b(?:kaas|go|process)_[a-zA-Z0-9_]+\b`)

// The dashboard must only query metrics the broker exports, so a renamed
// metric breaks this test instead of silently blanking a panel.
func TestDashboardQueriesOnlyExportedMetrics(t *testing.T) {
	names := New().Names()
	exprs := dashboardQueries(t)
	if len(exprs) < 20 {
		t.Fatalf("dashboard has %d queries; expected one per metric group", len(exprs))
	}
	used := map[string]bool{}
	for _, e := range exprs {
		for _, n := range metricName.FindAllString(e, -1) {
			family := n
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(n, suffix); ok && slices.Contains(names, base) {
					family = base
				}
			}
			if !slices.Contains(names, family) {
				t.Errorf("dashboard queries %s (in %q), which the broker does not export", n, e)
			}
			used[family] = true
		}
	}
	// Every kaas_ family should be on the dashboard.
	for _, n := range names {
		if strings.HasPrefix(n, "kaas_") && !used[n] {
			t.Errorf("metric %s is exported but on no dashboard panel", n)
		}
	}
}
