package bench

import (
	"slices"
	"testing"
)

// TestRunSidesNarrowsAScenariosOwnSides: --sides picks among a scenario's
// own sides instead of being ignored by scenarios that have a list.
func TestRunSidesNarrowsAScenariosOwnSides(t *testing.T) {
	pair := &Scenario{}
	own := &Scenario{Sides: []string{"kaas", "kfake"}}
	cluster := &Scenario{Sides: []string{"kaas-1", "kaas-3"}}
	for _, c := range []struct {
		s     *Scenario
		flag  []string
		want  []string
		label string
	}{
		{pair, nil, []string{"kaas", "kfake"}, "default pair"},
		{pair, []string{"kfake", "kaas"}, []string{"kfake", "kaas"}, "flag order kept without a list"},
		{own, []string{"kaas"}, []string{"kaas"}, "own list narrowed"},
		{cluster, []string{"kaas"}, []string{"kaas-1", "kaas-3"}, "none named runs all"},
		{cluster, []string{"kaas-3"}, []string{"kaas-3"}, "one of a cluster pair"},
	} {
		if got := runSides(c.s, Options{Sides: c.flag}); !slices.Equal(got, c.want) {
			t.Errorf("%s: runSides = %v, want %v", c.label, got, c.want)
		}
	}
}
