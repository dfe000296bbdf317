package bench

// fsyncCounts reads, from an in-process kaas, how many fsyncs each kind of
// log has done so far: partition logs (kaas_fsyncs_total), transaction
// state slots and offsets slots (their fsync histograms' counts).
type fsyncCounts struct {
	ok                        bool
	partition, txnLog, offset float64
}

func readFsyncCounts(e *Env) fsyncCounts {
	if e.Target == nil || e.Target.Metrics == nil {
		return fsyncCounts{}
	}
	fams, err := e.Target.Metrics.Registry.Gather()
	if err != nil {
		return fsyncCounts{}
	}
	c := fsyncCounts{ok: true}
	for _, f := range fams {
		for _, m := range f.Metric {
			switch f.GetName() {
			case "kaas_fsyncs_total":
				c.partition += m.GetCounter().GetValue()
			case "kaas_txn_log_fsync_duration_seconds":
				c.txnLog += float64(m.GetHistogram().GetSampleCount())
			case "kaas_offsets_fsync_duration_seconds":
				c.offset += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return c
}

// fsyncsPerOpNote says how many fsyncs of each kind the measured window
// did per op (since before, read at e.Begin): the fsyncs on the critical
// path of one transaction or commit, shared by group commit.
func fsyncsPerOpNote(e *Env, before fsyncCounts, what string) {
	after := readFsyncCounts(e)
	ops := float64(e.Rec.ops.Load())
	if !before.ok || !after.ok || ops == 0 {
		return
	}
	e.Note("fsyncs per %s: %.2f partition logs, %.2f transaction state slots, %.2f offsets slots (%.0f %ss)", what,
		(after.partition-before.partition)/ops, (after.txnLog-before.txnLog)/ops, (after.offset-before.offset)/ops, ops, what)
}
