package broker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
	"kaas/storage/partlog"
)

// TestFetchLongPollWokenByAppend sends a Fetch that must wait (MaxWait
// 10s, MinBytes 1, empty log), then a Produce on another connection (a
// request on the fetch's own connection would wait for the fetch's
// answer, as on Apache). The fetch must come back with the new batch long
// before its MaxWait, woken by the append.
func TestFetchLongPollWokenByAppend(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "wake", 1, nil)
	c := brokertest.Dial(t, b.Addr())

	fetchCorr := c.Send(brokertest.FetchRequest("wake", 0, 0, 10*time.Second, 1, 1<<20, 1<<20))
	brokertest.Eventually(t, 10*time.Second, "the fetch to park", func() bool { return parkedFetches(b) > 0 })
	p := brokertest.Dial(t, b.Addr())
	produceCorr := p.Send(brokertest.ProduceRequest("wake", 0, 1, brokertest.Batch("hello")))

	// Reading with a 5s deadline asserts the fetch returned well before
	// its 10s MaxWait without timing anything else.
	corr, resp, err := c.Read(5 * time.Second)
	if err != nil {
		t.Fatalf("fetch not answered within 5s of the produce (MaxWait 10s): %v", err)
	}
	if corr != fetchCorr {
		t.Fatalf("first answer has correlation id %d, want the fetch's %d", corr, fetchCorr)
	}
	fp := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if fp.ErrorCode != 0 || fp.HighWatermark != 1 || !strings.Contains(string(fp.RecordBatches), "hello") {
		t.Fatalf("fetch answer: error %v, high watermark %d, %d bytes", kerr.ErrorForCode(fp.ErrorCode), fp.HighWatermark, len(fp.RecordBatches))
	}
	corr, resp, err = p.Read(5 * time.Second)
	if err != nil || corr != produceCorr {
		t.Fatalf("produce answer: corr %d, %v", corr, err)
	}
	if pp := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]; pp.ErrorCode != 0 || pp.BaseOffset != 0 {
		t.Fatalf("produce: %v at %d", kerr.ErrorForCode(pp.ErrorCode), pp.BaseOffset)
	}
}

// TestFetchHonoursMaxWait: with nothing to read, a fetch waits MaxWait
// and answers an empty, error-free partition.
func TestFetchHonoursMaxWait(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "idle", 1, nil)
	c := brokertest.Dial(t, b.Addr())
	start := time.Now()
	req := brokertest.FetchRequest("idle", 0, 0, 300*time.Millisecond, 1, 1<<20, 1<<20)
	req.SetVersion(11) // librdkafka's version: records are not nullable in practice
	resp := c.RoundTrip(req).(*kmsg.FetchResponse)
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("an empty long poll returned after %v, before its MaxWait of 300ms", waited)
	}
	fp := resp.Topics[0].Partitions[0]
	if fp.ErrorCode != 0 || len(fp.RecordBatches) != 0 || fp.HighWatermark != 0 {
		t.Fatalf("empty fetch: %v, %d bytes, high watermark %d", kerr.ErrorForCode(fp.ErrorCode), len(fp.RecordBatches), fp.HighWatermark)
	}
	if fp.RecordBatches == nil {
		t.Fatal("empty records sent as null (size -1): librdkafka rejects that; Apache sends size 0")
	}
}

// TestFetchByteLimits pins Fetch's MaxBytes and PartitionMaxBytes: whole
// batches only, at least one batch from the first partition with data
// even when it exceeds both limits (KIP-74), nothing from later
// partitions once the response budget is spent.
func TestFetchByteLimits(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "limits", 2, nil)
	c := brokertest.Dial(t, b.Addr())
	value := strings.Repeat("x", 1000)
	var size int
	for p := int32(0); p < 2; p++ {
		for i := 0; i < 4; i++ {
			batch := brokertest.Batch(value, value, value) // 3 records per batch
			size = len(batch)
			pr := c.RoundTrip(brokertest.ProduceRequest("limits", p, -1, batch)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
			if pr.ErrorCode != 0 {
				t.Fatal(kerr.ErrorForCode(pr.ErrorCode))
			}
		}
	}
	fetch := func(offset int64, maxBytes, partMax int32) [2][]int64 {
		t.Helper()
		req := brokertest.FetchRequest("limits", 0, offset, 0, 1, maxBytes, partMax)
		p1 := req.Topics[0].Partitions[0]
		p1.Partition = 1
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, p1)
		resp := c.RoundTrip(req).(*kmsg.FetchResponse)
		var out [2][]int64
		for i, fp := range resp.Topics[0].Partitions {
			if fp.ErrorCode != 0 {
				t.Fatalf("partition %d: %v", i, kerr.ErrorForCode(fp.ErrorCode))
			}
			batches, err := partlog.SplitBatches(fp.RecordBatches)
			if err != nil {
				t.Fatalf("partition %d: a fetch answer must hold whole batches: %v", i, err)
			}
			for _, bt := range batches {
				h, _ := partlog.ParseBatchHeader(bt)
				out[i] = append(out[i], h.BaseOffset)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name            string
		offset          int64
		maxBytes, part  int32
		want0, wantRest []int64
	}{
		{"no limits", 0, 1 << 20, 1 << 20, []int64{0, 3, 6, 9}, []int64{0, 3, 6, 9}},
		{"partition max below one batch (KIP-74)", 0, 1 << 20, 1, []int64{0}, []int64{0}},
		{"partition max two and a half batches", 0, 1 << 20, int32(size * 5 / 2), []int64{0, 3}, []int64{0, 3}},
		{"response max below one batch (KIP-74)", 0, 1, 1 << 20, []int64{0}, nil},
		{"response max one and a half batches", 0, int32(size * 3 / 2), 1 << 20, []int64{0}, nil},
		{"response max five and a half batches", 0, int32(size * 11 / 2), 1 << 20, []int64{0, 3, 6, 9}, []int64{0}},
		{"offset inside a batch starts at that batch", 4, 1 << 20, 1 << 20, []int64{3, 6, 9}, []int64{3, 6, 9}},
		{"offset at the high watermark", 12, 1 << 20, 1 << 20, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fetch(tc.offset, tc.maxBytes, tc.part)
			if !equalOffsets(got[0], tc.want0) || !equalOffsets(got[1], tc.wantRest) {
				t.Fatalf("batches %v / %v, want %v / %v (batch size %d)", got[0], got[1], tc.want0, tc.wantRest, size)
			}
		})
	}

	// Outside [log start, high watermark]: OFFSET_OUT_OF_RANGE, with the
	// watermarks so the client can reset.
	resp := c.RoundTrip(brokertest.FetchRequest("limits", 0, 13, 0, 1, 1<<20, 1<<20)).(*kmsg.FetchResponse)
	fp := resp.Topics[0].Partitions[0]
	if fp.ErrorCode != kerr.OffsetOutOfRange.Code || fp.HighWatermark != 12 || fp.LogStartOffset != 0 {
		t.Fatalf("fetch past the end: %v, high watermark %d, log start %d", kerr.ErrorForCode(fp.ErrorCode), fp.HighWatermark, fp.LogStartOffset)
	}
}

