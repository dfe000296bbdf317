package partlog

import (
	"fmt"
	"testing"
	"time"
)

// TestCleanStatsForTheGauges: a pass reports what Apache's cleaner gauges
// are made of: the share of its budget its key map filled, its wall
// time, and how far past max.compaction.lag.ms its first dirty record
// was (a log below min.cleanable.dirty.ratio cleaned for that lag alone).
func TestCleanStatsForTheGauges(t *testing.T) {
	cfg := compactConfig()
	cfg.MinCleanableRatio = 1 // only the lag makes a pass due
	cfg.MaxCompactionLagMs = 1000
	l := openLog(t, t.TempDir(), cfg)
	for i := 0; i < 60; i++ {
		appendSync(t, l, t0, keyedBatch(-1, -1, -1, 0, t0.UnixMilli()+int64(i), kv{key: fmt.Sprintf("k%d", i%4), value: "v"}))
	}
	if p := l.PlanClean(t0, l.HighWatermark(), nil, "t0"); p != nil {
		t.Fatal("a pass planned before the lag passed, below the dirty ratio")
	}
	res := cleanOnce(t, l, t0.Add(time.Minute), nil, 1<<20)
	if res == nil {
		t.Fatal("no pass once max.compaction.lag.ms passed")
	}
	st := res.Stats
	if d := st.CompactionDelay; d < 58*time.Second || d > time.Minute {
		t.Fatalf("compaction delay %v, want the minute less the 1 s lag", d)
	}
	if st.MapBudget != 1<<20 || st.MapBytes <= 0 || st.MapBytes > st.MapBudget || st.Elapsed <= 0 {
		t.Fatalf("map %d of %d bytes, elapsed %v", st.MapBytes, st.MapBudget, st.Elapsed)
	}
}
