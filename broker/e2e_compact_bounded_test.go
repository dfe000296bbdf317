package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

// alterBroker sets dynamic broker configs (the cluster default).
func alterBroker(t *testing.T, addr string, kv ...string) {
	t.Helper()
	var cs []kadm.AlterConfig
	for i := 0; i+1 < len(kv); i += 2 {
		cs = append(cs, set(kv[i], kv[i+1]))
	}
	resp, err := brokertest.Admin(t, addr).AlterBrokerConfigs(brokertest.Context(t, 10*time.Second), cs)
	if err != nil || resp[0].Err != nil {
		t.Fatalf("altering %v: %v %v", kv, err, resp[0].Err)
	}
}

// TestCompactedPartitionLargerThanDedupeBuffer: with
// log.cleaner.dedupe.buffer.size far below what a partition's keys need
// (400 keys of 7 bytes at 55 bytes an entry: 22,000 bytes, in a 4,096
// byte map: at most 74 keys a pass), the cleaner cleans it in several
// passes, and what a consumer reads back is still exactly the latest
// value of every key at its original offset, tombstoned keys gone.
func TestCompactedPartitionLargerThanDedupeBuffer(t *testing.T) {
	b := brokertest.Start(t)
	// No checks while producing, so every pass after is the cleaner
	// working through a log its map cannot hold at once.
	alterBroker(t, b.Addr(), "log.cleaner.dedupe.buffer.size", "4096", "log.cleaner.backoff.ms", "3600000")
	brokertest.CreateTopic(t, b.Addr(), "big", 1, map[string]*string{
		"cleanup.policy":            kmsg.StringPtr("compact"),
		"internal.segment.bytes":    kmsg.StringPtr("4096"),
		"min.cleanable.dirty.ratio": kmsg.StringPtr("0.01"),
		"delete.retention.ms":       kmsg.StringPtr("500"),
	})
	cl := brokertest.Client(t, b.Addr(), kgo.ProducerLinger(0))
	at := map[int64]produced{}
	const keys = 400
	for round := 0; round < 3; round++ {
		for k := 0; k < keys; k++ {
			v := fmt.Sprintf("v%d", round)
			value := &v
			if round == 2 && k%10 == 0 {
				value = nil // a tombstone for every tenth key
			}
			produce(t, cl, "big", fmt.Sprintf("key-%03d", k), value, at)
		}
	}
	// A tail of updates to one more key fills the active segment, so
	// that every record above is in a closed segment.
	for i := 0; i < 100; i++ {
		v := fmt.Sprintf("tail-%d", i)
		produce(t, cl, "big", "tail", &v, at)
	}
	if n := metric(t, b, "kaas_log_cleaner_passes_total"); n != 0 {
		t.Fatalf("%v passes before the cleaner was woken", n)
	}
	alterBroker(t, b.Addr(), "log.cleaner.backoff.ms", "50")
	var recs []*kgo.Record
	brokertest.Eventually(t, 60*time.Second, "every key down to one record, tombstones gone", func() bool {
		recs = readTopic(t, b.Addr(), "big")
		seen := map[string]int{}
		for _, r := range recs {
			seen[string(r.Key)]++
		}
		for k, n := range seen {
			if k != "tail" && n > 1 {
				return false
			}
		}
		return len(seen) == keys*9/10+1
	})
	checkTable(t, recs, at)
	// 360 live keys at 55 bytes need 19,800 bytes of map: at least five
	// 4,096-byte passes.
	if n := metric(t, b, "kaas_log_cleaner_passes_total"); n < 5 {
		t.Fatalf("%v passes, want at least 5 for a map that holds 74 keys", n)
	}
	if n := metric(t, b, "kaas_log_cleaner_failures_total"); n != 0 {
		t.Fatalf("%v failed passes", n)
	}
	// Unthrottled (log.cleaner.io.max.bytes.per.second's default), the
	// passes never slept.
	if s := metric(t, b, "kaas_log_cleaner_throttle_seconds_total"); s != 0 || metric(t, b, "kaas_log_cleaner_io_bytes_total") == 0 {
		t.Fatalf("the unthrottled cleaner slept %vs", s)
	}
}

// TestCompactedCleanerThrottle: log.cleaner.io.max.bytes.per.second,
// set at run time, limits the passes' reads and writes. Checked on the
// cleaner's own accounting, not a stopwatch: every byte the passes read
// and wrote went through the throttle (kaas_log_cleaner_io_bytes_total
// covers kaas_log_cleaner_bytes_read_total + _written_total); those bytes
// over the time the passes ran (kaas_log_cleaner_pass_seconds_total) are
// within the rate, give or take the second's worth the bucket holds; and
// the throttle slept (kaas_log_cleaner_throttle_seconds_total), no longer
// than those bytes need at the rate.
func TestCompactedCleanerThrottle(t *testing.T) {
	b := brokertest.Start(t)
	const rate = 32768
	alterBroker(t, b.Addr(), "log.cleaner.backoff.ms", "3600000")
	brokertest.CreateTopic(t, b.Addr(), "slow", 1, map[string]*string{
		"cleanup.policy":            kmsg.StringPtr("compact"),
		"internal.segment.bytes":    kmsg.StringPtr("2048"),
		"min.cleanable.dirty.ratio": kmsg.StringPtr("0.01"),
	})
	cl := brokertest.Client(t, b.Addr(), kgo.ProducerLinger(0))
	at := map[int64]produced{}
	for i := 0; i < 1000; i++ {
		v := fmt.Sprintf("value-%d-padding-padding-padding-padding", i)
		produce(t, cl, "slow", fmt.Sprintf("k%d", i%10), &v, at)
	}
	alterBroker(t, b.Addr(), "log.cleaner.io.max.bytes.per.second", fmt.Sprint(rate), "log.cleaner.backoff.ms", "50")
	var recs []*kgo.Record
	brokertest.Eventually(t, 60*time.Second, "the throttled cleaner to compact the log", func() bool {
		recs = readTopic(t, b.Addr(), "slow")
		return len(recs) < 150 && metric(t, b, "kaas_log_cleaner_running") == 0
	})
	checkTable(t, recs, at)
	io, slept := metric(t, b, "kaas_log_cleaner_io_bytes_total"), metric(t, b, "kaas_log_cleaner_throttle_seconds_total")
	ran, passes := metric(t, b, "kaas_log_cleaner_pass_seconds_total"), metric(t, b, "kaas_log_cleaner_passes_total")
	rw := metric(t, b, "kaas_log_cleaner_bytes_read_total") + metric(t, b, "kaas_log_cleaner_bytes_written_total")
	t.Logf("%.0f passes: %.0f bytes of I/O (%.0f counted by the passes) in %.2fs of passes, %.2fs of it throttle sleep, at %d B/s",
		passes, io, rw, ran, slept, rate)
	if io < rw {
		t.Fatalf("the throttle saw %.0f bytes, the passes read and wrote %.0f: some I/O bypassed it", io, rw)
	}
	if io < 3*rate {
		t.Fatalf("only %.0f bytes of I/O: too little to see a %d B/s limit", io, rate)
	}
	// Each pass may start on a full bucket (a second's worth banked
	// while idle).
	if limit := rate * (ran + passes); io > limit {
		t.Fatalf("%.0f bytes in %.2fs of passes: over the %d B/s limit (%.0f allowed)", io, ran, rate, limit)
	}
	if slept <= 0 || slept > io/rate+0.01 {
		t.Fatalf("throttle slept %.2fs for %.0f bytes at %d B/s, want more than 0 and at most %.2fs", slept, io, rate, io/rate)
	}
}
