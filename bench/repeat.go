package bench

import (
	"fmt"
	"sort"
	"time"
)

// medians folds repeated runs into one result per side: the run with the
// median rate (its series and notes), with the median latencies and CPU
// per op of all runs. A side that failed in any run keeps that run's
// error.
func medians(runs [][]*Result) []*Result {
	out := make([]*Result, len(runs[0]))
	for i := range out {
		var rs []*Result
		for _, run := range runs {
			if i < len(run) {
				rs = append(rs, run[i])
			}
		}
		out[i] = medianResult(rs)
	}
	return out
}

func medianResult(rs []*Result) *Result {
	var ok []*Result
	for _, r := range rs {
		if failed(r) {
			return r
		}
		ok = append(ok, r)
	}
	rate := func(r *Result) float64 {
		switch {
		case r.ValueUnit != "":
			return r.Value
		case r.Records > 0:
			return r.RecordsSec()
		}
		return r.OpsSec()
	}
	sorted := append([]*Result(nil), ok...)
	sort.Slice(sorted, func(a, b int) bool { return rate(sorted[a]) < rate(sorted[b]) })
	m := *sorted[len(sorted)/2]
	m.P50 = medianDur(ok, func(r *Result) time.Duration { return r.P50 })
	m.P99 = medianDur(ok, func(r *Result) time.Duration { return r.P99 })
	m.P999 = medianDur(ok, func(r *Result) time.Duration { return r.P999 })
	// CPU scaled so that CPUPerOp is the median per-op figure.
	if per := medianDur(ok, (*Result).CPUPerOp); per > 0 {
		n := m.Records
		if n == 0 {
			n = m.Ops
		}
		m.CPU = per * time.Duration(n)
	}
	for _, r := range ok {
		if r.Err != nil && m.Err == nil {
			m.Err = r.Err
		}
	}
	return &m
}

func medianDur(rs []*Result, f func(*Result) time.Duration) time.Duration {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = float64(f(r))
	}
	return time.Duration(median(v))
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// spread is "median× (min–max×)" of per-run ratios.
func spread(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	if len(v) == 1 {
		return fmt.Sprintf("%.2f×", v[0])
	}
	return fmt.Sprintf("%.2f× (%.2f–%.2f×)", median(v), lo, hi)
}

// loadRange is the one-minute load averages the runs began at.
func loadRange(out *Outcome) string {
	lo, hi := -1.0, -1.0
	for _, run := range out.Runs {
		for _, r := range run {
			if r.Load <= 0 {
				continue
			}
			if lo < 0 || r.Load < lo {
				lo = r.Load
			}
			hi = max(hi, r.Load)
		}
	}
	switch {
	case lo < 0:
		return ""
	case lo == hi:
		return fmt.Sprintf("load average %.1f", lo)
	}
	return fmt.Sprintf("load average %.1f–%.1f", lo, hi)
}

// runLines lists a repeated scenario's runs one by one for the sides no
// ratio line covers (a scenario with one side: compact-clean, failover):
// the median and range of the headline, then each run's load average
// and figures (its Summary, or its headline). Nothing for one run.
func runLines(out *Outcome) []string {
	if len(out.Runs) < 2 || len(comparisons(out)) > 0 {
		return nil
	}
	s := out.Scenario
	var lines []string
	for i, res := range out.Results {
		if v := headValues(out, i); len(v) > 0 {
			lines = append(lines, fmt.Sprintf("%s: %s over %d runs: %s; the notes above are the median run's",
				res.Side, headCol(s, out), len(v), valueSpread(v)))
		}
		for n, run := range out.Runs {
			if i >= len(run) {
				continue
			}
			r := run[i]
			what := r.Summary
			switch {
			case failed(r):
				what = "failed: " + oneLine(r.Err)
			case what == "":
				what = headline(s, r) + " " + headCol(s, out)
			}
			lines = append(lines, fmt.Sprintf("%s run %d (load average %.1f): %s", res.Side, n+1, r.Load, what))
		}
	}
	return lines
}

// headValues is the i-th side's headline figure in every run it did not
// fail.
func headValues(out *Outcome, i int) []float64 {
	var v []float64
	for _, run := range out.Runs {
		if i < len(run) && !failed(run[i]) {
			v = append(v, headValue(out.Scenario, run[i]))
		}
	}
	return v
}

// valueSpread is "median (min–max)" of a figure over runs.
func valueSpread(v []float64) string {
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	f := func(x float64) string {
		if x < 10 {
			return fmt.Sprintf("%.2f", x) // a slow op: a failover's kills/s
		}
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("median %s (%s–%s)", f(median(v)), f(lo), f(hi))
}
