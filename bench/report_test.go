package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The summary has a row of ratios per compared side (medians and range
// over the runs) and a single-sided scenario's own figures.
func TestSummaryTable(t *testing.T) {
	side := func(name string, records int64, p99 time.Duration, load float64) *Result {
		return &Result{Side: name, Elapsed: time.Second, Records: records, Ops: records, CPU: time.Duration(records) * time.Microsecond, P99: p99, Load: load}
	}
	produce := &Outcome{Scenario: &Scenario{Name: "produce", Headline: "records", Latency: "ack"}, Runs: [][]*Result{
		{side("kaas", 900, 2*time.Millisecond, 1.5), side("kfake", 1000, 4*time.Millisecond, 1.6)},
		{side("kaas", 1200, 3*time.Millisecond, 2.0), side("kfake", 1000, 3*time.Millisecond, 2.1)},
		{side("kaas", 1000, 4*time.Millisecond, 1.8), side("kfake", 1000, 4*time.Millisecond, 1.7)},
	}}
	produce.Results = medians(produce.Runs)
	failover := &Outcome{Scenario: &Scenario{Name: "failover", Headline: "kills", Latency: "takeover"},
		Runs: [][]*Result{{{Side: "kaas", Elapsed: 10 * time.Second, Ops: 3, P99: 2400 * time.Millisecond, Load: 3}}}}
	failover.Results = failover.Runs[0]

	got := summaryTable([]*Outcome{produce, failover})
	for _, want := range []string{
		"| scenario | side ÷ reference | rate | p99 latency | CPU per op | load average |",
		"| produce | kaas ÷ kfake | 1.00× (0.90–1.20×) | 1.00× (0.50–1.00×) | 1.00× (1.00–1.00×) | 1.5–2.1 |",
		"| failover | kaas | 0.30 kills/s | takeover 2.40s | - | 3.0 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks\n%s\ngot:\n%s", want, got)
		}
	}
}

// A scenario whose sides measured records but no op (no latency in any
// interval) gets its throughput chart and no latency chart, not a panic.
func TestReportWithoutLatency(t *testing.T) {
	series := []Point{{At: time.Second, RecordsSec: 10}, {At: 2 * time.Second, RecordsSec: 12}}
	out := &Outcome{Scenario: &Scenario{Name: "quiet", Headline: "records", Latency: "poll"},
		Results: []*Result{{Side: "kaas", Elapsed: 2 * time.Second, Records: 22, Series: series}}}
	out.Runs = [][]*Result{out.Results}
	dir := t.TempDir()
	if err := WriteReport(dir, []*Outcome{out}); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "quiet-throughput.png") || strings.Contains(string(md), "quiet-latency.png") {
		t.Fatalf("report.md links:\n%s", md)
	}
}

// A single-sided scenario repeated (compact-clean) has no ratio to take
// a range of: its headline's median and range, and each run's figures.
func TestRepeatedSingleSide(t *testing.T) {
	run := func(v, load float64) []*Result {
		return []*Result{{Side: "kaas", Elapsed: time.Second, Value: v, ValueUnit: "cleaner MB/s", Load: load, Summary: fmt.Sprintf("%.1f MB/s", v)}}
	}
	out := &Outcome{Scenario: &Scenario{Name: "compact-clean", Headline: "cleaner MB/s", Latency: "-"},
		Runs: [][]*Result{run(300, 1), run(500, 2), run(400, 3)}}
	out.Results = medians(out.Runs)
	var b strings.Builder
	printOutcome(&b, out)
	for _, want := range []string{"kaas: cleaner MB/s over 3 runs: median 400.0 (300.0–500.0)", "kaas run 1 (load average 1.0): 300.0 MB/s", "kaas run 3 (load average 3.0): 400.0 MB/s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	if got, want := summaryTable([]*Outcome{out}), "| compact-clean | kaas | median 400.0 (300.0–500.0) cleaner MB/s |"; !strings.Contains(got, want) {
		t.Errorf("summary lacks %q:\n%s", want, got)
	}
}
