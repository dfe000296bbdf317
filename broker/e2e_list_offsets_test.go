package broker_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

// produceAt produces records with the given timestamps (ms) to partition
// 0 of topic, one synchronous batch per call, in order.
func produceAt(t *testing.T, cl *kgo.Client, topic string, timestamps ...int64) {
	t.Helper()
	var rs []*kgo.Record
	for _, ts := range timestamps {
		rs = append(rs, &kgo.Record{Topic: topic, Value: []byte("v"), Timestamp: time.UnixMilli(ts)})
	}
	if err := cl.ProduceSync(brokertest.Context(t, 30*time.Second), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// listOffset sends one ListOffsets request for partition 0 at version v.
func listOffset(t *testing.T, cl *kgo.Client, topic string, v int16, timestamp int64, isolation int8) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(v)
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, timestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(brokertest.Context(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

// TestListOffsetsEveryMode covers earliest (-2), latest (-1), max
// timestamp (-3, KIP-734), earliest local (-4) and lookups by timestamp,
// over a log of several segments, before and after a restart (the time
// index is persisted or rebuilt) and after DeleteRecords moved the start.
func TestListOffsetsEveryMode(t *testing.T) {
	dir := t.TempDir()
	b := brokertest.StartIn(t, dir)
	const topic = "offsets"
	// Tiny segments: every batch rolls a new one, so lookups cross segments.
	brokertest.CreateTopic(t, b.Addr(), topic, 1, map[string]*string{"internal.segment.bytes": kmsg.StringPtr("100")})
	// Old timestamps: franz-go measures delivery timeouts from them.
	cl := brokertest.Client(t, b.Addr(), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()), kgo.RecordDeliveryTimeout(0))
	// Offsets:     0     1     2     3     4     5
	produceAt(t, cl, topic, 1000, 3000, 2000)
	produceAt(t, cl, topic, 5000, 4000)
	produceAt(t, cl, topic, 2500)

	type want struct {
		offset, timestamp int64
	}
	check := func(t *testing.T, addr string, cases map[int64]want) {
		t.Helper()
		cl := brokertest.Client(t, addr)
		for v := int16(1); v <= 8; v++ {
			for ts, w := range cases {
				if ts == -3 && v < 7 || ts == -4 && v < 8 {
					continue
				}
				got := listOffset(t, cl, topic, v, ts, 0)
				if got.ErrorCode != 0 {
					t.Fatalf("v%d ts %d: %v", v, ts, kerr.ErrorForCode(got.ErrorCode))
				}
				if got.Offset != w.offset || (ts >= -3 && ts != -1 && ts != -2 && got.Timestamp != w.timestamp) {
					t.Errorf("v%d ts %d: offset %d timestamp %d, want offset %d timestamp %d", v, ts, got.Offset, got.Timestamp, w.offset, w.timestamp)
				}
			}
		}
	}
	cases := map[int64]want{
		-2:   {0, -1},
		-4:   {0, -1},
		-1:   {6, -1},
		-3:   {3, 5000}, // max timestamp
		0:    {0, 1000},
		1000: {0, 1000},
		1001: {1, 3000}, // first record in offset order with ts >= target
		2000: {1, 3000},
		3500: {3, 5000},
		4500: {3, 5000},
		5000: {3, 5000},
		5001: {-1, -1}, // none: offset -1, timestamp -1, no error
	}
	check(t, b.Addr(), cases)

	// The same through kadm's helpers.
	adm := brokertest.Admin(t, b.Addr())
	ctx := brokertest.Context(t, 10*time.Second)
	for _, tc := range []struct {
		name string
		list func() (kadm.ListedOffsets, error)
		want want
	}{
		{"start", func() (kadm.ListedOffsets, error) { return adm.ListStartOffsets(ctx, topic) }, want{0, -1}},
		{"end", func() (kadm.ListedOffsets, error) { return adm.ListEndOffsets(ctx, topic) }, want{6, -1}},
		{"max timestamp", func() (kadm.ListedOffsets, error) { return adm.ListMaxTimestampOffsets(ctx, topic) }, want{3, 5000}},
		{"after 3500ms", func() (kadm.ListedOffsets, error) { return adm.ListOffsetsAfterMilli(ctx, 3500, topic) }, want{3, 5000}},
		{"after the newest record (kadm answers the end)", func() (kadm.ListedOffsets, error) { return adm.ListOffsetsAfterMilli(ctx, 9000, topic) }, want{6, -1}},
	} {
		l, err := tc.list()
		if err != nil {
			t.Fatalf("kadm %s: %v", tc.name, err)
		}
		o, _ := l.Lookup(topic, 0)
		if o.Err != nil || o.Offset != tc.want.offset || (tc.want.timestamp >= 0 && o.Timestamp != tc.want.timestamp) {
			t.Errorf("kadm %s: offset %d timestamp %d (%v), want %d/%d", tc.name, o.Offset, o.Timestamp, o.Err, tc.want.offset, tc.want.timestamp)
		}
	}

	// The same answers after a clean restart (stored indexes) ...
	brokertest.Stop(t, b)
	b = brokertest.StartIn(t, dir)
	check(t, b.Addr(), cases)

	// ... and after a restart with every index file deleted (rebuilt).
	brokertest.Stop(t, b)
	removeIndexes(t, dir, topic+"-0")
	b = brokertest.StartIn(t, dir)
	check(t, b.Addr(), cases)

	// DeleteRecords moves earliest; lookups below it answer the log start.
	if r := deleteRecords(t, brokertest.Admin(t, b.Addr()), topic, 0, 4); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("DeleteRecords: low watermark %d, %v", r.LowWatermark, r.Err)
	}
	check(t, b.Addr(), map[int64]want{
		-2:   {4, -1},
		-1:   {6, -1},
		-3:   {4, 4000}, // the max timestamp left is 4000 at offset 4
		0:    {4, 4000},
		2500: {4, 4000},
		5000: {-1, -1},
	})
}
