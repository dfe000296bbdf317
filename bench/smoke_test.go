package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	MaybeRunChild() // the rss scenario re-executes this test binary as a broker
	os.Exit(m.Run())
}

// kaasLacks lists the scenarios kaas cannot run yet and the issue whose
// work makes them run. The smoke test fails when one starts working, so
// the entry gets removed and the scenario is checked from then on.
var kaasLacks = map[string]string{}

// Every scenario runs for a fraction of a second against kfake and an
// in-process kaas (the cluster scenarios: against their broker processes,
// one kill or bump each), produces figures, and a report with charts is
// written.
// This keeps the harness from rotting; it measures nothing.
func TestEveryScenarioRunsAgainstBothSides(t *testing.T) {
	var out bytes.Buffer
	o := Defaults()
	o.Duration = 300 * time.Millisecond
	o.Partitions = 3
	o.FencePartitions = 50
	o.CompactKeys = 20000
	o.CompactTable = 20000
	o.Consumers = 3
	o.Rate = 2000
	o.FencePoll = 200 * time.Millisecond // fence-ring: a bump is seen within one poll
	// Long enough for kaas's initial group rebalance delay (3 s, extended
	// as members trickle in), as Apache has it.
	o.SetupTimeout = 15 * time.Second
	o.Out = &out
	o.TempDir = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var outcomes []*Outcome
	for _, s := range Scenarios() {
		t.Run(s.Name, func(t *testing.T) {
			oc := Run(ctx, s, o)
			outcomes = append(outcomes, oc)
			if want := max(2, len(s.Sides)); len(s.Sides) != 1 && len(oc.Results) < want {
				t.Fatalf("%d sides ran, want at least %d", len(oc.Results), want)
			}
			for _, r := range oc.Results {
				if issue := kaasLacks[s.Name]; issue != "" && r.Side == "kaas" {
					if r.Err == nil {
						t.Errorf("kaas now runs %s: delete it from kaasLacks (%s)", s.Name, issue)
					}
					continue
				}
				if r.Err != nil {
					t.Errorf("%s: %v", r.Side, r.Err)
					continue
				}
				if r.Ops == 0 && r.ValueUnit == "" {
					t.Errorf("%s: no ops measured", r.Side)
				}
				if r.ValueUnit != "" && r.Value <= 0 {
					t.Errorf("%s: %s = %v", r.Side, r.ValueUnit, r.Value)
				}
			}
		})
	}
	// compact-clean has one side and no ratio: repeated, it reports each
	// run; --compact-keys 0 leaves out the many-keys partition, not the
	// table.
	t.Run("compact-clean-table-only-repeated", func(t *testing.T) {
		s, _ := Lookup("compact-clean")
		var own bytes.Buffer
		o := o
		o.CompactKeys, o.Repeat, o.Out = 0, 2, &own
		oc := Run(ctx, s, o)
		if len(oc.Runs) != 2 {
			t.Fatalf("%d runs, want 2", len(oc.Runs))
		}
		for _, run := range oc.Runs {
			if r := run[0]; r.Err != nil || r.Value <= 0 || !strings.Contains(r.Summary, "O_DIRECT read") || strings.Contains(r.Summary, "RSS") {
				t.Errorf("run: err %v, %s %v, summary %q", r.Err, r.ValueUnit, r.Value, r.Summary)
			}
		}
		printed := own.String()
		for _, want := range []string{"table: 20000 records", "cleaner, table of 200-byte", "kaas: cleaner MB/s over 2 runs: median", "kaas run 1 (load average", "kaas run 2 (load average"} {
			if !strings.Contains(printed, want) {
				t.Errorf("output lacks %q:\n%s", want, printed)
			}
		}
		for _, unwanted := range []string{"zero values", "memory: broker RSS"} {
			if strings.Contains(printed, unwanted) {
				t.Errorf("output has %q with --compact-keys 0:\n%s", unwanted, printed)
			}
		}
	})

	printed := out.String()
	for _, want := range []string{"== produce:", "ratio kaas/kfake", "ratio kaas-actor/protoactor", "RSS MiB", "ratio kaas-sasl_ssl/kaas-plaintext", "ratio kaas-3/kaas-1", "goal: p99 takeover", "refused with"} {
		if !strings.Contains(printed, want) {
			t.Errorf("output lacks %q:\n%s", want, printed)
		}
	}

	dir := t.TempDir()
	if err := WriteReport(dir, outcomes); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Summary", "| produce | kaas ÷ kfake |", "## produce", "| kaas |", "produce-throughput.png", "produce-latency.png"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, png := range []string{"produce-throughput.png", "produce-latency.png", "actor-latency.png"} {
		b, err := os.ReadFile(filepath.Join(dir, png))
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s is not a PNG (%v)", png, err)
		}
	}
	if t.Failed() {
		t.Log(printed)
	}
}
