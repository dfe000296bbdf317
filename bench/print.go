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
// Reference, or the second side: kfake, or the plain channel): throughput
// ratio (above 1: the side is faster) and p99 ratio (above 1: the side is
// slower).
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
	ref := out.Results[refAt]
	if failed(ref) {
		return ""
	}
	bv := headValue(out.Scenario, ref)
	var parts []string
	for i, a := range out.Results {
		if i == refAt || failed(a) || bv == 0 {
			continue
		}
		line := fmt.Sprintf("ratio %s/%s: %s %.2f×", a.Side, ref.Side, headCol(out.Scenario, out), headValue(out.Scenario, a)/bv)
		if a.P99 > 0 && ref.P99 > 0 {
			line += fmt.Sprintf(", p99 latency %.2f×", float64(a.P99)/float64(ref.P99))
		}
		parts = append(parts, line)
	}
	return strings.Join(parts, "; ")
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
