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

// ratioLine compares every other side with the reference (the scenario's
// Reference, or the second side: kfake, or bare protoactor): throughput
// ratio (above 1: the side is faster), p99 ratio (above 1: the side is slower) and process
// CPU per record or op (above 1: the side costs more). With repeated runs
// each figure is the median of the per-run ratios, with their range.
func ratioLine(out *Outcome) string {
	if len(out.Results) < 2 {
		return ""
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
	var parts []string
	for i, a := range out.Results {
		if i == refAt {
			continue
		}
		var rate, p99, cpu []float64
		for _, run := range runs {
			if len(run) <= max(i, refAt) {
				continue
			}
			a, ref := run[i], run[refAt]
			if failed(a) || failed(ref) {
				continue
			}
			if bv := headValue(out.Scenario, ref); bv != 0 {
				rate = append(rate, headValue(out.Scenario, a)/bv)
			}
			if a.P99 > 0 && ref.P99 > 0 {
				p99 = append(p99, float64(a.P99)/float64(ref.P99))
			}
			if a.CPUPerOp() > 0 && ref.CPUPerOp() > 0 && a.ValueUnit == "" {
				cpu = append(cpu, float64(a.CPUPerOp())/float64(ref.CPUPerOp()))
			}
		}
		if len(rate) == 0 {
			continue
		}
		line := fmt.Sprintf("ratio %s/%s: %s %s", a.Side, out.Results[refAt].Side, headCol(out.Scenario, out), spread(rate))
		if len(p99) > 0 {
			line += ", p99 latency " + spread(p99)
		}
		if len(cpu) > 0 {
			line += fmt.Sprintf(", CPU per %s %s", perWhat(out), spread(cpu))
		}
		parts = append(parts, line)
	}
	if len(parts) == 0 {
		return ""
	}
	line := strings.Join(parts, "; ")
	if len(runs) > 1 {
		line += fmt.Sprintf(" (medians of %d runs, sides alternating)", len(runs))
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
