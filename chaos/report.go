package chaos

import (
	"fmt"
	"slices"
	"strings"
)

// Summary is the report on one line: the faults by kind, the figures,
// every anomaly count, and OK or FAIL. label comes first (the seed, the
// duration, whether partitions ran).
func (r Report) Summary(label string) string {
	var b strings.Builder
	b.WriteString(label)
	b.WriteString(" | faults")
	var kinds []string
	for _, k := range faultKinds {
		kinds = append(kinds, k.kind)
	}
	for k := range r.Stats.Faults {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	for _, k := range kinds {
		fmt.Fprintf(&b, " %s=%d", k, r.Stats.Faults[k])
	}
	s := r.Stats
	fmt.Fprintf(&b, " | sends=%d acked=%d unknown=%d | txn committed=%d aborted=%d unknown=%d | eos committed=%d aborted=%d unknown=%d | polled=%d read=%d |",
		s.Sends, s.Acked, s.UnknownSends, s.Committed, s.Aborted, s.Unknown, s.EOSCommitted, s.EOSAborted, s.EOSUnknown, s.Polled, s.Final)
	for _, a := range Anomalies {
		fmt.Fprintf(&b, " %s=%d", a, r.Counts[a])
	}
	if n := r.Total(); n > 0 {
		fmt.Fprintf(&b, " | FAIL (%d anomalies)", n)
	} else {
		b.WriteString(" | OK")
	}
	return b.String()
}

// Evidence is every anomaly's examples, one per line.
func (r Report) Evidence() string {
	var b strings.Builder
	for _, a := range Anomalies {
		if r.Counts[a] == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s: %d\n", a, r.Counts[a])
		for _, e := range r.Examples[a] {
			fmt.Fprintf(&b, "  %s\n", e)
		}
		if more := r.Counts[a] - len(r.Examples[a]); more > 0 {
			fmt.Fprintf(&b, "  … and %d more\n", more)
		}
	}
	return b.String()
}
