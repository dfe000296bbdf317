package broker

import (
	"testing"

	"kaas/storage/partlog"
	"kaas/storage/partlog/batchtest"
)

// TestCountRecords: the records-out metric counts the records of magic-2
// batches (compacted ones, with offset gaps, included) and one per message
// of the old formats that Fetch v0–3 answer — never a negative count,
// which once made the Prometheus counter panic in a fetch.
func TestCountRecords(t *testing.T) {
	v2 := append(batchtest.Plain(1, "a", "b", "c"), batchtest.Plain(2, "d")...)
	gappy := partlog.AppendBatch(nil, 10, 0, []partlog.Rec{{OffsetDelta: 0, Timestamp: 1}, {OffsetDelta: 7, Timestamp: 1}})
	for _, c := range []struct {
		name string
		data []byte
		want int
	}{
		{"magic 2", v2, 4},
		{"compacted", gappy, 2},
	} {
		if got := countRecords(c.data); got != c.want {
			t.Errorf("%s: %d records, want %d", c.name, got, c.want)
		}
	}
	for _, magic := range []int8{0, 1} {
		// Values chosen so that bytes 23–26 of a message (past its key)
		// read as a negative number.
		set, err := partlog.DownConvert(batchtest.Plain(1, "\xff\xff\xff\xff", "\xff\xff\xff\xff", "x"), magic, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := countRecords(set); got != 3 {
			t.Errorf("magic %d: %d records, want 3", magic, got)
		}
	}
}
