package wire

import (
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// allocated is the bytes fn allocates (halved under the race detector,
// which makes kmsg allocate each array twice, once as garbage).
func allocated(fn func()) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	n := int64(after.TotalAlloc - before.TotalAlloc)
	if raceEnabled {
		n /= 2
	}
	return n
}

// The estimate made before decoding is at least what decoding takes, for
// the cheapest elements an attacker can send (issue 9 row 10: a 50 MB
// Produce of 8.3 million empty topics took 2.1 GB).
func TestDecodedSizeBoundsDecoding(t *testing.T) {
	emptyTopics := kmsg.NewPtrProduceRequest()
	emptyTopics.SetVersion(9)
	emptyTopics.Topics = make([]kmsg.ProduceRequestTopic, 40_000)
	nullTopics := kmsg.NewPtrMetadataRequest()
	nullTopics.SetVersion(4)
	nullTopics.Topics = make([]kmsg.MetadataRequestTopic, 40_000)
	emptyPartitions := kmsg.NewPtrFetchRequest()
	emptyPartitions.SetVersion(12)
	emptyPartitions.Topics = []kmsg.FetchRequestTopic{{Topic: "t", Partitions: make([]kmsg.FetchRequestTopicPartition, 20_000)}}
	commits := kmsg.NewPtrOffsetCommitRequest()
	commits.SetVersion(8)
	commits.Topics = make([]kmsg.OffsetCommitRequestTopic, 40_000)
	for _, req := range []kmsg.Request{emptyTopics, nullTopics, emptyPartitions, commits} {
		frame := frameOf(t, req, 1, "c")
		h, err := ParseHeader(frame)
		if err != nil {
			t.Fatal(err)
		}
		est := DecodedSize(h, frame)
		var perr error
		got := allocated(func() { _, _, perr = ParseRequest(frame) })
		if perr != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), perr)
		}
		if got > est {
			t.Errorf("%s v%d: a %d-byte frame allocated %d bytes decoding, over the estimate %d", kmsg.NameForKey(req.Key()), req.GetVersion(), len(frame), got, est)
		}
		if est < 8*int64(len(frame)) {
			t.Errorf("%s v%d: estimate %d for a %d-byte frame of empty elements: the amplification is not seen", kmsg.NameForKey(req.Key()), req.GetVersion(), est, len(frame))
		}
	}
}

// A legitimately large Produce (few partitions, big batches) is estimated
// at about its size, at every version kaas serves.
func TestDecodedSizeOfALargeProduceIsItsSize(t *testing.T) {
	for v := int16(3); v <= 10; v++ {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(v)
		req.TransactionID = kmsg.StringPtr("txn")
		for i := range 4 {
			topic := kmsg.NewProduceRequestTopic()
			topic.Topic = "topic"
			for p := range 8 {
				part := kmsg.NewProduceRequestTopicPartition()
				part.Partition = int32(p)
				part.Records = make([]byte, 100_000+i)
				topic.Partitions = append(topic.Partitions, part)
			}
			req.Topics = append(req.Topics, topic)
		}
		frame := frameOf(t, req, 1, "producer")
		h, _ := ParseHeader(frame)
		entries, tagged, ok := produceShape(v, frame)
		if !ok || entries != 4+32 || tagged != 0 {
			t.Fatalf("v%d: counted %d entries, %d tagged (ok %v), want 36 and 0", v, entries, tagged, ok)
		}
		if est := DecodedSize(h, frame); est > int64(len(frame))+64<<10 {
			t.Fatalf("v%d: estimate %d for a %d-byte produce", v, est, len(frame))
		}
	}
}

// Unknown tagged fields on every element of a flexible request make kmsg
// keep a map per element; the estimate counts that too.
func TestDecodedSizeCountsTaggedElements(t *testing.T) {
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(12)
	meta.Topics = make([]kmsg.MetadataRequestTopic, 20_000)
	for i := range meta.Topics {
		meta.Topics[i].UnknownTags.Set(99, nil)
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(9)
	produce.Topics = make([]kmsg.ProduceRequestTopic, 20_000)
	for i := range produce.Topics {
		produce.Topics[i].UnknownTags.Set(99, nil)
	}
	for _, req := range []kmsg.Request{meta, produce} {
		frame := frameOf(t, req, 1, "c")
		h, _ := ParseHeader(frame)
		est := DecodedSize(h, frame)
		var perr error
		got := allocated(func() { _, _, perr = ParseRequest(frame) })
		if perr != nil {
			t.Fatal(perr)
		}
		if got > est {
			t.Errorf("%s v%d with a tag on every element: allocated %d decoding a %d-byte frame, over the estimate %d", kmsg.NameForKey(req.Key()), req.GetVersion(), got, len(frame), est)
		}
	}
}
