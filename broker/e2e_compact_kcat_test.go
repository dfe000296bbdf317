package broker_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"kaas/broker/brokertest"
)

// TestCompactedTopicKcat: librdkafka (kcat) produces zstd-compressed
// keyed batches and a tombstone (-Z: an empty value is null) to a
// compacted topic; after cleaning, kcat reads back the latest value per
// key, the tombstoned key gone once delete.retention.ms passed.
func TestCompactedTopicKcat(t *testing.T) {
	b := brokertest.Start(t)
	compactedTopic(t, b.Addr(), "kcat-table")
	want := map[string]string{}
	for round := 0; round < 6; round++ {
		var lines []string
		for k := 0; k < 30; k++ {
			v := fmt.Sprintf("round-%d-padding-padding-padding", round)
			lines = append(lines, fmt.Sprintf("key-%02d:%s", k, v))
			want[fmt.Sprintf("key-%02d", k)] = v
		}
		if round == 3 {
			lines = append(lines, "gone:soon")
		}
		if round == 4 {
			lines = append(lines, "gone:")
		}
		kcat(t, strings.Join(lines, "\n")+"\n", "-b", b.Addr(), "-t", "kcat-table", "-P", "-K:", "-Z", "-z", "zstd", "-q")
	}
	// Other keys after them, so the table's batches are all in closed
	// (cleanable) segments.
	for round := 0; round < 10; round++ {
		var lines []string
		for k := 0; k < 30; k++ {
			lines = append(lines, fmt.Sprintf("filler-%02d:%d-padding-padding-padding", k, round))
		}
		kcat(t, strings.Join(lines, "\n")+"\n", "-b", b.Addr(), "-t", "kcat-table", "-P", "-K:", "-z", "zstd", "-q")
	}
	var got map[string]string
	var n int
	var out string
	brokertest.Eventually(t, 30*time.Second, "kcat to read one record per table key, the tombstoned one gone", func() bool {
		out = kcat(t, "", "-b", b.Addr(), "-t", "kcat-table", "-C", "-e", "-o", "beginning", "-q", "-Z", "-f", "%k=%s\n")
		got, n = map[string]string{}, 0
		gone := false
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			k, v, _ := strings.Cut(l, "=")
			if strings.HasPrefix(k, "filler-") {
				continue
			}
			n++
			gone = gone || k == "gone"
			got[k] = v
		}
		return !gone && n == len(want)
	})
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("kcat read table %v, want %v", got, want)
	}
}
