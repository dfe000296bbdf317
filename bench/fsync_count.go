package bench

import (
	"fmt"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// fsyncCounts reads, from an in-process kaas, how many fsyncs each kind of
// log has done so far: partition logs (kaas_fsyncs_total), transaction
// state slots and offsets slots (their fsync histograms' counts).
type fsyncCounts struct {
	ok                        bool
	partition, txnLog, offset float64
	// requests and errors answered, by API (errors by "API error").
	requests, errors map[string]float64
	// fsyncs holds the fsync duration histograms, by metric
	// (fsyncLatencyNote).
	fsyncs map[string]*dto.Histogram
}

func readFsyncCounts(e *Env) fsyncCounts {
	if e.Target == nil || e.Target.Metrics == nil {
		return fsyncCounts{}
	}
	fams, err := e.Target.Metrics.Registry.Gather()
	if err != nil {
		return fsyncCounts{}
	}
	c := fsyncCounts{ok: true, requests: map[string]float64{}, errors: map[string]float64{}, fsyncs: map[string]*dto.Histogram{}}
	for _, f := range fams {
		for _, m := range f.Metric {
			switch f.GetName() {
			case "kaas_requests_total":
				c.requests[labelValue(m.Label, "api")] += m.GetCounter().GetValue()
			case "kaas_request_errors_total":
				c.errors[labelValue(m.Label, "api")+" "+labelValue(m.Label, "error")] += m.GetCounter().GetValue()
			case "kaas_fsync_duration_seconds":
				c.fsyncs[f.GetName()] = addHistogram(c.fsyncs[f.GetName()], m.GetHistogram())
			case "kaas_fsyncs_total":
				c.partition += m.GetCounter().GetValue()
			case "kaas_txn_log_fsync_duration_seconds":
				c.txnLog += float64(m.GetHistogram().GetSampleCount())
				c.fsyncs[f.GetName()] = addHistogram(c.fsyncs[f.GetName()], m.GetHistogram())
			case "kaas_share_state_fsync_duration_seconds":
				c.fsyncs[f.GetName()] = addHistogram(c.fsyncs[f.GetName()], m.GetHistogram())
			case "kaas_offsets_fsync_duration_seconds":
				c.offset += float64(m.GetHistogram().GetSampleCount())
				c.fsyncs[f.GetName()] = addHistogram(c.fsyncs[f.GetName()], m.GetHistogram())
			}
		}
	}
	return c
}

// fsyncsPerOpNote says how many fsyncs of each kind the measured window
// did per op (since before, read at e.Begin): the fsyncs on the critical
// path of one transaction or commit, shared by group commit. It returns
// the fsyncs of all kinds per op (0: not read).
func fsyncsPerOpNote(e *Env, before fsyncCounts, what string) float64 {
	after := readFsyncCounts(e)
	ops := float64(e.Rec.ops.Load())
	if !before.ok || !after.ok || ops == 0 {
		return 0
	}
	e.Note("fsyncs per %s: %.2f partition logs, %.2f transaction state slots, %.2f offsets slots (%.0f %ss)", what,
		(after.partition-before.partition)/ops, (after.txnLog-before.txnLog)/ops, (after.offset-before.offset)/ops, ops, what)
	// Requests per op tell retries apart from work: a client that is
	// told CONCURRENT_TRANSACTIONS (or any retriable error) sends again.
	e.Note("requests per %s: %s; errors: %s", what, perOp(before.requests, after.requests, ops), perOp(before.errors, after.errors, ops))
	return (after.partition - before.partition + after.txnLog - before.txnLog + after.offset - before.offset) / ops
}

// perOp lists after-before per op, by key, sorted; "none" when empty.
func perOp(before, after map[string]float64, ops float64) string {
	keys := make([]string, 0, len(after))
	for k, v := range after {
		if v > before[k] {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "none"
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.2f", k, (after[k]-before[k])/ops)
	}
	return strings.Join(parts, ", ")
}

// labelValue is the value of a series' label name ("" when absent).
func labelValue(ls []*dto.LabelPair, name string) string {
	for _, l := range ls {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// produceFsyncNote says how many partition-log fsyncs each Produce
// request of the measured window cost (each partition of a request waits
// for one of its own; group commit shares one between the requests in
// flight) and how long they took: the disk's share of a request's time on
// the wire.
func produceFsyncNote(e *Env, before fsyncCounts, timer *requestTimer) {
	after := readFsyncCounts(e)
	reqs := float64(timer.h.Snapshot().Count())
	if !before.ok || !after.ok || reqs == 0 {
		return
	}
	e.Note("partition log fsyncs per Produce request: %.2f", (after.partition-before.partition)/reqs)
	fsyncLatencyNote(e, before)
}
