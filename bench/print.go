package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// printOutcome writes the comparison table of one scenario.
func printOutcome(w io.Writer, out *Outcome) {
	s, o := out.Scenario, out.Opts
	fmt.Fprintf(w, "\n== %s: %s\n   %s\n", s.Name, s.About, describeOpts(s, &o))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := []string{"side", headCol(s, out), secondCol(s), s.Latency + " p50", "p99", "p999"}
	keep := columnsShown(s, out)
	row := func(cells ...string) {
		for i, c := range cells {
			if keep[i] {
				fmt.Fprintf(tw, "%s\t", c)
			}
		}
		fmt.Fprintln(tw)
	}
	row(cols...)
	for _, r := range out.Results {
		if failed(r) {
			row(r.Side, "failed", "-", "-", "-", "-")
			continue
		}
		row(r.Side, headline(s, r), second(s, r), dur(r.P50), dur(r.P99), dur(r.P999))
	}
	tw.Flush()
	for _, r := range out.Results {
		switch {
		case failed(r):
			fmt.Fprintf(w, "   %s failed: %v\n", r.Side, oneLine(r.Err))
		case r.Err != nil:
			fmt.Fprintf(w, "   %s stopped early: %v\n", r.Side, oneLine(r.Err))
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "   %s: %s\n", r.Side, n)
		}
		if c := r.CPUPerOp(); c > 0 && r.ValueUnit == "" {
			fmt.Fprintf(w, "   %s: process CPU (client and broker) %s per %s\n", r.Side, durFine(c), perWhat(out))
		}
	}
	if line := ratioLine(out); line != "" {
		fmt.Fprintf(w, "   %s\n", line)
	}
	for _, line := range runLines(out) {
		fmt.Fprintf(w, "   %s\n", line)
	}
}

// columnsShown drops the second column when no side moved records (an op
// scenario) and the latency columns when nothing was timed (rss).
func columnsShown(s *Scenario, out *Outcome) []bool {
	keep := []bool{true, true, true, true, true, true}
	var records, ops int64
	for _, r := range out.Results {
		records += r.Records
		ops += r.Ops
	}
	if s.Headline != "records" && records == 0 {
		keep[2] = false
	}
	if ops == 0 {
		keep[2], keep[3], keep[4], keep[5] = false, false, false, false
	}
	return keep
}

func describeOpts(s *Scenario, o *Options) string {
	if s.Params != nil {
		return s.Params(o)
	}
	payload := o.Payload
	if payload == "" {
		payload = PayloadRandom
	}
	return fmt.Sprintf("%d-byte %s records, %d partitions, %v measured per side", o.RecordSize, payload, o.Partitions, o.Duration)
}

func headCol(s *Scenario, out *Outcome) string {
	for _, r := range out.Results {
		if r.ValueUnit != "" {
			return r.ValueUnit
		}
	}
	if s.Headline == "records" {
		return "records/s"
	}
	return s.Headline + "/s"
}

func secondCol(s *Scenario) string {
	if s.Headline == "records" {
		return "MB/s"
	}
	return "records/s"
}

// headline is the main figure of a side.
func headline(s *Scenario, r *Result) string {
	switch {
	case r.ValueUnit != "":
		return fmt.Sprintf("%.1f", r.Value)
	case s.Headline == "records":
		return commas(r.RecordsSec())
	}
	return commas(r.OpsSec())
}

func headValue(s *Scenario, r *Result) float64 {
	switch {
	case r.ValueUnit != "":
		return r.Value
	case s.Headline == "records":
		return r.RecordsSec()
	}
	return r.OpsSec()
}

func second(s *Scenario, r *Result) string {
	if r.ValueUnit != "" {
		return "-"
	}
	if s.Headline == "records" {
		return fmt.Sprintf("%.1f", r.MBSec())
	}
	if r.Records == 0 {
		return "-"
	}
	return commas(r.RecordsSec())
}

// comparison is one side measured against the scenario's reference side
// (its Reference, or the second side: kfake, or bare protoactor): the
// per-run ratios of the rate (above 1: the side is faster), of p99
// latency (above 1: the side is slower) and of process CPU per record or
// op (above 1: the side costs more).
type comparison struct {
	side, ref      string
	rate, p99, cpu []float64
}

func comparisons(out *Outcome) []comparison {
	if len(out.Results) < 2 {
		return nil
	}
	refAt := 1
	for i, r := range out.Results {
		if out.Scenario.Reference != "" && r.Side == out.Scenario.Reference {
			refAt = i
		}
	}
	runs := out.Runs
	if len(runs) == 0 {
		runs = [][]*Result{out.Results}
	}
	var cs []comparison
	for i, a := range out.Results {
		if i == refAt {
			continue
		}
		c := comparison{side: a.Side, ref: out.Results[refAt].Side}
		for _, run := range runs {
			if len(run) <= max(i, refAt) {
				continue
			}
			a, ref := run[i], run[refAt]
			if failed(a) || failed(ref) {
				continue
			}
			if bv := headValue(out.Scenario, ref); bv != 0 {
				c.rate = append(c.rate, headValue(out.Scenario, a)/bv)
			}
			if a.P99 > 0 && ref.P99 > 0 {
				c.p99 = append(c.p99, float64(a.P99)/float64(ref.P99))
			}
			if a.CPUPerOp() > 0 && ref.CPUPerOp() > 0 && a.ValueUnit == "" {
				c.cpu = append(c.cpu, float64(a.CPUPerOp())/float64(ref.CPUPerOp()))
			}
		}
		if len(c.rate) > 0 {
			cs = append(cs, c)
		}
	}
	return cs
}

// ratioLine prints the comparisons of a scenario on one line. With
// repeated runs each figure is the median of the per-run ratios, with
// their range.
func ratioLine(out *Outcome) string {
	var parts []string
	for _, c := range comparisons(out) {
		line := fmt.Sprintf("ratio %s/%s: %s %s", c.side, c.ref, headCol(out.Scenario, out), spread(c.rate))
		if len(c.p99) > 0 {
			line += ", p99 latency " + spread(c.p99)
		}
		if len(c.cpu) > 0 {
			line += fmt.Sprintf(", CPU per %s %s", perWhat(out), spread(c.cpu))
		}
		parts = append(parts, line)
	}
	if len(parts) == 0 {
		return ""
	}
	line := strings.Join(parts, "; ")
	if len(out.Runs) > 1 {
		line += fmt.Sprintf(" (medians of %d runs, sides alternating)", len(out.Runs))
	}
	if l := loadRange(out); l != "" {
		line += "; " + l
	}
	return line
}

// perWhat names the unit CPUPerOp divides by.
func perWhat(out *Outcome) string {
	for _, r := range out.Results {
		if r.Records > 0 {
			return "record"
		}
	}
	return strings.TrimSuffix(out.Scenario.Headline, "s")
}

func failed(r *Result) bool {
	return r.Err != nil && r.Ops == 0 && r.Records == 0 && r.ValueUnit == ""
}

func dur(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < 10*time.Microsecond:
		return fmt.Sprintf("%.2fµs", float64(d)/1e3)
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// durFine prints short durations with three significant digits.
func durFine(d time.Duration) string {
	if d < time.Microsecond {
		return fmt.Sprintf("%dns", d.Nanoseconds())
	}
	if d < time.Millisecond {
		return fmt.Sprintf("%.3gµs", float64(d)/1e3)
	}
	return dur(d)
}

func commas(v float64) string {
	n := int64(v + 0.5)
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func oneLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