func equalOffsets(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFetchMinBytes: a long poll returns once MinBytes are ready, not at
// the first append: with two produces (on another connection) after it,
// it answers with both batches, well before its MaxWait.
func TestFetchMinBytes(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "minbytes", 1, nil)
	c := brokertest.Dial(t, b.Addr())
	first, second := brokertest.Batch(strings.Repeat("a", 300)), brokertest.Batch(strings.Repeat("b", 300))
	fetchCorr := c.Send(brokertest.FetchRequest("minbytes", 0, 0, 10*time.Second, int32(len(first)+1), 1<<20, 1<<20))
	brokertest.Eventually(t, 10*time.Second, "the fetch to park", func() bool { return parkedFetches(b) > 0 })
	p := brokertest.Dial(t, b.Addr())
	p.RoundTrip(brokertest.ProduceRequest("minbytes", 0, 1, first))
	p.RoundTrip(brokertest.ProduceRequest("minbytes", 0, 1, second))
	corr, resp, err := c.Read(5 * time.Second)
	if err != nil || corr != fetchCorr {
		t.Fatalf("fetch not answered within 5s (MaxWait 10s): corr %d, %v", corr, err)
	}
	batches, err := partlog.SplitBatches(resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].RecordBatches)
	if err != nil || len(batches) != 2 {
		t.Fatalf("the long poll returned %d batches (%v), want both: one batch is below MinBytes", len(batches), err)
	}
}

// TestFetchLongPollOverManyPartitionsWokenByOne: a fetch waiting on 50
// partitions is woken by an append to one of them and answers that
// partition's batch, every other partition empty. MaxWait is a minute, so
// an answer within the read's bound can only be the wake-up.
func TestFetchLongPollOverManyPartitionsWokenByOne(t *testing.T) {
	b := brokertest.Start(t)
	const n, hit = 50, 37
	brokertest.CreateTopic(t, b.Addr(), "many", n, nil)
	c := brokertest.Dial(t, b.Addr())
	fetchCorr := c.Send(fetchAll("many", make([]int64, n), time.Minute, 1))
	brokertest.Eventually(t, 10*time.Second, "the fetch to park", func() bool { return parkedFetches(b) > 0 })
	p := brokertest.Dial(t, b.Addr())
	p.Send(brokertest.ProduceRequest("many", hit, 1, brokertest.Batch("hello")))

	corr, resp, err := c.Read(40 * time.Second)
	if err != nil || corr != fetchCorr {
		t.Fatalf("fetch (MaxWait 1m) not answered after the produce: corr %d, %v", corr, err)
	}
	for _, fp := range resp.(*kmsg.FetchResponse).Topics[0].Partitions {
		switch {
		case fp.ErrorCode != 0:
			t.Fatalf("partition %d: %v", fp.Partition, kerr.ErrorForCode(fp.ErrorCode))
		case fp.Partition == hit && (fp.HighWatermark != 1 || !strings.Contains(string(fp.RecordBatches), "hello")):
			t.Fatalf("partition %d: high watermark %d, %d bytes; want the appended batch", hit, fp.HighWatermark, len(fp.RecordBatches))
		case fp.Partition != hit && len(fp.RecordBatches) != 0:
			t.Fatalf("partition %d: %d bytes from an empty partition", fp.Partition, len(fp.RecordBatches))
		}
	}
}
