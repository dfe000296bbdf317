package bench

import (
	"bytes"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

var sideColors = []color.Color{
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // kaas: red
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // kfake: blue
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
}

// WriteReport writes dir/report.md and, per scenario, PNG charts of
// throughput and latency over time for every side.
func WriteReport(dir string, outcomes []*Outcome) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report directory: %w", err)
	}
	var md bytes.Buffer
	fmt.Fprintf(&md, "# kaas bench report\n\n%s · %s · %d CPUs · %s/%s\n\n", time.Now().Format(time.RFC3339), runtime.Version(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	md.WriteString("Each scenario ran against each side in turn, in this one process (see docs/benchmarks.md). " +
		"Ratios are a side ÷ the reference side: above 1 the side has the higher rate; for p99 latency and CPU per op above 1 it is slower or costs more.\n")
	md.WriteString("\n## Summary\n\n")
	md.WriteString(summaryTable(outcomes))
	for _, out := range outcomes {
		s := out.Scenario
		fmt.Fprintf(&md, "\n## %s\n\n%s.\n\n%s.\n\n", s.Name, s.About, describeOpts(s, &out.Opts))
		fmt.Fprintf(&md, "| side | %s | %s | %s p50 | p99 | p999 |\n|---|---:|---:|---:|---:|---:|\n", headCol(s, out), secondCol(s), s.Latency)
		for _, r := range out.Results {
			if failed(r) {
				fmt.Fprintf(&md, "| %s | failed: %s | | | | |\n", r.Side, strings.ReplaceAll(oneLine(r.Err), "|", "/"))
				continue
			}
			fmt.Fprintf(&md, "| %s | %s | %s | %s | %s | %s |\n", r.Side, headline(s, r), second(s, r), dur(r.P50), dur(r.P99), dur(r.P999))
		}
		if line := ratioLine(out); line != "" {
			fmt.Fprintf(&md, "\n%s\n", line)
		}
		for _, r := range out.Results {
			if r.Err != nil && !failed(r) {
				fmt.Fprintf(&md, "\n- %s stopped early: %s", r.Side, oneLine(r.Err))
			}
			for _, n := range r.Notes {
				fmt.Fprintf(&md, "\n- %s: %s", r.Side, n)
			}
		}
		for _, line := range runLines(out) {
			fmt.Fprintf(&md, "\n- %s", line)
		}
		md.WriteString("\n")
		if !hasSeries(out) {
			continue
		}
		tp, lat := s.Name+"-throughput.png", s.Name+"-latency.png"
		if err := chartThroughput(filepath.Join(dir, tp), out); err != nil {
			return err
		}
		drawn, err := chartLatency(filepath.Join(dir, lat), out)
		if err != nil {
			return err
		}
		fmt.Fprintf(&md, "\n![%s throughput](%s)\n", s.Name, tp)
		if drawn {
			fmt.Fprintf(&md, "![%s latency](%s)\n", s.Name, lat)
		}
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), md.Bytes(), 0o644)
}

// summaryTable is the report's first table: a row per scenario and side
// compared with its reference (the ratios; with --repeat the medians of
// the per-run ratios and their range), or, for a scenario with one side,
// that side's own figures.
func summaryTable(outcomes []*Outcome) string {
	var b strings.Builder
	b.WriteString("| scenario | side ÷ reference | rate | p99 latency | CPU per op | load average |\n|---|---|---|---|---|---|\n")
	cell := func(s string) string { return strings.ReplaceAll(s, "|", "/") }
	for _, out := range outcomes {
		s := out.Scenario
		load := strings.TrimPrefix(loadRange(out), "load average ")
		cs := comparisons(out)
		for _, c := range cs {
			fmt.Fprintf(&b, "| %s | %s ÷ %s | %s | %s | %s | %s |\n", s.Name, c.side, c.ref, spread(c.rate), spread(c.p99), spread(c.cpu), load)
		}
		if len(cs) > 0 {
			continue
		}
		for i, r := range out.Results {
			if failed(r) {
				fmt.Fprintf(&b, "| %s | %s | failed: %s | | | %s |\n", s.Name, r.Side, cell(oneLine(r.Err)), load)
				continue
			}
			cpu := "-"
			if c := r.CPUPerOp(); c > 0 && r.ValueUnit == "" {
				cpu = durFine(c)
			}
			rate := headline(s, r)
			if v := headValue(s, r); v < 10 && r.ValueUnit == "" {
				rate = fmt.Sprintf("%.2f", v) // a slow op: a failover's kills/s
			}
			if v := headValues(out, i); len(out.Runs) > 1 && len(v) > 0 {
				rate = valueSpread(v) // the medians' run has the middle rate
			}
			fmt.Fprintf(&b, "| %s | %s | %s %s | %s %s | %s | %s |\n", s.Name, r.Side, rate, headCol(s, out), s.Latency, dur(r.P99), cpu, load)
		}
	}
	return b.String()
}

func hasSeries(out *Outcome) bool {
	for _, r := range out.Results {
		if len(r.Series) > 1 && r.ValueUnit == "" {
			return true
		}
	}
	return false
}

func newPlot(title, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

func addLine(p *plot.Plot, name string, c color.Color, dashed bool, pts plotter.XYs) error {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

func chartThroughput(path string, out *Outcome) error {
	s := out.Scenario
	unit := "records/s"
	rate := func(pt Point) float64 { return pt.RecordsSec }
	if s.Headline != "records" {
		unit = s.Headline + "/s"
		rate = func(pt Point) float64 { return pt.OpsSec }
	}
	p := newPlot(s.Name+": throughput", unit)
	for i, r := range out.Results {
		pts := make(plotter.XYs, 0, len(r.Series))
		for _, pt := range r.Series {
			pts = append(pts, plotter.XY{X: pt.At.Seconds(), Y: rate(pt)})
		}
		if len(pts) == 0 {
			continue
		}
		if err := addLine(p, r.Side, sideColors[i%len(sideColors)], false, pts); err != nil {
			return err
		}
	}
	return save(p, path)
}

// chartLatency draws the latency chart unless no side measured an op
// (drawn false: a log axis of nothing panics).
func chartLatency(path string, out *Outcome) (drawn bool, err error) {
	s := out.Scenario
	p := newPlot(s.Name+": "+s.Latency+" latency per interval (solid p50, dashed p99)", "milliseconds")
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	lines := 0
	for i, r := range out.Results {
		var p50, p99 plotter.XYs
		for _, pt := range r.Series {
			if pt.P50 <= 0 || pt.P99 <= 0 {
				continue // an interval without ops has no latency (and log scale needs > 0)
			}
			p50 = append(p50, plotter.XY{X: pt.At.Seconds(), Y: float64(pt.P50) / 1e6})
			p99 = append(p99, plotter.XY{X: pt.At.Seconds(), Y: float64(pt.P99) / 1e6})
		}
		if len(p50) == 0 {
			continue
		}
		c := sideColors[i%len(sideColors)]
		if err := addLine(p, r.Side+" p50", c, false, p50); err != nil {
			return false, err
		}
		if err := addLine(p, r.Side+" p99", c, true, p99); err != nil {
			return false, err
		}
		lines++
	}
	if lines == 0 {
		return false, nil
	}
	return true, save(p, path)
}

func save(p *plot.Plot, path string) error {
	p.Legend.Padding = vg.Points(2)
	if err := p.Save(9*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("writing chart %s: %w", path, err)
	}
	return nil
}
